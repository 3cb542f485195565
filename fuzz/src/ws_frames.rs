use m0serve_proto::ws::close::{INVALID_PAYLOAD, PROTOCOL_ERROR};
use m0serve_proto::ws::frame::{
    apply_mask, parse_client_header, parse_server_header, write_client_frame, write_frame, OpCode,
};
use m0serve_proto::ws::{WsConn, WsEvent};

use crate::session::{echo, MAX_MESSAGE};
use crate::split::Split;

/// WebSocket frames, both ways.
///
/// Decoding arbitrary bytes (see [`crate::split`] for the layout): a
/// [`WsConn`] answering as an echo app gives the same events, output and
/// must-close whole, split where the fuzzer chose and byte by byte, with
/// permessage-deflate off and on (RSV1 frames inflated, ours compressed); the
/// client-frame header parser reports on every prefix of a header what it
/// reports on the whole (nothing yet, or the same error: it fails fast); and
/// masking in pieces at their offsets is masking the whole.
///
/// Encoding: the payload read as messages (an opcode byte, a length byte, the
/// payload) and written as masked client frames decodes back to those messages
/// (a text that is not UTF-8 as 1007, an oversized control frame as 1002);
/// each written as a server frame parses back to its opcode and payload.
pub fn ws_frames(data: &[u8]) {
    let split = Split::new(data);
    let [whole, pieces, bytes] = split.feeds();
    for deflate in [false, true] {
        let expected = run(&whole, deflate);
        assert_eq!(run(&pieces, deflate), expected, "split");
        assert_eq!(run(&bytes, deflate), expected, "fed byte by byte");
    }

    let payload = split.payload;
    fails_fast(payload);
    let _ = parse_server_header(payload);
    let mask = [0x5A, 0x0F, 0xC3, 0x81];
    let mut whole = payload.to_vec();
    apply_mask(&mut whole, mask, 0);
    let mut pieced = payload.to_vec();
    let mut offset = 0;
    for piece in pieced.chunks_mut(split.pieces.first().map_or(1, |p| p.len().max(1))) {
        apply_mask(piece, mask, offset);
        offset += piece.len() as u64;
    }
    assert_eq!(pieced, whole, "masking in pieces");
    apply_mask(&mut whole, mask, 0);
    assert_eq!(whole, payload, "masking twice");

    roundtrip(payload);
}

/// The events, output and must-close of a connection fed `pieces`.
fn run(pieces: &[&[u8]], deflate: bool) -> (Vec<WsEvent>, Vec<u8>, bool) {
    let mut ws = WsConn::new(MAX_MESSAGE);
    if deflate {
        ws = ws.with_deflate();
    }
    let (mut events, mut out) = (Vec::new(), Vec::new());
    for piece in pieces {
        ws.recv(piece);
        while let Some(event) = ws.next_event() {
            echo(&mut ws, &event, &mut out);
            events.push(event);
        }
    }
    (events, out, ws.must_close())
}

fn fails_fast(buf: &[u8]) {
    let whole = parse_client_header(buf);
    let end = match whole {
        Ok(Some((_, n))) => n,
        _ => buf.len().min(14),
    };
    for cut in 0..end {
        match parse_client_header(&buf[..cut]) {
            Ok(None) => {}
            Err(e) => assert_eq!(Err(e), whole, "a prefix of {cut} bytes"),
            Ok(Some(h)) => panic!("a header {h:?} in a prefix of {cut} bytes of {whole:?}"),
        }
    }
}

fn roundtrip(mut input: &[u8]) {
    let mut wire = Vec::new();
    let mut expected = Vec::new();
    let mask = [0x37, 0xFA, 0x21, 0x3D];
    while let [op, len, ref rest @ ..] = *input {
        let (payload, rest) = rest.split_at(usize::from(len).min(rest.len()));
        input = rest;
        let opcode =
            [OpCode::Text, OpCode::Binary, OpCode::Ping, OpCode::Pong][usize::from(op & 3)];

        let mut server = Vec::new();
        write_frame(&mut server, opcode, payload);
        let (h, start) = parse_server_header(&server).expect("a whole server frame");
        assert!(h.fin && !h.masked && h.opcode == opcode.bits(), "{h:?}");
        assert_eq!(&server[start..], payload, "server frame payload");

        write_client_frame(&mut wire, opcode, payload, mask);
        expected.push(match opcode {
            OpCode::Ping | OpCode::Pong if payload.len() > 125 => Err(PROTOCOL_ERROR),
            OpCode::Text => match std::str::from_utf8(payload) {
                Ok(text) => Ok(WsEvent::Text(text.to_owned())),
                Err(_) => Err(INVALID_PAYLOAD),
            },
            OpCode::Binary => Ok(WsEvent::Binary(payload.to_vec())),
            OpCode::Ping => Ok(WsEvent::Ping(payload.to_vec())),
            _ => Ok(WsEvent::Pong),
        });
        if expected.last().is_some_and(Result::is_err) {
            break;
        }
    }
    let mut ws = WsConn::new(MAX_MESSAGE);
    ws.recv(&wire);
    let got: Vec<Result<WsEvent, u16>> = std::iter::from_fn(|| ws.next_event())
        .map(|e| match e {
            WsEvent::Error(e) => Err(e.close_code),
            e => Ok(e),
        })
        .collect();
    assert_eq!(got, expected, "client frames decoded");
}
