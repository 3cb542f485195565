//! The command line (SKELETON).

pub fn main(_args: impl IntoIterator<Item = std::ffi::OsString>) -> i32 {
    todo!()
}
