//! Sans-IO HTTP/1.1 (RFC 9112): bytes in, events out. Nothing here touches a
//! socket; every rule is unit-tested on bytes.
//!
//! [`ServerConn`] is one connection's state machine. Feed it what was read with
//! [`ServerConn::recv`], pull [`Event`]s with [`ServerConn::next_event`]: a
//! [`RequestHead`], its body as `Data` chunks, `End`; or an `Error`, after which
//! the caller writes [`ServerConn::write_error`] and closes. Answer with
//! [`ServerConn::start_response`], body bytes, and [`ServerConn::finish_response`];
//! only then does it parse the next pipelined request, so answers leave in order.
//!
//! Where the RFCs leave a choice, it is documented where it is made: request
//! validation (what is 400, 431, 501, 505) in [`head`], end of input and unread
//! bodies in [`conn`], the treatment of the app's response headers in
//! [`response`]. Every response carries `Date` (cached per second, [`date`])
//! and `Server: m0serve`.
//!
//! Behind a proxy: [`proxy_protocol`] parses a PROXY protocol preamble (the
//! connection's first bytes, see [`ServerConn::expect_preamble`]),
//! [`forwarded`] the forwarding headers, [`trusted`] the peers believed.

pub mod chunked;
pub mod conn;
pub mod date;
pub mod defaults;
pub mod error;
pub mod fields;
pub mod forwarded;
pub mod head;
pub mod proxy_protocol;
pub(crate) mod request_line;
pub mod response;
pub(crate) mod target;
pub mod trusted;

pub use conn::{Event, Limits, ServerConn};
pub use defaults::Defaults;
pub use error::HttpError;
pub use fields::Fields;
pub use head::{BodyKind, RequestHead, Version};
pub use request_line::is_tchar;
pub use response::Framing;
