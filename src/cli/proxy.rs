//! Flags for running behind a proxy: forwarding headers, the PROXY
//! protocol, and the peers trusted for both (uvicorn's names and defaults).

use std::ffi::OsString;

use clap::builder::FalseyValueParser;
use clap::{ArgAction, Args};

use super::CliError;
use crate::http::trusted::Trusted;
use crate::server::proxy::ProxyConfig;

/// uvicorn's variable for the trusted list, read when the flag and
/// `M0SERVE_FORWARDED_ALLOW_IPS` are both unset.
const UVICORN_ENV: &str = "FORWARDED_ALLOW_IPS";

#[derive(Args, Debug)]
pub(super) struct ProxyArgs {
    /// Apply Forwarded (RFC 7239) or X-Forwarded-For/-Proto/-Host/-Port from
    /// --forwarded-allow-ips peers: the client's address, scheme and host.
    #[arg(long, env = "M0SERVE_PROXY_HEADERS", value_parser = FalseyValueParser::new(), action = ArgAction::Set,
          num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true")]
    proxy_headers: bool,

    /// Connections from --forwarded-allow-ips peers open with a PROXY protocol
    /// (v1 or v2) preamble naming the client; without one they are closed.
    #[arg(long, env = "M0SERVE_PROXY_PROTOCOL", value_parser = FalseyValueParser::new(), action = ArgAction::Set,
          num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true")]
    proxy_protocol: bool,

    /// Peers trusted for --proxy-headers and --proxy-protocol: addresses and
    /// CIDR networks, comma-separated, or * for all [default: $FORWARDED_ALLOW_IPS, else 127.0.0.1].
    #[arg(long, env = "M0SERVE_FORWARDED_ALLOW_IPS", value_name = "LIST", value_parser = Trusted::parse)]
    forwarded_allow_ips: Option<Trusted>,
}

impl ProxyArgs {
    /// The proxy configuration; `uvicorn_env` is `$FORWARDED_ALLOW_IPS`.
    pub(super) fn proxy(&self, uvicorn_env: Option<OsString>) -> Result<ProxyConfig, CliError> {
        let trusted = match (&self.forwarded_allow_ips, uvicorn_env) {
            (Some(t), _) => t.clone(),
            (None, None) => Trusted::default(),
            (None, Some(value)) => {
                let value = value
                    .to_str()
                    .ok_or_else(|| CliError::Usage(format!("{UVICORN_ENV} is not valid UTF-8")))?;
                Trusted::parse(value).map_err(|e| {
                    CliError::Usage(format!("invalid value '{value}' for {UVICORN_ENV}: {e}"))
                })?
            }
        };
        Ok(ProxyConfig {
            headers: self.proxy_headers,
            protocol: self.proxy_protocol,
            trusted,
        })
    }
}

/// `$FORWARDED_ALLOW_IPS`, as uvicorn reads it.
pub(super) fn uvicorn_env() -> Option<OsString> {
    std::env::var_os(UVICORN_ENV)
}
