//! The server: listener, core threads, graceful shutdown (SKELETON).

pub mod session;
