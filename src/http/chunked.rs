//! Chunked transfer coding (SKELETON).
