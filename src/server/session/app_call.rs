//! The app's side of one request: the call handed to the [`App`], when it
//! is due (an inline app, or one whose body the core buffers, once the
//! body is whole), and what the access log keeps of the answer.

use std::sync::Arc;

use crate::app::{App, AppRequest, BodyBuffer, Conduit, Fields};
use crate::backend::Peer;
use crate::http::RequestHead;
use crate::ws::Upgrade;

/// The request the application is answering.
pub(super) struct AppCall {
    pub(super) app: Arc<dyn App>,
    pub(super) conduit: Arc<Conduit>,
    /// For the access log (shared with the app's request).
    pub(super) head: Arc<RequestHead>,
    /// The client as the app is told (a trusted proxy's, under
    /// `--proxy-headers`), for the access log, as uvicorn logs it.
    pub(super) peer: Peer,
    /// Handed to the app not yet: an inline app is called once the body is
    /// complete, and a full app hands a call back.
    pub(super) request: Option<AppRequest>,
    pub(super) body_complete: bool,
    /// The body is read in full before the call (an app with blocking reads,
    /// buffering on); `buffer` holds it until it is complete.
    pub(super) buffered: bool,
    pub(super) buffer: Option<BodyBuffer>,
    /// The client waits for a `100 Continue` the app has not asked for yet.
    pub(super) continue_owed: bool,
    /// The status of the answer, once started.
    pub(super) status: Option<u16>,
    /// Body bytes of the answer (for the access log).
    pub(super) sent: u64,
    /// For the access log: when the head began, and the response headers it shows.
    pub(super) started: std::time::Instant,
    pub(super) logged_headers: Fields,
    /// A WebSocket request's handshake, until the app accepts or denies it.
    pub(super) upgrade: Option<Upgrade>,
    /// When the app was handed the call (`--request-timeout` counts from then).
    pub(super) called_at: Option<std::time::Instant>,
}

impl AppCall {
    /// Whether the connection may read more of this request: not while the
    /// app refuses the call or has enough of the body buffered.
    pub(super) fn takes_input(&self) -> bool {
        if self.app.inline() || (self.buffered && !self.body_complete) {
            return true; // the core itself is to read the whole body first
        }
        self.request.is_none() && self.conduit.body_room()
    }

    /// Body bytes from the client; an error if the buffer's file failed.
    pub(super) fn push_body(&mut self, data: Vec<u8>) -> std::io::Result<()> {
        match &mut self.buffer {
            Some(buffer) => buffer.push(data),
            None => {
                // A false answer is seen by `takes_input`: the pump stops there.
                self.conduit.push_body(data);
                Ok(())
            }
        }
    }

    /// The request's body is complete: handed over whole if the core
    /// buffered it; an error if the buffer's file failed.
    pub(super) fn end_body(&mut self) -> std::io::Result<()> {
        self.body_complete = true;
        match self.buffer.take().map(BodyBuffer::finish) {
            None => self.conduit.end_body(),
            Some(body) => self.conduit.push_complete(body?),
        }
        Ok(())
    }

    /// Whether the app just asked for the `100 Continue` the client waits
    /// for (then it is owed no more).
    pub(super) fn take_continue(&mut self) -> bool {
        // Only a request that expects it can want `100 Continue`: no lock otherwise.
        if self.continue_owed && self.conduit.take_continue() {
            self.continue_owed = false;
            return true;
        }
        false
    }

    /// `n` bytes of output were written (some of them perhaps a previous
    /// answer's: the credit only needs to be roughly right).
    pub(super) fn written(&self, n: usize) {
        self.conduit.written(n);
    }

    /// The client ended its sending side: the app may take it as gone.
    pub(super) fn hang_up(&self) {
        self.conduit.hang_up();
    }

    /// The call ends unanswered (the connection closed or failed): the app's
    /// reads end and its sends fail.
    pub(super) fn abandon(self) {
        self.conduit.close();
    }

    /// Whether the call is due and still to be made.
    pub(super) fn due(&self) -> bool {
        let whole_body = self.app.inline() || self.buffered;
        self.request.is_some() && (!whole_body || self.body_complete)
    }

    /// Hand the request to the app; false if it refused (kept for a retry).
    pub(super) fn call(&mut self) -> bool {
        let Some(request) = self.request.take() else {
            return true;
        };
        // Before the call: an inline app runs inside it.
        let now = std::time::Instant::now();
        match self.app.call(request, self.conduit.clone()) {
            Ok(()) => {
                self.called_at = Some(now);
                true
            }
            Err(refused) => {
                self.request = Some(refused.request);
                false
            }
        }
    }
}
