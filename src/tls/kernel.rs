//! Kernel TLS from the TLS layer's side (`--ssl-ktls`): whether this
//! process hands records to the kernel, and the keys rustls gives up for it.
//!
//! rustls finishes the handshake as ever; then, once the session has sent
//! every record rustls made (the handshake's last flight, TLS 1.3's session
//! tickets) and taken every record it read, its secrets are extracted
//! ([`rustls::ServerConnection::dangerous_extract_secrets`]) with the
//! sequence numbers reached, and the backend installs them
//! ([`crate::backend::ktls`]). What bare secrets cannot do is ruled out
//! rather than handled: rustls sends its session tickets with the
//! handshake's last flight and none later, and a client's TLS 1.3 KeyUpdate ends the connection (Linux before 6.13
//! cannot take a new read key; the backend treats it as the end of input).
//! rustls' unbuffered `KernelConnection` would carry the key update on
//! kernels that can, at the price of a second handshake driver.

use rustls::{CipherSuite, ConnectionTrafficSecrets, ExtractedSecrets, ProtocolVersion};
use zeroize::Zeroizing;

use crate::backend::ktls::{self, Cipher, Ciphers, Keys, Secret, Version};

/// `--ssl-ktls`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Where the kernel has TLS and the negotiated cipher.
    #[default]
    Auto,
    /// rustls encrypts every record.
    Off,
}

/// The ciphers this process hands to the kernel, if any; said in one log
/// line either way.
pub fn choose(mode: Mode) -> Option<Ciphers> {
    if mode == Mode::Off {
        tracing::info!("kernel TLS off (--ssl-ktls off): rustls encrypts every record");
        return None;
    }
    match ktls::probe() {
        Ok(ciphers) => {
            tracing::info!("kernel TLS on for {ciphers}: the kernel encrypts each such connection's records after its handshake");
            Some(ciphers)
        }
        Err(why) => {
            tracing::info!("kernel TLS unavailable ({why}): rustls encrypts every record");
            None
        }
    }
}

/// The AEAD of a negotiated suite, as the kernel names it.
pub fn cipher_of(suite: CipherSuite) -> Option<Cipher> {
    use CipherSuite::*;
    match suite {
        TLS13_AES_128_GCM_SHA256
        | TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
        | TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => Some(Cipher::Aes128Gcm),
        TLS13_AES_256_GCM_SHA384
        | TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
        | TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => Some(Cipher::Aes256Gcm),
        TLS13_CHACHA20_POLY1305_SHA256
        | TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
        | TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 => Some(Cipher::Chacha20Poly1305),
        _ => None,
    }
}

/// What the kernel takes, from what rustls gave up.
pub fn keys(version: ProtocolVersion, secrets: ExtractedSecrets) -> Option<Keys> {
    let version = match version {
        ProtocolVersion::TLSv1_2 => Version::Tls12,
        ProtocolVersion::TLSv1_3 => Version::Tls13,
        _ => return None,
    };
    let (tx_cipher, tx) = secret(secrets.tx)?;
    let (rx_cipher, rx) = secret(secrets.rx)?;
    (tx_cipher == rx_cipher).then_some(Keys {
        version,
        cipher: tx_cipher,
        tx,
        rx,
    })
}

fn secret((seq, traffic): (u64, ConnectionTrafficSecrets)) -> Option<(Cipher, Secret)> {
    let (cipher, key, iv) = match &traffic {
        ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (Cipher::Aes128Gcm, key, iv),
        ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (Cipher::Aes256Gcm, key, iv),
        ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
            (Cipher::Chacha20Poly1305, key, iv)
        }
        _ => return None,
    };
    let iv: [u8; 12] = iv.as_ref().try_into().ok()?;
    Some((
        cipher,
        Secret {
            key: Zeroizing::new(key.as_ref().to_vec()),
            iv: Zeroizing::new(iv),
            seq,
        },
    ))
}
