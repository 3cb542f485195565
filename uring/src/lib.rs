//! m0serve's io_uring ring (SKELETON).

/// Whether this kernel lets us build a ring with the operations we use.
pub fn probe() -> std::io::Result<()> {
    todo!()
}
