//! The system calls of kernel TLS: `setsockopt(TCP_ULP, "tls")`, the
//! `TLS_RX`/`TLS_TX` crypto infos of `<linux/tls.h>`, and records of
//! another type than application data through `recvmsg`/`sendmsg`'s
//! `TLS_GET_RECORD_TYPE`/`TLS_SET_RECORD_TYPE` control messages.

use std::io;
use std::mem::size_of;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use zeroize::Zeroizing;

use super::{Cipher, Keys, Secret, Version};

/// The upper-layer protocol's name, as `setsockopt` takes it.
const ULP: &[u8] = b"tls";

/// Room for one control message of one byte, aligned as `cmsghdr` needs.
type ControlBuf = [u64; 4];

pub fn try_cipher(cipher: Cipher) -> io::Result<()> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    let client = TcpStream::connect(listener.local_addr()?)?;
    let _server = listener.accept()?;
    let zeros = || Secret {
        key: Zeroizing::new(vec![0; key_len(cipher)]),
        iv: Zeroizing::new([0; 12]),
        seq: 0,
    };
    let keys = Keys {
        version: Version::Tls13,
        cipher,
        tx: zeros(),
        rx: zeros(),
    };
    install(client.as_fd(), &keys)
}

fn key_len(cipher: Cipher) -> usize {
    match cipher {
        Cipher::Aes128Gcm => 16,
        Cipher::Aes256Gcm | Cipher::Chacha20Poly1305 => 32,
    }
}

/// The 4-byte salt and 8-byte nonce the kernel's AES-GCM info splits the IV into.
fn split_iv(iv: &[u8; 12]) -> ([u8; 4], [u8; 8]) {
    let mut salt = [0; 4];
    let mut nonce = [0; 8];
    salt.copy_from_slice(&iv[..4]);
    nonce.copy_from_slice(&iv[4..]);
    (salt, nonce)
}

pub fn install(fd: BorrowedFd<'_>, keys: &Keys) -> io::Result<()> {
    let context = |what: &str, e: io::Error| io::Error::new(e.kind(), format!("{what}: {e}"));
    // SAFETY: `ULP` is readable for its length for the call.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_TCP,
            libc::TCP_ULP,
            ULP.as_ptr().cast(),
            ULP.len() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(context("TCP_ULP tls", io::Error::last_os_error()));
    }
    set_keys(fd, libc::TLS_RX, keys.version, keys.cipher, &keys.rx)
        .map_err(|e| context("TLS_RX", e))?;
    set_keys(fd, libc::TLS_TX, keys.version, keys.cipher, &keys.tx)
        .map_err(|e| context("TLS_TX", e))
}

/// One direction's crypto info.
fn set_keys(
    fd: BorrowedFd<'_>,
    direction: libc::c_int,
    version: Version,
    cipher: Cipher,
    secret: &Secret,
) -> io::Result<()> {
    let info = libc::tls_crypto_info {
        version: match version {
            Version::Tls12 => libc::TLS_1_2_VERSION,
            Version::Tls13 => libc::TLS_1_3_VERSION,
        },
        cipher_type: match cipher {
            Cipher::Aes128Gcm => libc::TLS_CIPHER_AES_GCM_128,
            Cipher::Aes256Gcm => libc::TLS_CIPHER_AES_GCM_256,
            Cipher::Chacha20Poly1305 => libc::TLS_CIPHER_CHACHA20_POLY1305,
        },
    };
    let bad_key = || io::Error::new(io::ErrorKind::InvalidInput, "a key of the wrong length");
    let rec_seq = secret.seq.to_be_bytes();
    let (salt, nonce) = split_iv(&secret.iv);
    match cipher {
        Cipher::Aes128Gcm => set_info(
            fd,
            direction,
            &libc::tls12_crypto_info_aes_gcm_128 {
                info,
                iv: nonce,
                key: secret.key[..].try_into().map_err(|_| bad_key())?,
                salt,
                rec_seq,
            },
        ),
        Cipher::Aes256Gcm => set_info(
            fd,
            direction,
            &libc::tls12_crypto_info_aes_gcm_256 {
                info,
                iv: nonce,
                key: secret.key[..].try_into().map_err(|_| bad_key())?,
                salt,
                rec_seq,
            },
        ),
        Cipher::Chacha20Poly1305 => set_info(
            fd,
            direction,
            &libc::tls12_crypto_info_chacha20_poly1305 {
                info,
                iv: *secret.iv,
                key: secret.key[..].try_into().map_err(|_| bad_key())?,
                salt: [],
                rec_seq,
            },
        ),
    }
}

fn set_info<T>(fd: BorrowedFd<'_>, direction: libc::c_int, info: &T) -> io::Result<()> {
    // SAFETY: `info` is a `<linux/tls.h>` crypto info, readable for its
    // size for the call.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_TLS,
            direction,
            (info as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

pub fn recv_record(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<(u8, usize)> {
    let mut control: ControlBuf = [0; 4];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: an all-zero `msghdr` is a valid empty one (some targets have
    // private padding fields, so it is not built field by field).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = size_of::<ControlBuf>() as _;
    // SAFETY: `msg` names `buf` and `control`, both writable for their
    // lengths and alive for the call.
    let n = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `msg` is as `recvmsg` left it; its control buffer is ours and
    // `msg_controllen` says how much of it holds messages.
    let kind = unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if !cmsg.is_null()
            && (*cmsg).cmsg_level == libc::SOL_TLS
            && (*cmsg).cmsg_type == libc::TLS_GET_RECORD_TYPE
        {
            *libc::CMSG_DATA(cmsg)
        } else {
            super::APPLICATION_DATA
        }
    };
    Ok((kind, n as usize))
}

pub fn send_record(fd: BorrowedFd<'_>, kind: u8, data: &[u8]) -> io::Result<()> {
    let mut control: ControlBuf = [0; 4];
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: as in `recv_record`.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE only computes a size.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(1) } as _;
    // SAFETY: the control buffer holds CMSG_SPACE(1) bytes (checked below
    // by the type's size), so its first header and one byte of data fit;
    // `sendmsg` only reads `data` through `iov`.
    let n = unsafe {
        debug_assert!(libc::CMSG_SPACE(1) as usize <= size_of::<ControlBuf>());
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_TLS;
        (*cmsg).cmsg_type = libc::TLS_SET_RECORD_TYPE;
        (*cmsg).cmsg_len = libc::CMSG_LEN(1) as _;
        *libc::CMSG_DATA(cmsg) = kind;
        libc::sendmsg(
            fd.as_raw_fd(),
            &msg,
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    match n {
        n if n < 0 => Err(io::Error::last_os_error()),
        n if n as usize == data.len() => Ok(()),
        _ => Err(io::ErrorKind::WriteZero.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_iv_splits_into_the_salt_and_the_explicit_nonce() {
        let iv: [u8; 12] = std::array::from_fn(|i| i as u8);
        assert_eq!(split_iv(&iv), ([0, 1, 2, 3], [4, 5, 6, 7, 8, 9, 10, 11]));
    }
}
