//! Kernel TLS (Linux's `tls` module): once a handshake is over, the TLS
//! layer may hand a connection's record keys to the kernel ([`install`]),
//! which from then on encrypts what is sent and decrypts what is read on
//! that socket, so the backend moves plaintext, and files by `sendfile`, as
//! on a plain connection. The session asks for it through
//! [`super::Session::kernel_tls`] at a moment when nothing of the connection
//! is in flight and every byte read from the socket ended a whole record.
//!
//! Two things stay with the backend. A record that is not application data
//! (an alert, a post-handshake message) fails a plain read with `EIO`:
//! [`read_record`] takes it with its type. And a connection it closes after
//! its last answer ends with close_notify ([`close_notify`]), sent as such a
//! record. Linux before 6.13 cannot take a new read key, so a TLS 1.3
//! KeyUpdate ends the connection: the session is told its input ended, and
//! answers what it holds.
//!
//! Elsewhere than Linux nothing is installed: [`probe`] says why.

use std::fmt;
use std::io;
use std::os::fd::BorrowedFd;

use zeroize::Zeroizing;

/// The record protocol of the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    Tls12,
    Tls13,
}

/// An AEAD the kernel may implement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cipher {
    Aes128Gcm,
    Aes256Gcm,
    Chacha20Poly1305,
}

impl Cipher {
    pub const ALL: [Cipher; 3] = [
        Cipher::Aes128Gcm,
        Cipher::Aes256Gcm,
        Cipher::Chacha20Poly1305,
    ];

    fn name(self) -> &'static str {
        match self {
            Cipher::Aes128Gcm => "AES-128-GCM",
            Cipher::Aes256Gcm => "AES-256-GCM",
            Cipher::Chacha20Poly1305 => "ChaCha20-Poly1305",
        }
    }
}

/// One direction's keys: the AEAD key, the 12-byte IV TLS derives (for
/// AES-GCM its first 4 bytes are the kernel's salt), and the sequence number
/// of the next record.
pub struct Secret {
    pub key: Zeroizing<Vec<u8>>,
    pub iv: Zeroizing<[u8; 12]>,
    pub seq: u64,
}

/// What the kernel needs to take over a connection's records.
pub struct Keys {
    pub version: Version,
    pub cipher: Cipher,
    /// What this side sends.
    pub tx: Secret,
    /// What the peer sends.
    pub rx: Secret,
}

/// The ciphers this kernel implements, in both directions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ciphers(u8);

impl Ciphers {
    pub fn has(self, cipher: Cipher) -> bool {
        self.0 & Self::bit(cipher) != 0
    }

    pub fn with(self, cipher: Cipher) -> Ciphers {
        Ciphers(self.0 | Self::bit(cipher))
    }

    fn bit(cipher: Cipher) -> u8 {
        1 << cipher as u8
    }
}

impl fmt::Display for Ciphers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<_> = Cipher::ALL
            .into_iter()
            .filter(|c| self.has(*c))
            .map(Cipher::name)
            .collect();
        f.write_str(&names.join(", "))
    }
}

/// What [`read_record`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Record {
    /// This many bytes of application data, in the caller's buffer.
    Data(usize),
    /// The peer's input is over: its close_notify or another alert, a
    /// message the kernel cannot act on (KeyUpdate), or the end of the stream.
    End,
}

/// The TLS record types (RFC 8446 §5.1) this module tells apart.
const ALERT: u8 = 21;
const HANDSHAKE: u8 = 22;
const APPLICATION_DATA: u8 = 23;

/// Which ciphers this kernel takes over, tried on a loopback connection of
/// this process with keys of zeros; or why none.
pub fn probe() -> Result<Ciphers, String> {
    let mut found = Ciphers::default();
    let mut why = None;
    for cipher in Cipher::ALL {
        match sys::try_cipher(cipher) {
            Ok(()) => found = found.with(cipher),
            Err(e) => why = why.or(Some(e.to_string())),
        }
    }
    match (found, why) {
        (found, _) if found != Ciphers::default() => Ok(found),
        (_, why) => Err(why.unwrap_or_else(|| "no cipher".into())),
    }
}

/// Hand the connection on `fd` to the kernel's TLS: its upper-layer
/// protocol, then the read keys and the send keys. An error after the first
/// direction leaves the connection neither here nor there: close it.
pub fn install(fd: BorrowedFd<'_>, keys: &Keys) -> io::Result<()> {
    sys::install(fd, keys)
}

/// After a read failed with `EIO` on a kernel-TLS connection: take the
/// record waiting, with its type, into `buf`.
pub fn read_record(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Record> {
    let (kind, n) = sys::recv_record(fd, buf)?;
    Ok(match kind {
        _ if n == 0 => Record::End,
        APPLICATION_DATA => Record::Data(n),
        ALERT => {
            // [level, description]: 0 is close_notify.
            match buf[..n] {
                [_, 0] => tracing::debug!("kernel TLS: the peer's close_notify"),
                _ => tracing::debug!("kernel TLS: the peer sent alert {:?}", &buf[..n]),
            }
            Record::End
        }
        HANDSHAKE => {
            tracing::debug!(
                "kernel TLS: a post-handshake message (type {}) the kernel cannot act on; the connection ends",
                buf[0]
            );
            Record::End
        }
        other => {
            tracing::debug!("kernel TLS: a record of type {other}; the connection ends");
            Record::End
        }
    })
}

/// Send close_notify (RFC 8446 §6.1) on a kernel-TLS connection before it is
/// closed after its last answer. Without waiting: a peer whose window is
/// full gets the close without it, as it would get a reset without it.
pub fn close_notify(fd: BorrowedFd<'_>) -> io::Result<()> {
    sys::send_record(fd, ALERT, &[1, 0])
}

#[cfg(target_os = "linux")]
#[path = "linux.rs"]
mod sys;

#[cfg(not(target_os = "linux"))]
mod sys {
    use super::{Cipher, Keys};
    use std::io;
    use std::os::fd::BorrowedFd;

    fn unsupported() -> io::Error {
        io::Error::new(io::ErrorKind::Unsupported, "kernel TLS is Linux's")
    }

    pub fn try_cipher(_: Cipher) -> io::Result<()> {
        Err(unsupported())
    }

    pub fn install(_: BorrowedFd<'_>, _: &Keys) -> io::Result<()> {
        Err(unsupported())
    }

    pub fn recv_record(_: BorrowedFd<'_>, _: &mut [u8]) -> io::Result<(u8, usize)> {
        Err(unsupported())
    }

    pub fn send_record(_: BorrowedFd<'_>, _: u8, _: &[u8]) -> io::Result<()> {
        Err(unsupported())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ciphers_are_a_set() {
        let set = Ciphers::default().with(Cipher::Aes256Gcm);
        assert!(set.has(Cipher::Aes256Gcm));
        assert!(!set.has(Cipher::Aes128Gcm) && !set.has(Cipher::Chacha20Poly1305));
        assert_eq!(
            set.with(Cipher::Aes128Gcm).to_string(),
            "AES-128-GCM, AES-256-GCM"
        );
    }
}
