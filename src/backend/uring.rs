//! The io_uring backend (SKELETON).

use super::{CoreContext, Service};

pub fn run<S: Service>(_ctx: CoreContext, _service: S) -> std::io::Result<()> {
    todo!()
}
