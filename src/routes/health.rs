//! The health path: a liveness probe answered on the core thread, so it
//! answers even while every Python thread is busy.

use crate::http::RequestHead;
use crate::reply::Reply;

/// 200 "OK" on GET and HEAD; 405 otherwise.
pub(super) fn answer(head: &RequestHead) -> Reply {
    if !super::is_get_or_head(head) {
        return super::method_not_allowed();
    }
    let mut reply = Reply::text(200, "OK");
    // A cached "OK" would hide a dead server from the probe.
    reply
        .headers
        .push(("Cache-Control".into(), "no-store".into()));
    reply
}
