//! A WebSocket request's side of the channel (ASGI WebSocket spec 2.4).
//!
//! - receive: `websocket.connect` first, then `websocket.receive` (`text` or
//!   `bytes`) as the client's messages come, then `websocket.disconnect` with
//!   the client's `code` and `reason` (1006 when it vanished without a Close),
//!   repeated to any later receive;
//! - send: `websocket.accept` (`subprotocol`, `headers`), `websocket.send`
//!   (`text` or `bytes`, waiting for room like an HTTP body), `websocket.close`
//!   (`code`, `reason`; before the accept the core answers 403), and the
//!   denial response `websocket.http.response.start`/`.body` before the accept.
//!
//! An app that returns without closing closes normally (1000), or with a 403
//! before it accepted; one that fails gets a 500 before the accept, a 1011
//! Close after it.

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};

use super::{Answer, Channel};
use crate::app::{piece, Fields, ResponseEvent, WsMessage};
use crate::http::head::list_items;
use crate::ws::close::{is_valid_code, ABNORMAL, NORMAL};

/// Where the WebSocket stands, from the app's sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Neither accepted nor denied yet.
    Handshake,
    Accepted,
    /// Answered with `websocket.http.response.*`.
    Denied,
    /// The app sent `websocket.close`.
    Closed,
}

/// A WebSocket request's state in its [`Channel`].
pub(in crate::asgi) struct WsState {
    /// The subprotocols the client offered.
    offered: Vec<String>,
    /// `websocket.connect` was delivered.
    connected: bool,
    stage: Stage,
    /// The disconnect, once received: later receives get it again.
    disconnect: Option<(u16, String)>,
}

impl WsState {
    pub(in crate::asgi) fn new(offered: Vec<String>) -> WsState {
        WsState {
            offered,
            connected: false,
            stage: Stage::Handshake,
            disconnect: None,
        }
    }
}

fn message<'py>(py: Python<'py>, kind: &Bound<'py, PyString>) -> PyResult<Bound<'py, PyDict>> {
    let message = PyDict::new(py);
    message.set_item(intern!(py, "type"), kind)?;
    Ok(message)
}

/// An optional key of `message` that may also be None.
fn get<'py>(
    message: &Bound<'py, PyDict>,
    key: &Bound<'py, PyString>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    Ok(message.get_item(key)?.filter(|v| !v.is_none()))
}

impl Channel {
    fn ws(&mut self) -> &mut WsState {
        self.ws.as_mut().expect("a WebSocket channel")
    }

    /// The next message for `receive()`, or None when there is none yet.
    pub(super) fn ws_receive<'py>(
        &mut self,
        py: Python<'py>,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let ws = self.ws();
        if !ws.connected {
            ws.connected = true;
            return message(py, intern!(py, "websocket.connect")).map(Some);
        }
        if ws.disconnect.is_none() {
            let received = match self.conduit.try_receive_ws() {
                Ok(None) => return Ok(None),
                Ok(Some(WsMessage::Text(text))) => {
                    let m = message(py, intern!(py, "websocket.receive"))?;
                    m.set_item(intern!(py, "text"), text)?;
                    return Ok(Some(m));
                }
                Ok(Some(WsMessage::Binary(data))) => {
                    let m = message(py, intern!(py, "websocket.receive"))?;
                    m.set_item(intern!(py, "bytes"), PyBytes::new(py, &data))?;
                    return Ok(Some(m));
                }
                Ok(Some(WsMessage::Disconnect { code, reason })) => (code, reason),
                Err(_) => (ABNORMAL, String::new()),
            };
            self.ws().disconnect = Some(received);
        }
        let (code, reason) = self.ws().disconnect.clone().expect("set above");
        let m = message(py, intern!(py, "websocket.disconnect"))?;
        m.set_item(intern!(py, "code"), code)?;
        m.set_item(intern!(py, "reason"), reason)?;
        Ok(Some(m))
    }

    /// Send one message of type `kind`; False when the answer is full.
    pub(super) fn ws_send(&mut self, kind: &str, message: &Bound<'_, PyDict>) -> PyResult<bool> {
        let py = message.py();
        let stage = self.ws().stage;
        match (kind, stage) {
            ("websocket.accept", Stage::Handshake) => {
                let mut subprotocol: Option<String> =
                    match get(message, intern!(py, "subprotocol"))? {
                        Some(p) => Some(p.extract()?),
                        None => None,
                    };
                // The spec wants the choice in `subprotocol`, but apps set the
                // field in their headers too: taken as the choice when no
                // `subprotocol` was given, and held to the same rule. The
                // handshake writes the field from the choice, not the app's.
                let mut in_headers = Vec::new();
                let headers = match get(message, intern!(py, "headers"))? {
                    Some(list) => super::fields(&list, |name, value| {
                        if name.eq_ignore_ascii_case(b"sec-websocket-protocol") {
                            // Read as the client's offer is (handshake::validate).
                            let tokens = list_items(value).map(String::from_utf8_lossy);
                            in_headers.extend(tokens.map(|t| t.into_owned()));
                        }
                    })?,
                    None => Fields::default(),
                };
                if subprotocol.is_none() {
                    if in_headers.len() > 1 {
                        return Err(PyValueError::new_err(
                            "websocket.accept: a server chooses one subprotocol, \
                             its headers name several",
                        ));
                    }
                    subprotocol = in_headers.pop();
                } else if let Some(other) =
                    in_headers.iter().find(|t| subprotocol.as_ref() != Some(t))
                {
                    tracing::warn!(
                        target: "m0serve::asgi",
                        "websocket.accept: its headers name subprotocol {other:?}, its subprotocol \
                         {:?}: the subprotocol is sent",
                        subprotocol.as_deref().unwrap_or_default()
                    );
                }
                if let Some(p) = &subprotocol {
                    if !self.ws().offered.contains(p) {
                        return Err(PyValueError::new_err(format!(
                            "websocket.accept: subprotocol {p:?} was not offered by the client"
                        )));
                    }
                }
                self.ws().stage = Stage::Accepted;
                self.answer = Answer::Started;
                self.send_event(ResponseEvent::WsAccept {
                    subprotocol,
                    headers,
                })
            }
            ("websocket.send", Stage::Accepted) => {
                let text = get(message, intern!(py, "text"))?;
                let bytes = get(message, intern!(py, "bytes"))?;
                let event = match (text, bytes) {
                    (Some(text), None) => ResponseEvent::WsText(text.extract()?),
                    (None, Some(bytes)) => binary_message(bytes)?,
                    _ => {
                        return Err(PyValueError::new_err(
                            "websocket.send needs exactly one of text and bytes",
                        ))
                    }
                };
                self.send_event(event)
            }
            ("websocket.close", Stage::Handshake | Stage::Accepted) => {
                let code: u16 = match get(message, intern!(py, "code"))? {
                    Some(c) => c.extract()?,
                    None => NORMAL,
                };
                if !is_valid_code(code) {
                    return Err(PyValueError::new_err(format!(
                        "websocket.close: {code} is not a close code an endpoint may send"
                    )));
                }
                let reason: String = match get(message, intern!(py, "reason"))? {
                    Some(r) => r.extract()?,
                    None => String::new(),
                };
                self.ws().stage = Stage::Closed;
                self.answer = Answer::Ended;
                self.send_event(ResponseEvent::WsClose { code, reason })
            }
            ("websocket.http.response.start", Stage::Handshake) => {
                self.ws().stage = Stage::Denied;
                self.start(message)
            }
            ("websocket.http.response.body", Stage::Denied) => self.body(message),
            (
                "websocket.accept"
                | "websocket.send"
                | "websocket.close"
                | "websocket.http.response.start"
                | "websocket.http.response.body",
                _,
            ) => Err(PyRuntimeError::new_err(format!(
                "{kind} is out of order (the WebSocket is {})",
                match stage {
                    Stage::Handshake => "not accepted yet",
                    Stage::Accepted => "accepted",
                    Stage::Denied => "being denied",
                    Stage::Closed => "closed",
                }
            ))),
            (other, _) => Err(PyValueError::new_err(format!(
                "unexpected ASGI message type {other:?} for a WebSocket"
            ))),
        }
    }

    /// The app returned: close for it (a 403 before the accept, else 1000);
    /// a denial response it did not complete is aborted.
    pub(super) fn ws_finish(&mut self) {
        let event = match self.ws().stage {
            Stage::Handshake => ResponseEvent::WsClose {
                code: NORMAL,
                reason: String::new(),
            },
            Stage::Accepted => ResponseEvent::End,
            Stage::Denied => {
                return self.abort_with(
                    "the ASGI application returned without completing the denial response",
                )
            }
            Stage::Closed => return,
        };
        self.ws().stage = Stage::Closed;
        self.answer = Answer::Ended;
        // The client may have gone: then nobody is owed the close.
        let _ = self.conduit.try_send(event);
    }
}

/// A `websocket.send`'s `bytes` as the message to frame: a piece, so a big
/// one is framed by the core from the app's own buffer.
fn binary_message(bytes: Bound<'_, PyAny>) -> PyResult<ResponseEvent> {
    let bytes = bytes
        .cast_into::<PyBytes>()
        .map_err(|_| PyValueError::new_err("websocket.send: bytes must be bytes"))?;
    Ok(ResponseEvent::WsBinary(piece::from_py_bytes(
        &bytes,
        usize::MAX,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::piece::WHOLE_PIECE;

    #[test]
    fn a_big_binary_message_is_the_apps_own_buffer() {
        Python::initialize();
        Python::attach(|py| {
            let big = PyBytes::new(py, &vec![5u8; WHOLE_PIECE]);
            let Ok(ResponseEvent::WsBinary(data)) = binary_message(big.clone().into_any()) else {
                panic!("not a binary message");
            };
            assert_eq!(data.as_ptr(), big.as_bytes().as_ptr(), "copied");
            assert_eq!(&data[..], big.as_bytes());
            let text = PyString::new(py, "x").into_any();
            assert!(binary_message(text).is_err(), "a str as bytes");
        });
    }
}
