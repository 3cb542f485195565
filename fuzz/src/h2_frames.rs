use bytes::Bytes;
use m0serve_proto::h2::{Event, H2Conn, Settings, PREFACE};

/// HTTP/2 frames from a client.
///
/// The preface, then the fuzzer's bytes as frames, fed whole and in 7-byte
/// pieces to an [`H2Conn`] that answers every request (a head, a body, the
/// end) and reads every body: no panic, no hang (each drive is bounded), and
/// what the server writes is bounded by what it was sent (no amplification
/// beyond the answers themselves): a flood ends the connection, it does not
/// make the server write without bound.
pub fn h2_frames(data: &[u8]) {
    for piece in [data.len().max(1), 7] {
        let mut conn = H2Conn::new(Settings {
            max_header_list_size: 4096,
            ..Settings::default()
        });
        conn.recv(PREFACE);
        let mut written = 0;
        let mut answers = 0;
        for chunk in data.chunks(piece) {
            conn.recv(chunk);
            conn.drive();
            while let Some(event) = conn.next_event() {
                match event {
                    Event::Request { id, .. } => {
                        conn.want_body(id, true);
                        conn.respond(id, 200, &[("content-type", b"text/plain")], false);
                        conn.send(id, Bytes::from_static(b"hello"));
                        conn.finish(id, None);
                        answers += 1;
                    }
                    Event::Data { .. } | Event::End { .. } | Event::Reset { .. } => {}
                }
            }
            conn.drive();
            written += conn.take_output().len();
        }
        conn.recv_eof();
        conn.drive();
        written += conn.take_output().len();
        // SETTINGS and its ACK, a GOAWAY, each answer's frames (HPACK'd head
        // and a 5-byte body); and each frame read answered by at most one of
        // its size again (a PING's ACK, a WINDOW_UPDATE) plus 64 bytes.
        let bound = 256 + answers * 256 + data.len() * 2 + (data.len() / 9 + 1) * 64;
        assert!(
            written <= bound,
            "wrote {written} for {} bytes in",
            data.len()
        );
    }
}
