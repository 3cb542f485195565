//! Flags of TLS (uvicorn's names): the certificate and key, client
//! certificates, and the oldest protocol version.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::CliError;
use crate::tls::{kernel, ClientAuth, Files, MinVersion, Settings};

#[derive(Args, Debug)]
pub(super) struct TlsArgs {
    /// Serve HTTPS (and WSS) with this PEM certificate chain, leaf first.
    #[arg(long, env = "M0SERVE_SSL_CERTFILE", value_name = "PATH")]
    ssl_certfile: Option<PathBuf>,

    /// The certificate's PEM private key (PKCS#8, PKCS#1 or SEC1; encrypted
    /// PKCS#8 with --ssl-keyfile-password) [default: the key in --ssl-certfile].
    #[arg(long, env = "M0SERVE_SSL_KEYFILE", value_name = "PATH")]
    ssl_keyfile: Option<PathBuf>,

    /// The password of an encrypted --ssl-keyfile.
    #[arg(long, env = "M0SERVE_SSL_KEYFILE_PASSWORD", value_name = "PASSWORD")]
    ssl_keyfile_password: Option<String>,

    /// PEM file of the CAs that client certificates are checked against.
    #[arg(long, env = "M0SERVE_SSL_CA_CERTS", value_name = "PATH")]
    ssl_ca_certs: Option<PathBuf>,

    /// Client certificates: none (not asked for), optional (checked when
    /// given), required (a client without a valid one fails the handshake);
    /// uvicorn's 0, 1, 2 mean the same.
    #[arg(long, env = "M0SERVE_SSL_CERT_REQS", value_name = "WHICH", default_value = "none", value_parser = parse_cert_reqs)]
    ssl_cert_reqs: ClientAuth,

    /// The oldest TLS version accepted.
    #[arg(long, env = "M0SERVE_SSL_PROTOCOL_MIN", value_enum, default_value_t = Protocol::Tls12)]
    ssl_protocol_min: Protocol,

    /// Kernel TLS: auto hands each connection's records to the kernel after
    /// its handshake where the kernel has TLS (Linux's tls module) and the
    /// negotiated cipher; off keeps them all in rustls.
    #[arg(long, env = "M0SERVE_SSL_KTLS", value_enum, default_value_t = Ktls::Auto)]
    ssl_ktls: Ktls,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Ktls {
    Auto,
    Off,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Protocol {
    #[value(name = "tls1.2")]
    Tls12,
    #[value(name = "tls1.3")]
    Tls13,
}

fn parse_cert_reqs(value: &str) -> Result<ClientAuth, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "none" | "0" => Ok(ClientAuth::None),
        "optional" | "1" => Ok(ClientAuth::Optional),
        "required" | "2" => Ok(ClientAuth::Required),
        _ => Err("expected none, optional or required (or 0, 1, 2)".into()),
    }
}

impl TlsArgs {
    /// What the flags name, checked for consistency; None without TLS.
    pub(super) fn files(&self) -> Result<Option<Files>, CliError> {
        let Some(certfile) = &self.ssl_certfile else {
            let stray = [
                (self.ssl_keyfile.is_some(), "--ssl-keyfile"),
                (
                    self.ssl_keyfile_password.is_some(),
                    "--ssl-keyfile-password",
                ),
                (self.ssl_ca_certs.is_some(), "--ssl-ca-certs"),
                (self.ssl_cert_reqs != ClientAuth::None, "--ssl-cert-reqs"),
                (
                    self.ssl_protocol_min != Protocol::Tls12,
                    "--ssl-protocol-min",
                ),
                (self.ssl_ktls != Ktls::Auto, "--ssl-ktls"),
            ];
            return match stray.iter().find(|(given, _)| *given) {
                Some((_, flag)) => Err(CliError::Usage(format!(
                    "{flag} needs --ssl-certfile (TLS is off without it)"
                ))),
                None => Ok(None),
            };
        };
        Ok(Some(Files {
            certfile: certfile.clone(),
            keyfile: self.ssl_keyfile.clone().unwrap_or_else(|| certfile.clone()),
            password: self.ssl_keyfile_password.clone(),
            ca_certs: self.ssl_ca_certs.clone(),
            client_auth: self.ssl_cert_reqs,
            min_version: match self.ssl_protocol_min {
                Protocol::Tls12 => MinVersion::Tls12,
                Protocol::Tls13 => MinVersion::Tls13,
            },
            kernel: match self.ssl_ktls {
                Ktls::Auto => kernel::Mode::Auto,
                Ktls::Off => kernel::Mode::Off,
            },
        }))
    }

    /// The loaded configuration; a file that cannot be used is one line
    /// naming it and why.
    pub(super) fn settings(&self) -> Result<Option<Settings>, CliError> {
        match self.files()? {
            None => Ok(None),
            Some(files) => files
                .load()
                .map(Some)
                .map_err(|e| CliError::Usage(e.to_string())),
        }
    }
}
