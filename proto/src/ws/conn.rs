//! One WebSocket connection's state machine, server side, sans IO.
//!
//! Bytes in ([`WsConn::recv`]), events out ([`WsConn::next_event`]), frames
//! appended to the caller's output by the `write_*` methods.
//!
//! Messages: a data frame opens one, continuation frames extend it, and the
//! frame with FIN ends it (§5.4). A new Text or Binary frame while a message
//! is open, or a continuation with none open, is a protocol error (1002).
//! Control frames between fragments are delivered at once. A data frame's
//! payload is taken as it arrives, so a text message's UTF-8 is checked byte
//! by byte as it comes (1007 at the first bad byte) and a message is refused
//! (1009) as soon as a header announces more than the size limit.
//!
//! Closing (§5.5.1, §7): after [`WsConn::write_close`] only the peer's Close
//! matters: data frames and pings are read and dropped. A received Close is
//! reported once, then nothing more is read; the caller answers it with
//! [`WsConn::write_close_reply`] (the same code, or 1000 for a Close without
//! one) unless it already sent its own. After an [`WsEvent::Error`] the caller
//! writes a Close with its code and closes. [`WsConn::must_close`] says when
//! both Closes have passed (or an error ended the connection): close the TCP
//! connection once the output is written.
//!
//! Buffers: received bytes live in one buffer reused for the connection's
//! life; a message's payload is the only allocation (sized from the frame
//! header), and it is handed to the caller in the event.
//!
//! With permessage-deflate negotiated ([`WsConn::with_deflate`]), a message
//! whose first frame has RSV1 set is compressed: its payload is gathered
//! whole (within the size limit), then inflated (at most the limit: 1009
//! beyond, 1007 for what is not deflate) and its text checked; RSV1 on a
//! continuation or control frame is a protocol error (§6.1). Our own
//! messages are compressed from [`deflate::MIN_COMPRESSED`] bytes up.

use super::close::{
    self, ProtocolError, INVALID_PAYLOAD, MESSAGE_TOO_BIG, NORMAL, NO_STATUS, PROTOCOL_ERROR,
};
use super::deflate::{self, InflateError};
use super::frame::{self, apply_mask, FrameHeader, OpCode, MAX_CONTROL_PAYLOAD};
use super::utf8::Utf8Check;
use crate::http::conn::append_unread;

/// What the connection read.
#[derive(Debug, PartialEq, Eq)]
pub enum WsEvent {
    Text(String),
    Binary(Vec<u8>),
    /// Answer with [`WsConn::write_pong`] and the same payload.
    Ping(Vec<u8>),
    Pong,
    /// The peer closed: `code` is [`close::NO_STATUS`] (1005) for a Close
    /// without a body. Answer with [`WsConn::write_close_reply`].
    Close {
        code: u16,
        reason: String,
    },
    /// The peer broke the protocol: write a Close with `close_code`
    /// ([`WsConn::write_close`]) and close the connection.
    Error(ProtocolError),
}

/// A frame whose header was read and whose payload is still arriving.
#[derive(Clone, Copy, Debug)]
struct Frame {
    header: FrameHeader,
    /// Payload bytes consumed so far.
    read: u64,
}

/// The server side of one WebSocket connection.
#[derive(Debug)]
pub struct WsConn {
    /// The largest message (all its fragments together) accepted, in bytes.
    max_message: usize,
    /// Received bytes; `buf[pos..]` are not consumed yet.
    buf: Vec<u8>,
    pos: usize,
    frame: Option<Frame>,
    /// The open message is text (`Some(true)`) or binary; `None` between messages.
    message: Option<bool>,
    /// permessage-deflate was negotiated.
    deflate: bool,
    /// The open message is compressed (RSV1 on its first frame).
    compressed: bool,
    /// The open message's payload so far.
    payload: Vec<u8>,
    utf8: Utf8Check,
    close_sent: bool,
    /// The code of the peer's Close, once read.
    close_received: Option<u16>,
    failed: bool,
}

impl WsConn {
    /// A connection that accepts messages up to `max_message` bytes.
    pub fn new(max_message: usize) -> Self {
        WsConn {
            max_message,
            buf: Vec::new(),
            pos: 0,
            frame: None,
            message: None,
            deflate: false,
            compressed: false,
            payload: Vec::new(),
            utf8: Utf8Check::default(),
            close_sent: false,
            close_received: None,
            failed: false,
        }
    }

    /// permessage-deflate was negotiated in the handshake ([`deflate::negotiate`]).
    pub fn with_deflate(mut self) -> Self {
        self.deflate = true;
        self
    }

    /// Bytes read from the peer (the first ones may be what the HTTP
    /// connection had buffered after the upgrade). Call
    /// [`WsConn::next_event`] until it returns `None` afterwards.
    pub fn recv(&mut self, data: &[u8]) {
        if self.failed || self.close_received.is_some() {
            return;
        }
        append_unread(&mut self.buf, &mut self.pos, data);
    }

    /// The next event from the received bytes, if a whole one is there.
    pub fn next_event(&mut self) -> Option<WsEvent> {
        loop {
            if self.failed || self.close_received.is_some() {
                return None;
            }
            let mut frame = match self.frame {
                Some(frame) => frame,
                None => match frame::parse_client_header(&self.buf[self.pos..]) {
                    Ok(None) => return None,
                    Ok(Some((header, len))) => {
                        self.pos += len;
                        if let Err(e) = self.start_frame(&header) {
                            return Some(self.fail(e));
                        }
                        Frame { header, read: 0 }
                    }
                    Err(e) => return Some(self.fail(e.into())),
                },
            };
            let FrameHeader {
                fin,
                opcode,
                mask,
                len,
                ..
            } = frame.header;
            if opcode.is_control() {
                // At most 125 bytes: wait for the whole payload, then unmask in place.
                let len = len as usize;
                if self.buf.len() - self.pos < len {
                    self.frame = Some(frame);
                    return None;
                }
                self.frame = None;
                let start = self.pos;
                self.pos += len;
                apply_mask(&mut self.buf[start..self.pos], mask, 0);
                if let Some(event) = self.control(opcode, start) {
                    return Some(event);
                }
                continue;
            }
            let available = (self.buf.len() - self.pos) as u64;
            let n = (len - frame.read).min(available) as usize;
            if n == 0 && frame.read < len {
                self.frame = Some(frame);
                return None;
            }
            let piece = &self.buf[self.pos..self.pos + n];
            self.pos += n;
            if self.close_sent {
                // Closing: data is no longer delivered, only skipped.
                frame.read += n as u64;
                self.frame = (frame.read < len).then_some(frame);
                continue;
            }
            let start = self.payload.len();
            self.payload.extend_from_slice(piece);
            apply_mask(&mut self.payload[start..], mask, frame.read);
            frame.read += n as u64;
            let frame_done = frame.read == len;
            self.frame = (!frame_done).then_some(frame);
            if frame_done && fin {
                return Some(self.finish_message());
            }
            // Not the end of the message: check the text so far (the end is
            // checked whole by `finish_message`; a compressed one only then).
            if self.message == Some(true)
                && !self.compressed
                && self.utf8.feed(&self.payload).is_err()
            {
                return Some(self.fail(ProtocolError::new(INVALID_PAYLOAD, "invalid UTF-8")));
            }
        }
    }

    /// Applies the message rules to a frame whose header was just read.
    fn start_frame(&mut self, header: &FrameHeader) -> Result<(), ProtocolError> {
        // RSV1 marks a compressed message on its first frame only (RFC 7692 §6.1).
        let first = !matches!(header.opcode, OpCode::Continuation) && !header.opcode.is_control();
        if header.rsv1 && !(self.deflate && first) {
            return Err(frame::FrameError::ReservedBits.into());
        }
        if header.opcode.is_control() || self.close_sent {
            return Ok(());
        }
        match (header.opcode, self.message) {
            (OpCode::Continuation, None) => {
                return Err(ProtocolError::new(
                    PROTOCOL_ERROR,
                    "continuation frame without a message",
                ))
            }
            (OpCode::Continuation, Some(_)) => {}
            (_, Some(_)) => {
                return Err(ProtocolError::new(
                    PROTOCOL_ERROR,
                    "new message inside a fragmented one",
                ))
            }
            (opcode, None) => {
                self.message = Some(opcode == OpCode::Text);
                self.compressed = header.rsv1;
            }
        }
        let total = (self.payload.len() as u64).saturating_add(header.len);
        if total > self.max_message as u64 {
            return Err(ProtocolError::new(MESSAGE_TOO_BIG, "message too big"));
        }
        // Within the limit: room for the whole frame, so the payload grows once.
        self.payload.reserve(header.len as usize);
        Ok(())
    }

    /// The event for a control frame whose unmasked payload is `buf[start..pos]`;
    /// `None` for one that is dropped while closing.
    fn control(&mut self, opcode: OpCode, start: usize) -> Option<WsEvent> {
        let payload = &self.buf[start..self.pos];
        match opcode {
            OpCode::Close => Some(match close::parse_body(payload) {
                Ok((code, reason)) => {
                    let reason = reason.to_owned();
                    self.close_received = Some(code);
                    WsEvent::Close { code, reason }
                }
                Err(e) => self.fail(e),
            }),
            _ if self.close_sent => None,
            OpCode::Ping => Some(WsEvent::Ping(payload.to_vec())),
            _ => Some(WsEvent::Pong),
        }
    }

    /// The complete message as an event (the payload leaves with it).
    fn finish_message(&mut self) -> WsEvent {
        let text = self.message.take() == Some(true);
        self.utf8.reset();
        let mut payload = std::mem::take(&mut self.payload);
        if std::mem::take(&mut self.compressed) {
            payload = match deflate::inflate(&payload, self.max_message) {
                Ok(inflated) => inflated,
                Err(InflateError::TooBig) => {
                    return self.fail(ProtocolError::new(MESSAGE_TOO_BIG, "message too big"))
                }
                Err(InflateError::Corrupt) => {
                    return self.fail(ProtocolError::new(
                        INVALID_PAYLOAD,
                        "invalid compressed data",
                    ))
                }
            };
        }
        if !text {
            return WsEvent::Binary(payload);
        }
        match String::from_utf8(payload) {
            Ok(s) => WsEvent::Text(s),
            Err(_) => self.fail(ProtocolError::new(INVALID_PAYLOAD, "invalid UTF-8")),
        }
    }

    fn fail(&mut self, e: ProtocolError) -> WsEvent {
        self.failed = true;
        WsEvent::Error(e)
    }

    /// Appends a text message (one frame). Nothing once a Close was sent.
    pub fn write_text(&mut self, text: &str, out: &mut Vec<u8>) {
        self.write_data(OpCode::Text, text.as_bytes(), out);
    }

    /// Appends a binary message (one frame). Nothing once a Close was sent.
    pub fn write_binary(&mut self, data: &[u8], out: &mut Vec<u8>) {
        self.write_data(OpCode::Binary, data, out);
    }

    /// Appends a Ping; a payload over 125 bytes is cut to 125.
    pub fn write_ping(&mut self, payload: &[u8], out: &mut Vec<u8>) {
        self.write_data(OpCode::Ping, control_payload(payload), out);
    }

    /// Appends a Pong (the answer to a Ping, with its payload).
    pub fn write_pong(&mut self, payload: &[u8], out: &mut Vec<u8>) {
        self.write_data(OpCode::Pong, control_payload(payload), out);
    }

    fn write_data(&mut self, opcode: OpCode, payload: &[u8], out: &mut Vec<u8>) {
        if self.close_sent {
            return;
        }
        let data = matches!(opcode, OpCode::Text | OpCode::Binary);
        if self.deflate && data && payload.len() >= deflate::MIN_COMPRESSED {
            frame::write_compressed_frame(out, opcode, payload);
        } else {
            frame::write_frame(out, opcode, payload);
        }
    }

    /// Appends a Close with `code` and `reason` (see [`close::write_frame`]),
    /// at most once: later calls write nothing.
    pub fn write_close(&mut self, code: u16, reason: &str, out: &mut Vec<u8>) {
        if !self.close_sent {
            self.close_sent = true;
            close::write_frame(out, code, reason);
        }
    }

    /// Fails the connection from this side (RFC 6455 §7.1.7): a Close with
    /// `code` and `reason` unless one was sent, and nothing more is read;
    /// the connection is to close once the output is written.
    pub fn fail_with(&mut self, code: u16, reason: &str, out: &mut Vec<u8>) {
        self.write_close(code, reason, out);
        self.failed = true;
    }

    /// Answers the peer's Close: echoes its code (1000 for a Close without
    /// one). Nothing if no Close was received, or ours was sent already.
    pub fn write_close_reply(&mut self, out: &mut Vec<u8>) {
        if let Some(code) = self.close_received {
            let code = if code == NO_STATUS { NORMAL } else { code };
            self.write_close(code, "", out);
        }
    }

    /// Our Close was written.
    pub fn close_sent(&self) -> bool {
        self.close_sent
    }

    /// The peer's Close was read.
    pub fn close_received(&self) -> bool {
        self.close_received.is_some()
    }

    /// Both Closes have passed, or the peer broke the protocol: close the
    /// connection once the output is written.
    pub fn must_close(&self) -> bool {
        self.failed || (self.close_sent && self.close_received.is_some())
    }
}

fn control_payload(payload: &[u8]) -> &[u8] {
    &payload[..payload.len().min(MAX_CONTROL_PAYLOAD)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ws::frame::client_frame;
    use crate::ws::frame::opcode::{BINARY, CLOSE, CONTINUATION as CONT, PING, PONG, TEXT};

    const MASK: [u8; 4] = [0xA1, 0x02, 0x7C, 0xF3];

    fn frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
        client_frame(fin, opcode, payload, MASK)
    }

    fn conn() -> WsConn {
        WsConn::new(1 << 20)
    }

    /// Everything `next_event` yields now.
    fn events(c: &mut WsConn) -> Vec<WsEvent> {
        std::iter::from_fn(|| c.next_event()).collect()
    }

    /// Feeds `bytes` to a fresh connection in one piece; the events.
    fn feed(bytes: &[u8]) -> Vec<WsEvent> {
        let mut c = conn();
        c.recv(bytes);
        events(&mut c)
    }

    fn error_code(events: &[WsEvent]) -> Option<u16> {
        match events.last() {
            Some(WsEvent::Error(e)) => Some(e.close_code),
            _ => None,
        }
    }

    fn text(s: &str) -> WsEvent {
        WsEvent::Text(s.to_owned())
    }

    #[test]
    fn single_frame_messages() {
        let mut bytes = frame(true, TEXT, b"Hello");
        bytes.extend(frame(true, BINARY, &[0, 1, 2, 255]));
        bytes.extend(frame(true, TEXT, b""));
        assert_eq!(
            feed(&bytes),
            [text("Hello"), WsEvent::Binary(vec![0, 1, 2, 255]), text("")]
        );
    }

    #[test]
    fn frames_split_at_every_byte_boundary() {
        let mut bytes = frame(false, TEXT, "κό".as_bytes());
        bytes.extend(frame(true, PING, b"p"));
        bytes.extend(frame(true, CONT, "σμε".as_bytes()));
        bytes.extend(frame(true, BINARY, &[9; 300]));
        bytes.extend(frame(true, CLOSE, b"\x03\xe8ok"));
        let expected = [
            WsEvent::Ping(b"p".to_vec()),
            text("κόσμε"),
            WsEvent::Binary(vec![9; 300]),
            WsEvent::Close {
                code: 1000,
                reason: "ok".into(),
            },
        ];
        for split in 0..=bytes.len() {
            let mut c = conn();
            c.recv(&bytes[..split]);
            let mut got = events(&mut c);
            c.recv(&bytes[split..]);
            got.extend(events(&mut c));
            assert_eq!(got, expected, "split at {split}");
        }
        // And one byte at a time.
        let mut c = conn();
        let mut got = Vec::new();
        for b in &bytes {
            c.recv(std::slice::from_ref(b));
            got.extend(events(&mut c));
        }
        assert_eq!(got, expected);
    }

    #[test]
    fn sixteen_and_sixty_four_bit_lengths_carry_their_payloads() {
        let medium: Vec<u8> = (0..=255).cycle().take(65_535).collect();
        let large: Vec<u8> = (0..=255).cycle().take(70_001).collect();
        let mut bytes = frame(true, BINARY, &medium);
        bytes.extend(frame(true, BINARY, &large));
        assert_eq!(
            feed(&bytes),
            [WsEvent::Binary(medium), WsEvent::Binary(large)]
        );
    }

    #[test]
    fn fragmented_text_with_a_code_point_split_across_fragments() {
        let clef = "𝄞".as_bytes(); // 4 bytes
        let mut bytes = frame(false, TEXT, &[b'a', clef[0]]);
        bytes.extend(frame(false, CONT, &clef[1..3]));
        bytes.extend(frame(false, CONT, b""));
        bytes.extend(frame(true, CONT, &[clef[3], b'z']));
        assert_eq!(feed(&bytes), [text("a𝄞z")]);
    }

    #[test]
    fn fragmented_binary_is_reassembled() {
        let mut bytes = frame(false, BINARY, b"ab");
        bytes.extend(frame(false, CONT, b"cd"));
        bytes.extend(frame(true, CONT, b"e"));
        bytes.extend(frame(true, BINARY, b"next"));
        assert_eq!(
            feed(&bytes),
            [
                WsEvent::Binary(b"abcde".to_vec()),
                WsEvent::Binary(b"next".to_vec())
            ]
        );
    }

    #[test]
    fn control_frames_inside_a_fragmented_message_come_at_once() {
        let mut c = conn();
        c.recv(&frame(false, TEXT, b"frag1"));
        c.recv(&frame(true, PING, b"ping!"));
        c.recv(&frame(true, PONG, b""));
        assert_eq!(
            events(&mut c),
            [WsEvent::Ping(b"ping!".to_vec()), WsEvent::Pong]
        );
        c.recv(&frame(true, CONT, b"frag2"));
        assert_eq!(events(&mut c), [text("frag1frag2")]);
    }

    #[test]
    fn a_new_message_inside_a_fragmented_one_is_1002() {
        let mut bytes = frame(false, TEXT, b"a");
        bytes.extend(frame(true, TEXT, b"b"));
        assert_eq!(error_code(&feed(&bytes)), Some(PROTOCOL_ERROR));
        let mut bytes = frame(false, BINARY, b"a");
        bytes.extend(frame(false, TEXT, b"b"));
        assert_eq!(error_code(&feed(&bytes)), Some(PROTOCOL_ERROR));
    }

    #[test]
    fn a_continuation_without_a_message_is_1002() {
        assert_eq!(
            error_code(&feed(&frame(true, CONT, b"x"))),
            Some(PROTOCOL_ERROR)
        );
        // Also right after a message ended.
        let mut bytes = frame(true, TEXT, b"done");
        bytes.extend(frame(false, CONT, b"x"));
        let got = feed(&bytes);
        assert_eq!(got[0], text("done"));
        assert_eq!(error_code(&got), Some(PROTOCOL_ERROR));
    }

    #[test]
    fn framing_errors_are_1002_and_end_the_stream() {
        for bad in [
            vec![0xC1, 0x80, 1, 2, 3, 4],       // RSV1
            vec![0x83, 0x80, 1, 2, 3, 4],       // opcode 3
            vec![0x81, 0x00],                   // unmasked
            vec![0x09, 0x80, 1, 2, 3, 4],       // fragmented ping
            vec![0x89, 0x80 | 126, 0, 126],     // ping of 126 bytes
            vec![0x82, 0x80 | 127, 0x80, 0, 0], // 64-bit length, top bit
        ] {
            let mut c = conn();
            c.recv(&bad);
            c.recv(&frame(true, TEXT, b"after"));
            let got = events(&mut c);
            assert_eq!(got.len(), 1, "{bad:x?}");
            assert_eq!(error_code(&got), Some(PROTOCOL_ERROR), "{bad:x?}");
            assert!(c.must_close());
            // Nothing more is read.
            c.recv(&frame(true, TEXT, b"more"));
            assert!(c.next_event().is_none());
        }
    }

    #[test]
    fn invalid_utf8_in_a_single_frame_is_1007() {
        let got = feed(&frame(
            true,
            TEXT,
            b"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80edited",
        ));
        assert_eq!(error_code(&got), Some(INVALID_PAYLOAD));
        // Ending in the middle of a character is invalid too.
        assert_eq!(
            error_code(&feed(&frame(true, TEXT, b"ab\xf0\x9d"))),
            Some(INVALID_PAYLOAD)
        );
        // Binary messages are not checked.
        assert_eq!(
            feed(&frame(true, BINARY, b"\xff")),
            [WsEvent::Binary(vec![0xff])]
        );
    }

    #[test]
    fn invalid_utf8_fails_fast_inside_a_fragment() {
        // The bad byte arrives in the first fragment; the message never ends.
        let mut c = conn();
        c.recv(&frame(false, TEXT, b"ok so far \xed\xa0\x80 and more"));
        assert_eq!(error_code(&events(&mut c)), Some(INVALID_PAYLOAD));
    }

    #[test]
    fn invalid_utf8_fails_fast_within_a_frame_still_arriving() {
        // One unfragmented frame whose payload trickles in: the error shows at
        // the byte that makes it invalid, long before the frame ends.
        let payload = [b"valid \xce\xba ".as_slice(), b"\xf4\x90", &[b'x'; 1000]].concat();
        let bytes = frame(true, TEXT, &payload);
        let bad = bytes.len() - 1000 - 1; // the \x90 byte
        let mut c = conn();
        for (i, b) in bytes.iter().enumerate() {
            c.recv(std::slice::from_ref(b));
            let got = events(&mut c);
            if i < bad {
                assert!(got.is_empty(), "at {i}: {got:?}");
            } else {
                assert_eq!(error_code(&got), Some(INVALID_PAYLOAD), "at {i}");
                return;
            }
        }
        panic!("never failed");
    }

    #[test]
    fn invalid_utf8_at_a_fragment_boundary_fails_with_the_next_fragment() {
        let mut c = conn();
        c.recv(&frame(false, TEXT, b"a\xe2\x82"));
        assert!(events(&mut c).is_empty());
        c.recv(&frame(false, CONT, b"b"));
        assert_eq!(error_code(&events(&mut c)), Some(INVALID_PAYLOAD));
    }

    #[test]
    fn messages_over_the_limit_are_1009_when_announced() {
        let mut c = WsConn::new(10);
        c.recv(&frame(true, BINARY, &[0; 10]));
        assert_eq!(events(&mut c), [WsEvent::Binary(vec![0; 10])]);
        // Refused from the header alone: no payload byte has arrived.
        let header = &frame(true, BINARY, &[0; 11])[..6];
        c.recv(header);
        assert_eq!(error_code(&events(&mut c)), Some(MESSAGE_TOO_BIG));

        // Fragments count together.
        let mut c = WsConn::new(10);
        c.recv(&frame(false, TEXT, b"123456"));
        c.recv(&frame(true, CONT, b"78901"));
        assert_eq!(error_code(&events(&mut c)), Some(MESSAGE_TOO_BIG));
    }

    #[test]
    fn control_frames_are_not_counted_against_the_limit() {
        let mut c = WsConn::new(4);
        c.recv(&frame(false, TEXT, b"ab"));
        c.recv(&frame(true, PING, &[1; 100]));
        c.recv(&frame(true, CONT, b"cd"));
        assert_eq!(events(&mut c), [WsEvent::Ping(vec![1; 100]), text("abcd")]);
    }

    #[test]
    fn ping_is_answered_with_a_pong_of_the_same_payload() {
        let mut c = conn();
        c.recv(&frame(true, PING, b"hello"));
        let Some(WsEvent::Ping(payload)) = c.next_event() else {
            panic!()
        };
        let mut out = Vec::new();
        c.write_pong(&payload, &mut out);
        assert_eq!(out, b"\x8a\x05hello");
    }

    #[test]
    fn close_bodies() {
        let close = |body: &[u8]| feed(&frame(true, CLOSE, body));
        assert_eq!(
            close(b""),
            [WsEvent::Close {
                code: NO_STATUS,
                reason: String::new()
            }]
        );
        assert_eq!(
            close(b"\x0b\xb8custom"),
            [WsEvent::Close {
                code: 3000,
                reason: "custom".into()
            }]
        );
        assert_eq!(error_code(&close(b"\x03")), Some(PROTOCOL_ERROR));
        assert_eq!(error_code(&close(b"\x03\xe8\xff")), Some(INVALID_PAYLOAD));
    }

    #[test]
    fn each_invalid_close_code_is_1002() {
        for code in [
            0u16, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000,
        ] {
            let got = feed(&frame(true, CLOSE, &code.to_be_bytes()));
            assert_eq!(error_code(&got), Some(PROTOCOL_ERROR), "{code}");
        }
        for code in [1000u16, 1001, 1002, 1003, 1007, 1011, 3000, 4999] {
            let got = feed(&frame(true, CLOSE, &code.to_be_bytes()));
            assert_eq!(
                got,
                [WsEvent::Close {
                    code,
                    reason: String::new()
                }]
            );
        }
    }

    #[test]
    fn a_received_close_is_echoed_then_the_connection_closes() {
        let mut c = conn();
        c.recv(&frame(true, CLOSE, b"\x0f\xa0"));
        c.recv(&frame(true, TEXT, b"after close"));
        assert_eq!(
            events(&mut c),
            [WsEvent::Close {
                code: 4000,
                reason: String::new()
            }]
        );
        assert!(c.close_received() && !c.must_close());
        let mut out = Vec::new();
        c.write_close_reply(&mut out);
        assert_eq!(out, b"\x88\x02\x0f\xa0");
        assert!(c.must_close());
        // A second reply, or any data, writes nothing.
        c.write_close_reply(&mut out);
        c.write_text("late", &mut out);
        assert_eq!(out.len(), 4);
    }

    #[test]
    fn an_empty_close_is_answered_with_1000() {
        let mut c = conn();
        c.recv(&frame(true, CLOSE, b""));
        events(&mut c);
        let mut out = Vec::new();
        c.write_close_reply(&mut out);
        assert_eq!(out, b"\x88\x02\x03\xe8");
    }

    #[test]
    fn no_reply_without_a_received_close() {
        let mut c = conn();
        let mut out = Vec::new();
        c.write_close_reply(&mut out);
        assert!(out.is_empty() && !c.close_sent());
    }

    #[test]
    fn after_our_close_data_and_pings_are_dropped_until_the_peer_closes() {
        let mut c = conn();
        let mut out = Vec::new();
        c.write_close(1001, "going away", &mut out);
        assert_eq!(out, b"\x88\x0c\x03\xe9going away");
        assert!(c.close_sent() && !c.must_close());
        // Even frames that would break the message rules are just skipped.
        c.recv(&frame(false, TEXT, b"\xff"));
        c.recv(&frame(true, CONT, b"x"));
        c.recv(&frame(true, BINARY, &[0; 200]));
        c.recv(&frame(true, PING, b"p"));
        c.recv(&frame(true, PONG, b""));
        c.recv(&frame(true, CLOSE, b"\x03\xe8"));
        assert_eq!(
            events(&mut c),
            [WsEvent::Close {
                code: 1000,
                reason: String::new()
            }]
        );
        assert!(c.must_close());
        // Our Close went already: the reply writes nothing.
        c.write_close_reply(&mut out);
        assert_eq!(out.len(), 14);
    }

    #[test]
    fn after_our_close_a_partial_data_frame_is_skipped_as_it_arrives() {
        let mut c = conn();
        c.recv(&frame(false, TEXT, b"open"));
        events(&mut c);
        c.write_close(1000, "", &mut Vec::new());
        let bytes = [frame(true, CONT, &[b'z'; 50]), frame(true, CLOSE, b"")].concat();
        for b in &bytes[..bytes.len() - 1] {
            c.recv(std::slice::from_ref(b));
            assert!(events(&mut c).is_empty());
        }
        c.recv(&bytes[bytes.len() - 1..]);
        assert!(matches!(
            events(&mut c)[..],
            [WsEvent::Close {
                code: NO_STATUS,
                ..
            }]
        ));
    }

    #[test]
    fn a_close_after_an_error_carries_its_code() {
        let mut c = conn();
        c.recv(&frame(true, CONT, b"x"));
        let Some(WsEvent::Error(e)) = c.next_event() else {
            panic!()
        };
        let mut out = Vec::new();
        c.write_close(e.close_code, e.reason, &mut out);
        assert_eq!(e.close_code, PROTOCOL_ERROR);
        assert_eq!(out[..4], [0x88, 2 + e.reason.len() as u8, 0x03, 0xea]);
        assert_eq!(&out[4..], e.reason.as_bytes());
        assert!(c.must_close());
    }

    #[test]
    fn writers_frame_messages_unmasked() {
        let mut c = conn();
        let mut out = Vec::new();
        c.write_text("hi", &mut out);
        c.write_binary(&[1, 2], &mut out);
        c.write_ping(b"", &mut out);
        assert_eq!(out, b"\x81\x02hi\x82\x02\x01\x02\x89\x00");
        out.clear();
        let big = vec![7u8; 70_000];
        c.write_binary(&big, &mut out);
        assert_eq!(&out[..10], &[0x82, 127, 0, 0, 0, 0, 0, 1, 0x11, 0x70]);
        assert_eq!(&out[10..], &big[..]);
    }

    #[test]
    fn control_payloads_written_are_cut_to_125_bytes() {
        let mut c = conn();
        let mut out = Vec::new();
        c.write_ping(&[1; 200], &mut out);
        assert_eq!(out[..2], [0x89, 125]);
        assert_eq!(out.len(), 127);
    }

    #[test]
    fn the_receive_buffer_stays_compact() {
        let mut c = conn();
        let message = frame(true, BINARY, &[5; 100]);
        for _ in 0..1000 {
            // Each read ends halfway through a frame.
            c.recv(&message[..50]);
            assert!(events(&mut c).is_empty());
            c.recv(&message[50..]);
            assert_eq!(events(&mut c).len(), 1);
        }
        assert!(c.buf.capacity() < 4 * message.len(), "{}", c.buf.capacity());
    }

    #[test]
    fn the_message_buffer_is_sized_from_the_header() {
        let mut c = conn();
        c.recv(&frame(true, BINARY, &[1; 5000])[..20]);
        assert!(events(&mut c).is_empty());
        assert!(c.payload.capacity() >= 5000);
    }

    /// `payload` deflated as a client would send it (no context takeover).
    fn packed(payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        deflate::deflate(payload, &mut out);
        out
    }

    const RSV1: u8 = 0x40;

    #[test]
    fn a_compressed_message_is_inflated_whole_or_fragmented() {
        let said = "caf\u{e9} au lait ".repeat(1000);
        let z = packed(said.as_bytes());
        let mut c = conn().with_deflate();
        c.recv(&frame(true, RSV1 | TEXT, &z));
        assert_eq!(events(&mut c), [text(&said)]);
        // Fragmented: RSV1 on the first frame only, the UTF-8 checked once inflated
        // (the compressed bytes are not text).
        let (a, b) = z.split_at(z.len() / 2);
        c.recv(&frame(false, RSV1 | TEXT, a));
        c.recv(&frame(true, CONT, b));
        assert_eq!(events(&mut c), [text(&said)]);
        // Uncompressed messages still pass on a deflate connection.
        c.recv(&frame(true, BINARY, b"plain"));
        assert_eq!(events(&mut c), [WsEvent::Binary(b"plain".to_vec())]);
    }

    #[test]
    fn rsv1_where_deflate_does_not_allow_it_is_1002() {
        let z = packed(b"hello");
        // Not negotiated.
        assert_eq!(
            error_code(&feed(&frame(true, RSV1 | TEXT, &z))),
            Some(PROTOCOL_ERROR)
        );
        let on = |bytes: &[u8]| {
            let mut c = conn().with_deflate();
            c.recv(bytes);
            events(&mut c)
        };
        // On a continuation, and on a control frame.
        let cont = [frame(false, RSV1 | TEXT, &z), frame(true, RSV1 | CONT, b"")].concat();
        assert_eq!(error_code(&on(&cont)), Some(PROTOCOL_ERROR));
        assert_eq!(
            error_code(&on(&frame(true, RSV1 | PING, b""))),
            Some(PROTOCOL_ERROR)
        );
    }

    #[test]
    fn a_compressed_message_is_held_to_the_limit_once_inflated() {
        let big = vec![b'a'; 2000];
        let z = packed(&big);
        assert!(z.len() < 100);
        let mut c = WsConn::new(1999).with_deflate();
        c.recv(&frame(true, RSV1 | BINARY, &z));
        assert_eq!(error_code(&events(&mut c)), Some(MESSAGE_TOO_BIG));
        let mut c = WsConn::new(2000).with_deflate();
        c.recv(&frame(true, RSV1 | BINARY, &z));
        assert_eq!(events(&mut c), [WsEvent::Binary(big)]);
    }

    #[test]
    fn bad_compressed_data_or_text_is_1007() {
        let mut c = conn().with_deflate();
        c.recv(&frame(true, RSV1 | BINARY, &[0xff, 0xff, 0xff]));
        assert_eq!(error_code(&events(&mut c)), Some(INVALID_PAYLOAD));
        let mut c = conn().with_deflate();
        c.recv(&frame(true, RSV1 | TEXT, &packed(&[0xc3, 0x28])));
        assert_eq!(error_code(&events(&mut c)), Some(INVALID_PAYLOAD));
    }

    #[test]
    fn our_messages_are_compressed_from_the_threshold_up() {
        let mut c = conn().with_deflate();
        let long = "x".repeat(deflate::MIN_COMPRESSED);
        let mut out = Vec::new();
        c.write_text(&long, &mut out);
        assert_eq!(out[0], 0x80 | RSV1 | TEXT, "FIN, RSV1, text");
        let (_, _, payload, _) = frame::parse_server_frame(&out).unwrap();
        assert_eq!(
            deflate::inflate(&payload, 1 << 20).unwrap(),
            long.as_bytes()
        );
        // Short ones, control frames, and any on a connection without deflate: plain.
        let mut out = Vec::new();
        c.write_text("hi", &mut out);
        c.write_ping(&[1; 125], &mut out);
        assert_eq!((out[0], out[4]), (0x80 | TEXT, 0x80 | PING));
        let mut out = Vec::new();
        conn().write_text(&long, &mut out);
        assert_eq!(out[0], 0x80 | TEXT);
    }
}
