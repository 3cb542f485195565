//! Rust-native routes, answered on the core thread with no Python: a health
//! path and static files (SKELETON).

use crate::http::RequestHead;
use crate::reply::Reply;

pub struct Router {}

impl Router {
    pub fn route(&self, _head: &RequestHead) -> Option<Reply> {
        todo!()
    }
}
