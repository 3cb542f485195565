use super::*;
use crate::backend::share::Board;
use crate::backend::slab::Key;
use bytes::Bytes;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// A conduit and the board its notifications land on.
fn conduit(inline: bool, expect_continue: bool) -> (Arc<Conduit>, Arc<Board>) {
    let board = Board::new(1);
    let notifier = Notifier::new(board.clone(), 0, Key::new(3, 1));
    let ex = Conduit::new(notifier, inline, expect_continue);
    (Arc::new(ex), board)
}

fn notified(board: &Board) -> usize {
    board.take_ready(0).count()
}

/// Run `f` on a thread; assert it is still blocked after a while, then
/// run `release` and assert `f` returns soon after.
fn blocks_until(f: impl FnOnce() + Send + 'static, release: impl FnOnce()) {
    let t = thread::spawn(f);
    thread::sleep(Duration::from_millis(100));
    assert!(!t.is_finished(), "returned without waiting");
    release();
    let start = Instant::now();
    while !t.is_finished() {
        assert!(start.elapsed() < Duration::from_secs(5), "never woke");
        thread::sleep(Duration::from_millis(2));
    }
    t.join().unwrap();
}

fn data(ex: &Conduit, max: usize) -> Vec<u8> {
    match ex.try_read_body(max) {
        Ok(BodyRead::Data(d)) => d,
        other => panic!("expected data, got {other:?}"),
    }
}

#[test]
fn a_body_handed_over_whole_has_a_length_a_streamed_one_none() {
    // Streamed: none, even once it has all arrived (timing must not decide).
    let (ex, _board) = conduit(false, false);
    ex.push_body(b"hello".to_vec());
    ex.end_body();
    assert_eq!(ex.complete_body_len(), None);
    // Buffered by the core: memory and file together.
    let (ex, _board) = conduit(false, false);
    let dir = std::env::temp_dir();
    let mut buffer =
        crate::app::body_buffer::BodyBuffer::new(Arc::new(crate::app::body_buffer::BufferConfig {
            memory: 4,
            spill_dir: dir,
        }));
    buffer.push(b"hello world".to_vec()).unwrap();
    assert_eq!(ex.complete_body_len(), None, "not handed over yet");
    ex.push_complete(buffer.finish().unwrap());
    assert_eq!(ex.complete_body_len(), Some(11));
    // An inline app runs once the body has arrived: it is whole.
    let (ex, _board) = conduit(true, false);
    ex.push_body(b"abc".to_vec());
    assert_eq!(ex.complete_body_len(), None, "not ended yet");
    ex.end_body();
    assert_eq!(ex.complete_body_len(), Some(3));
}

#[test]
fn the_body_is_read_in_order_in_pieces_then_eof() {
    let (ex, board) = conduit(false, false);
    assert_eq!(ex.try_read_body(10), Ok(BodyRead::Empty));
    assert!(ex.push_body(b"hello ".to_vec()));
    assert!(ex.push_body(b"world".to_vec()));
    assert_eq!(data(&ex, 4), b"hell");
    assert_eq!(data(&ex, 100), b"o world");
    assert_eq!(ex.try_read_body(10), Ok(BodyRead::Empty));
    ex.end_body();
    assert_eq!(ex.try_read_body(10), Ok(BodyRead::Eof));
    assert_eq!(notified(&board), 0, "nothing the core needed to hear");
}

#[test]
fn the_core_stops_at_the_high_water_and_is_notified_once_room_frees() {
    let (ex, board) = conduit(false, false);
    let chunk = vec![7u8; 64 * 1024];
    let mut pushed = 0;
    while ex.push_body(chunk.clone()) {
        pushed += chunk.len();
        assert!(pushed < 2 * BODY_HIGH_WATER, "never told to stop");
    }
    pushed += chunk.len();
    assert_eq!(pushed, BODY_HIGH_WATER, "stopped at the high water");
    assert!(!ex.body_room());
    assert_eq!(data(&ex, 1000).len(), 1000);
    assert!(ex.body_room());
    assert_eq!(notified(&board), 1, "the core is told room freed");
    data(&ex, 1000);
    assert_eq!(notified(&board), 0, "once, not on every read");
}

#[test]
fn wait_body_blocks_until_data_arrives() {
    let (ex, _board) = conduit(false, false);
    let app = ex.clone();
    blocks_until(
        move || {
            app.wait_body();
            assert_eq!(data(&app, 10), b"late");
        },
        || assert!(ex.push_body(b"late".to_vec())),
    );
    let app = ex.clone();
    blocks_until(move || app.wait_body(), || ex.end_body());
}

#[test]
fn the_first_body_read_asks_for_100_continue_once() {
    let (ex, board) = conduit(false, true);
    assert!(!ex.take_continue(), "not before the app asks");
    assert_eq!(ex.try_read_body(10), Ok(BodyRead::Empty));
    assert_eq!(notified(&board), 1);
    assert!(ex.take_continue());
    assert!(!ex.take_continue(), "answered once");
    ex.try_read_body(10).unwrap();
    assert_eq!(notified(&board), 0);

    let (plain, board) = conduit(false, false);
    plain.try_read_body(10).unwrap();
    assert!(!plain.take_continue());
    assert_eq!(notified(&board), 0);

    // A blocking wait asks too (the client would never send the body).
    let (waiting, board) = conduit(false, true);
    let app = waiting.clone();
    blocks_until(move || app.wait_body(), || waiting.end_body());
    assert_eq!(notified(&board), 1);
    assert!(waiting.take_continue());
}

#[test]
fn a_lent_vector_comes_back_with_the_events_and_the_app_gets_the_takers() {
    let board = Board::new(1);
    let notifier = Notifier::new(board, 0, Key::new(3, 1));
    let lent: Vec<ResponseEvent> = Vec::with_capacity(8);
    let lent_at = lent.as_ptr();
    let ex = Conduit::new(notifier, false, false).lending(lent);
    let _ = ex.try_send(ResponseEvent::Body(b"a".to_vec().into()));
    let _ = ex.try_send(ResponseEvent::End);
    let mut taker: Vec<ResponseEvent> = Vec::with_capacity(4);
    let taker_at = taker.as_ptr();
    ex.take_events(&mut taker);
    assert_eq!(taker.as_ptr(), lent_at, "the events came in another vector");
    assert_eq!(taker.len(), 2);
    // The app's next events go into the taker's room: no allocation.
    let _ = ex.try_send(ResponseEvent::End);
    taker.clear();
    ex.take_events(&mut taker);
    assert_eq!(taker.as_ptr(), taker_at);
}

#[test]
fn events_notify_the_core_only_when_its_queue_was_empty() {
    let (ex, board) = conduit(false, false);
    let send = |e| assert!(matches!(ex.try_send(e), Ok(Sent::Queued)));
    send(ResponseEvent::Start {
        status: 200,
        headers: Default::default(),
    });
    send(ResponseEvent::Body(b"a".to_vec().into()));
    send(ResponseEvent::Body(b"b".to_vec().into()));
    assert_eq!(notified(&board), 1);
    let mut got = Vec::new();
    ex.take_events(&mut got);
    assert!(matches!(
        got.as_slice(),
        [ResponseEvent::Start { status: 200, .. }, ResponseEvent::Body(a), ResponseEvent::Body(b)]
            if a[..] == b"a"[..] && b[..] == b"b"[..]
    ));
    send(ResponseEvent::End);
    assert_eq!(notified(&board), 1, "the queue was emptied: notify again");
}

#[test]
fn a_full_answer_makes_the_app_wait_until_the_core_writes() {
    let (ex, _board) = conduit(false, false);
    let big = ResponseEvent::Body(vec![0; RESPONSE_HIGH_WATER + 4096].into());
    assert!(matches!(ex.try_send(big), Ok(Sent::Queued)));
    match ex.try_send(ResponseEvent::Body(b"more".to_vec().into())) {
        Ok(Sent::Full(ResponseEvent::Body(b))) => assert_eq!(&b[..], b"more", "handed back"),
        other => panic!("expected Full, got {other:?}"),
    }
    assert!(
        matches!(ex.try_send(ResponseEvent::End), Ok(Sent::Queued)),
        "the end is never refused"
    );
    ex.written(4096); // not enough: still at the high water
    let app = ex.clone();
    blocks_until(
        move || {
            app.wait_room();
            let sent = app.try_send(ResponseEvent::Body(b"more".to_vec().into()));
            assert!(matches!(sent, Ok(Sent::Queued)));
        },
        || ex.written(RESPONSE_HIGH_WATER),
    );
}

#[test]
fn close_wakes_waiters_and_fails_the_apps_calls() {
    let (ex, _board) = conduit(false, false);
    assert!(matches!(
        ex.try_send(ResponseEvent::Body(vec![0; RESPONSE_HIGH_WATER].into())),
        Ok(Sent::Queued)
    ));
    let (reader, writer) = (ex.clone(), ex.clone());
    let closer = ex.clone();
    blocks_until(
        move || {
            let r = thread::spawn(move || reader.wait_body());
            writer.wait_room();
            r.join().unwrap();
        },
        move || closer.close(),
    );
    assert!(ex.is_gone());
    assert_eq!(ex.try_read_body(10), Err(Gone));
    assert!(matches!(ex.try_send(ResponseEvent::End), Err(Gone)));
    let mut events = Vec::new();
    ex.take_events(&mut events);
    assert!(events.is_empty(), "nobody will write them");
}

/// A conduit whose app waker counts its calls.
fn counted(ex: &Conduit) -> Arc<std::sync::atomic::AtomicUsize> {
    let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let c = count.clone();
    ex.set_app_waker(Arc::new(move || {
        c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }));
    count
}

#[test]
fn the_app_waker_fires_once_per_arming_and_only_when_armed() {
    use std::sync::atomic::Ordering::SeqCst;
    let (ex, _board) = conduit(false, false);
    let wakes = counted(&ex);
    assert!(ex.push_body(b"a".to_vec()));
    assert_eq!(wakes.load(SeqCst), 0, "nobody waited: no wake");
    assert_eq!(
        ex.try_read_chunk(10),
        Ok((BodyRead::Data(b"a".to_vec()), false))
    );
    assert_eq!(ex.try_read_chunk(10), Ok((BodyRead::Empty, false)));
    assert!(ex.push_body(b"b".to_vec()));
    assert!(ex.push_body(b"c".to_vec()));
    assert_eq!(wakes.load(SeqCst), 1, "armed by the empty read, fired once");
    assert_eq!(
        ex.try_read_chunk(1),
        Ok((BodyRead::Data(b"b".to_vec()), false))
    );
    ex.end_body();
    assert_eq!(
        ex.try_read_chunk(10),
        Ok((BodyRead::Data(b"c".to_vec()), true)),
        "the last chunk says the body is complete"
    );
    assert_eq!(ex.try_read_chunk(10), Ok((BodyRead::Eof, true)));

    // A full answer arms it; room freed by the core fires it.
    let big = ResponseEvent::Body(vec![0; RESPONSE_HIGH_WATER].into());
    assert!(matches!(ex.try_send(big), Ok(Sent::Queued)));
    assert!(matches!(
        ex.try_send(ResponseEvent::Body(b"x".to_vec().into())),
        Ok(Sent::Full(_))
    ));
    ex.written(10);
    assert_eq!(wakes.load(SeqCst), 2);

    // Watching for the departure: close() fires it, and a gone client is reported.
    assert!(!ex.watch_gone());
    ex.close();
    assert_eq!(wakes.load(SeqCst), 3);
    assert!(ex.watch_gone());
}

#[test]
fn an_empty_websocket_receive_arms_the_app_waker() {
    use std::sync::atomic::Ordering::SeqCst;
    let (ex, _board) = conduit(false, false);
    let wakes = counted(&ex);
    assert!(ex.push_ws(WsMessage::Text("a".into())));
    assert_eq!(wakes.load(SeqCst), 0, "nobody waited: no wake");
    assert_eq!(ex.try_receive_ws(), Ok(Some(WsMessage::Text("a".into()))));
    assert_eq!(ex.try_receive_ws(), Ok(None));
    assert!(ex.push_ws(WsMessage::Binary(b"b".to_vec())));
    assert!(ex.push_ws(WsMessage::Binary(b"c".to_vec())));
    assert_eq!(
        wakes.load(SeqCst),
        1,
        "armed by the empty receive, fired once"
    );
}

#[test]
fn websocket_messages_arrive_in_order_under_the_high_water() {
    let (ex, board) = conduit(false, false);
    assert_eq!(ex.try_receive_ws(), Ok(None));
    let big = vec![1u8; 64 * 1024];
    let mut pushed = 0;
    while ex.push_ws(WsMessage::Binary(big.clone())) {
        pushed += 1;
        assert!(
            pushed * big.len() < 2 * BODY_HIGH_WATER,
            "never told to stop"
        );
    }
    assert!(!ex.body_room());
    assert_eq!(
        ex.try_receive_ws(),
        Ok(Some(WsMessage::Binary(big.clone())))
    );
    assert!(ex.body_room());
    assert_eq!(notified(&board), 1, "the core is told room freed");
    // The app's sends count their bytes like a body.
    let text = ResponseEvent::WsText("x".repeat(RESPONSE_HIGH_WATER));
    assert!(matches!(ex.try_send(text), Ok(Sent::Queued)));
    let more = ex.try_send(ResponseEvent::WsBinary(Bytes::from_static(b"more")));
    assert!(matches!(more, Ok(Sent::Full(ResponseEvent::WsBinary(_)))));
    let close = ResponseEvent::WsClose {
        code: 1000,
        reason: String::new(),
    };
    assert!(
        matches!(ex.try_send(close), Ok(Sent::Queued)),
        "never refused"
    );
}

/// An empty message still costs the wire a frame: a loop of them to a
/// client that reads nothing must stop at the high water like any other.
#[test]
fn empty_websocket_messages_wait_at_the_high_water() {
    let (ex, _board) = conduit(false, false);
    let mut queued = 0;
    loop {
        match ex.try_send(ResponseEvent::WsText(String::new())) {
            Ok(Sent::Queued) => queued += 1,
            Ok(Sent::Full(ResponseEvent::WsText(_))) => break,
            other => panic!("{:?}", other.map(|_| ())),
        }
        assert!(queued <= RESPONSE_HIGH_WATER, "never told to wait");
    }
    assert_eq!(
        queued,
        RESPONSE_HIGH_WATER / 2,
        "two bytes each on the wire"
    );
    ex.written(2);
    assert!(matches!(
        ex.try_send(ResponseEvent::WsBinary(Bytes::new())),
        Ok(Sent::Queued)
    ));
}

#[test]
fn the_disconnect_outlives_the_close_then_the_app_is_told_gone() {
    let (ex, _board) = conduit(false, false);
    let app = ex.clone();
    blocks_until(
        move || {
            app.wait_ws();
            assert_eq!(app.try_receive_ws(), Ok(Some(WsMessage::Text("hi".into()))));
        },
        || assert!(ex.push_ws(WsMessage::Text("hi".into()))),
    );
    ex.push_ws(WsMessage::Text("queued".into()));
    ex.close();
    assert!(ex.push_ws(WsMessage::Text("after".into())), "dropped");
    ex.push_ws(WsMessage::Disconnect {
        code: 1006,
        reason: String::new(),
    });
    assert_eq!(
        ex.try_receive_ws(),
        Ok(Some(WsMessage::Text("queued".into())))
    );
    assert_eq!(
        ex.try_receive_ws(),
        Ok(Some(WsMessage::Disconnect {
            code: 1006,
            reason: String::new()
        }))
    );
    assert_eq!(ex.try_receive_ws(), Err(Gone));
}

#[test]
fn an_inline_conduit_has_no_limits() {
    let (ex, _board) = conduit(true, false);
    assert!(ex.push_body(vec![0; 4 * BODY_HIGH_WATER]));
    assert!(ex.body_room());
    for _ in 0..4 {
        let body = ResponseEvent::Body(vec![0; RESPONSE_HIGH_WATER].into());
        assert!(matches!(ex.try_send(body), Ok(Sent::Queued)));
    }
}
