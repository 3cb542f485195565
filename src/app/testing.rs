//! A pure-Rust [`App`] for tests: each call runs a handler on a thread of its
//! own (or inline, on the calling core thread), with the blocking helpers an
//! application thread uses on a [`Conduit`], and a WebSocket echo
//! ([`ws_echo`]). Built for the unit tests, and with the `testing` feature
//! for `examples/ws_echo.rs`, which serves it to the Autobahn fuzzer; the
//! shipped library does not have it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{
    App, AppRequest, BodyRead, Conduit, Gone, Refused, RequestKind, ResponseEvent, Sent, WsMessage,
};

/// What a test app does with one request.
pub type Handler = Arc<dyn Fn(AppRequest, Arc<Conduit>) + Send + Sync>;

/// Runs `handler` for every call; can refuse the first calls as a full queue would.
pub struct ThreadApp {
    handler: Handler,
    inline: bool,
    websocket: bool,
    blocking_reads: bool,
    /// Calls still to refuse; each refusal notifies the caller 50 ms later.
    refuse: AtomicUsize,
    /// Every call made, refused ones included.
    pub calls: AtomicUsize,
    /// The threads calls ran on (inline: the caller's).
    pub threads: Mutex<Vec<std::thread::ThreadId>>,
}

impl ThreadApp {
    pub fn new(handler: impl Fn(AppRequest, Arc<Conduit>) + Send + Sync + 'static) -> Self {
        ThreadApp {
            handler: Arc::new(handler),
            inline: false,
            websocket: false,
            blocking_reads: false,
            refuse: AtomicUsize::new(0),
            calls: AtomicUsize::new(0),
            threads: Mutex::new(Vec::new()),
        }
    }

    /// The loop-only shape: the handler runs inside `call`.
    pub fn inline(mut self) -> Self {
        self.inline = true;
        self
    }

    /// Take WebSocket requests ([`App::websocket`]).
    pub fn websocket(mut self) -> Self {
        self.websocket = true;
        self
    }

    /// Its body reads block, as WSGI's do ([`App::blocking_reads`]).
    pub fn blocking_reads(mut self) -> Self {
        self.blocking_reads = true;
        self
    }

    /// Refuse the first `n` calls.
    pub fn refusing(self, n: usize) -> Self {
        self.refuse.store(n, Ordering::SeqCst);
        self
    }
}

impl App for ThreadApp {
    fn call(&self, request: AppRequest, conduit: Arc<Conduit>) -> Result<(), Box<Refused>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let refuse = self
            .refuse
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if refuse.is_ok() {
            // Room frees later: the refused caller is told then.
            let ex = conduit.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                ex.notify();
            });
            return Err(Box::new(Refused { request, conduit }));
        }
        if self.inline {
            self.threads
                .lock()
                .unwrap()
                .push(std::thread::current().id());
            (self.handler)(request, conduit);
        } else {
            let handler = self.handler.clone();
            let t = std::thread::spawn(move || handler(request, conduit));
            self.threads.lock().unwrap().push(t.thread().id());
        }
        Ok(())
    }

    fn inline(&self) -> bool {
        self.inline
    }

    fn websocket(&self) -> bool {
        self.websocket
    }

    fn blocking_reads(&self) -> bool {
        self.blocking_reads
    }
}

/// Send `event`, waiting for room as long as the answer is full. Returns how
/// many times it had to wait.
pub fn send(ex: &Conduit, mut event: ResponseEvent) -> Result<usize, Gone> {
    let mut waits = 0;
    loop {
        match ex.try_send(event)? {
            Sent::Queued => return Ok(waits),
            Sent::Full(back) => {
                event = back;
                waits += 1;
                ex.wait_room();
            }
        }
    }
}

/// Read the whole body, `max` bytes at a time, calling `each` with every piece.
pub fn read_body_with(
    ex: &Conduit,
    max: usize,
    mut each: impl FnMut(&[u8]),
) -> Result<Vec<u8>, Gone> {
    let mut body = Vec::new();
    loop {
        match ex.try_read_body(max)? {
            BodyRead::Data(d) => {
                each(&d);
                body.extend_from_slice(&d);
            }
            BodyRead::Empty => ex.wait_body(),
            BodyRead::Eof => return Ok(body),
        }
    }
}

pub fn read_body(ex: &Conduit) -> Result<Vec<u8>, Gone> {
    read_body_with(ex, 64 * 1024, |_| {})
}

/// A complete answer: `status`, a Content-Length, `body`.
pub fn answer(ex: &Conduit, status: u16, body: &[u8]) -> Result<(), Gone> {
    let length = body.len().to_string().into_bytes();
    send(
        ex,
        ResponseEvent::Start {
            status,
            headers: vec![("Content-Length", length)].into(),
        },
    )?;
    send(ex, ResponseEvent::Body(bytes::Bytes::copy_from_slice(body)))?;
    send(ex, ResponseEvent::End)?;
    Ok(())
}

/// The next WebSocket message, waiting for it.
pub fn receive_ws(ex: &Conduit) -> Result<WsMessage, Gone> {
    loop {
        match ex.try_receive_ws()? {
            Some(message) => return Ok(message),
            None => ex.wait_ws(),
        }
    }
}

/// A WebSocket echo: accepts (with the first subprotocol offered), sends
/// every message back as it came, and returns at the client's disconnect.
/// A plain HTTP request is answered 200 "echo".
pub fn ws_echo(request: AppRequest, ex: Arc<Conduit>) {
    let RequestKind::WebSocket { subprotocols } = request.kind else {
        let _ = answer(&ex, 200, b"echo");
        return;
    };
    let accept = ResponseEvent::WsAccept {
        subprotocol: subprotocols.into_iter().next(),
        headers: Default::default(),
    };
    if send(&ex, accept).is_ok() {
        echo_messages(&ex);
    }
}

/// Send every WebSocket message back as it came, until the disconnect;
/// returns its code (`None`: the conduit was gone without one).
pub fn echo_messages(ex: &Conduit) -> Option<u16> {
    loop {
        let echo = match receive_ws(ex).ok()? {
            WsMessage::Text(text) => ResponseEvent::WsText(text),
            WsMessage::Binary(data) => ResponseEvent::WsBinary(data.into()),
            WsMessage::Disconnect { code, .. } => return Some(code),
        };
        // A failed send: the Disconnect is still to be received.
        let _ = send(ex, echo);
    }
}
