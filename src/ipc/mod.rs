//! Memory shared between the supervisor and its worker processes: a page
//! the supervisor creates and each worker inherits and maps
//! ([`shared_page`]), laid out as the workers' connection tally ([`tally`])
//! or the readiness flag ([`ready_flag`]), or one worker's heartbeat
//! ([`heartbeat`]); the metrics region
//! ([`crate::metrics::counters`]) is such a page too. Atomics only: several
//! processes write one page at once. It knows nothing of HTTP or Python.

pub mod heartbeat;
pub mod ready_flag;
pub mod shared_page;
pub mod tally;
