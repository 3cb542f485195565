//! The Date header, formatted once a second (SKELETON).
