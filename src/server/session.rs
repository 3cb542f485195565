//! An HTTP connection as a backend session (SKELETON).
