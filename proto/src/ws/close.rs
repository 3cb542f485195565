//! Close codes and Close frame bodies (RFC 6455 §5.5.1, §7.4).
//!
//! Which received codes are valid follows §7.4 and the IANA registry:
//! 1000-1003, 1007-1014 and 3000-4999. 1004 is reserved, 1005, 1006 and
//! 1015 must never be sent, and the rest of 1000-2999 is unassigned: each is
//! a protocol error (1002), which is what the Autobahn suite (case 7.9.*)
//! expects. 1012-1014 (service restart, try again later, bad gateway) were
//! registered after the RFC and are accepted, as browsers and Python's
//! `websockets` do.

use super::frame::{self, OpCode, MAX_CONTROL_PAYLOAD};

/// The exchange ended as intended.
pub const NORMAL: u16 = 1000;
/// The endpoint is going away (server shutdown, page navigated away).
pub const GOING_AWAY: u16 = 1001;
/// The peer broke the protocol.
pub const PROTOCOL_ERROR: u16 = 1002;
/// The message's data type is not accepted.
pub const UNSUPPORTED_DATA: u16 = 1003;
/// Reported (never sent) for a Close frame without a body.
pub const NO_STATUS: u16 = 1005;
/// Reported (never sent) when the connection dropped without a Close.
pub const ABNORMAL: u16 = 1006;
/// A text message (or close reason) that is not UTF-8.
pub const INVALID_PAYLOAD: u16 = 1007;
/// A message over the size limit.
pub const MESSAGE_TOO_BIG: u16 = 1009;
/// The server hit an unexpected condition.
pub const INTERNAL_ERROR: u16 = 1011;

/// A violation by the peer: the code our Close frame carries, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProtocolError {
    pub close_code: u16,
    pub reason: &'static str,
}

impl ProtocolError {
    pub fn new(close_code: u16, reason: &'static str) -> Self {
        ProtocolError { close_code, reason }
    }
}

/// Whether a peer may send `code` in a Close frame (see the module docs).
pub fn is_valid_code(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}

/// Reads a received Close frame's (unmasked) body: its code and reason. An
/// empty body reads as [`NO_STATUS`] with no reason.
pub fn parse_body(body: &[u8]) -> Result<(u16, &str), ProtocolError> {
    let (code, reason) = match *body {
        [] => return Ok((NO_STATUS, "")),
        [_] => {
            return Err(ProtocolError::new(
                PROTOCOL_ERROR,
                "close frame with a 1-byte body",
            ))
        }
        [a, b, ref reason @ ..] => (u16::from_be_bytes([a, b]), reason),
    };
    if !is_valid_code(code) {
        return Err(ProtocolError::new(PROTOCOL_ERROR, "invalid close code"));
    }
    let reason = std::str::from_utf8(reason)
        .map_err(|_| ProtocolError::new(INVALID_PAYLOAD, "close reason is not UTF-8"))?;
    Ok((code, reason))
}

/// Appends a Close frame. Codes that must not be sent (1005, 1006, 1015)
/// write an empty body; a reason longer than a control frame allows (123
/// bytes) is cut at the last character boundary that fits.
pub fn write_frame(out: &mut Vec<u8>, code: u16, reason: &str) {
    if matches!(code, NO_STATUS | ABNORMAL | 1015) {
        frame::write_frame(out, OpCode::Close, b"");
        return;
    }
    let mut end = reason.len().min(MAX_CONTROL_PAYLOAD - 2);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let reason = &reason.as_bytes()[..end];
    frame::write_header(out, true, OpCode::Close, 2 + reason.len());
    out.extend_from_slice(&code.to_be_bytes());
    out.extend_from_slice(reason);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_codes_are_those_autobahn_sends_as_valid() {
        for code in [
            1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999,
            4000, 4999,
        ] {
            assert!(is_valid_code(code), "{code}");
        }
    }

    #[test]
    fn invalid_codes_are_protocol_errors() {
        // Autobahn 7.9.*, plus the edges of each valid range.
        for code in [
            0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535,
        ] {
            assert!(!is_valid_code(code), "{code}");
            let body = code.to_be_bytes();
            assert_eq!(
                parse_body(&body),
                Err(ProtocolError::new(PROTOCOL_ERROR, "invalid close code")),
                "{code}"
            );
        }
    }

    #[test]
    fn bodies_parse_to_code_and_reason() {
        assert_eq!(parse_body(b""), Ok((NO_STATUS, "")));
        assert_eq!(parse_body(b"\x03\xe8"), Ok((1000, "")));
        assert_eq!(
            parse_body(&[b"\x0f\xa0", "bye κόσμε".as_bytes()].concat()),
            Ok((4000, "bye κόσμε"))
        );
        assert_eq!(parse_body(b"\x03").unwrap_err().close_code, PROTOCOL_ERROR);
        assert_eq!(
            parse_body(b"\x03\xe8\xce\xba\xed\xa0\x80")
                .unwrap_err()
                .close_code,
            INVALID_PAYLOAD
        );
    }

    #[test]
    fn written_frames_carry_code_and_reason() {
        let mut out = Vec::new();
        write_frame(&mut out, 1001, "bye");
        assert_eq!(out, b"\x88\x05\x03\xe9bye");
        for code in [NO_STATUS, ABNORMAL, 1015] {
            out.clear();
            write_frame(&mut out, code, "ignored");
            assert_eq!(out, b"\x88\x00");
        }
    }

    #[test]
    fn long_reasons_are_cut_on_a_character_boundary() {
        let mut out = Vec::new();
        write_frame(&mut out, 1000, &"a".repeat(200));
        assert_eq!(out.len(), 2 + 125);
        // 61 two-byte characters are 122 bytes; the 62nd would make 124.
        out.clear();
        write_frame(&mut out, 1000, &"é".repeat(70));
        assert_eq!(out[1], 2 + 122);
        assert!(std::str::from_utf8(&out[4..]).is_ok());
    }
}
