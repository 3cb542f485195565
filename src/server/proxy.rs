//! Behind a proxy: which peers speak for their clients, and what is taken
//! from them. The parsing is the protocol's ([`crate::http::forwarded`],
//! [`crate::http::proxy_protocol`]); this is the policy that joins it to a
//! connection's peer.
//!
//! - `--proxy-protocol`: a trusted peer's connections must open with a
//!   preamble, whose client address replaces the peer's for the whole
//!   connection. An untrusted peer's connections are read as plain HTTP
//!   (as gunicorn does): its preamble is then not HTTP and gets a 400, and
//!   a client connecting directly from elsewhere (a bystander, a probe) is
//!   served. Closing instead would also refuse those; believing it would let
//!   anyone who can reach the port name any client.
//! - `--proxy-headers`: a request whose peer (after any preamble) is trusted
//!   has its forwarding headers applied; any other request's are ordinary
//!   headers. Checking the preamble's client, not the proxy that sent the
//!   preamble, is what keeps a client behind a PROXY-protocol balancer from
//!   forging `X-Forwarded-For`.
//! - A Unix socket peer has no address: trusted only by `*`.

use crate::backend::Peer;
use crate::http::forwarded::{self, Forwarded};
use crate::http::trusted::Trusted;
use crate::http::RequestHead;

/// What is believed, from whom.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProxyConfig {
    /// `--proxy-headers`: apply a trusted peer's forwarding headers.
    pub headers: bool,
    /// `--proxy-protocol`: a trusted peer's connections open with a preamble.
    pub protocol: bool,
    /// `--forwarded-allow-ips`.
    pub trusted: Trusted,
}

impl ProxyConfig {
    /// Whether `peer` may speak for its clients.
    pub fn trusts(&self, peer: &Peer) -> bool {
        match peer {
            Peer::Tcp(addr) => self.trusted.contains(addr.ip()),
            Peer::Unix => self.trusted.all(),
        }
    }

    /// Whether a connection from `peer` must open with a preamble.
    pub fn expects_preamble(&self, peer: &Peer) -> bool {
        self.protocol && self.trusts(peer)
    }

    /// The request's peer and forwarded facts, as the application sees them.
    pub fn forwarded(&self, peer: &Peer, head: &RequestHead) -> (Peer, Forwarded) {
        if !self.headers || !self.trusts(peer) {
            return (peer.clone(), Forwarded::default());
        }
        let f = forwarded::resolve(&head.headers, &self.trusted);
        (f.client.map_or_else(|| peer.clone(), Peer::Tcp), f)
    }
}
