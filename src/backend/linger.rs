//! The lingering close: a connection whose peer may still be sending is
//! half-closed, and its input read and dropped, before it is closed.
//!
//! Closing a socket with unread input, or input still arriving, makes the
//! kernel answer with a reset. The peer's kernel then fails its next write,
//! and most clients give up there without reading what was already sent to
//! them: the 413 of an upload refused at its head, the answer before a
//! `Connection: close` that a pipelining client sent more after (RFC 9112
//! §9.6), the Close carrying 1009 or 1002 of a WebSocket failed while its
//! client was still sending a message. So, when a finished session says its
//! peer may still be sending ([`Linger::Yes`], or [`Linger::IfUnread`] with
//! bytes waiting in the socket), the backend shuts down its sending side (the
//! peer reads our last bytes, then the end of input), then reads and drops
//! whatever comes until the peer's own end of input, an error, a quiet spell
//! of [`Settings::idle`] or [`Settings::most`] in all, as nginx's
//! `lingering_close` does with its `lingering_timeout` and `lingering_time`
//! (and the `websockets` library's server when it fails a connection). The
//! session is told nothing more.
//!
//! The cost is bounded: one connection slot and no buffer of its own for at
//! most [`Settings::most`], a recv's worth of reading at a time.

use std::mem::MaybeUninit;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use socket2::SockRef;

/// What a finished session says of its peer ([`super::Session::linger`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Linger {
    /// Close at once: the peer is slow or gone (a timeout), or nothing was
    /// answered that it could lose.
    No,
    /// Linger only if input is already waiting unread in the socket (a
    /// request pipelined behind the last answer, which the session never read).
    IfUnread,
    /// Linger: the peer is still sending what the session will not read.
    Yes,
}

/// How long a lingering connection is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The longest quiet spell: a peer that sends nothing for this long is
    /// done (nginx's `lingering_timeout`).
    pub idle: Duration,
    /// The longest linger in all, however steadily the peer sends (nginx's
    /// `lingering_time`).
    pub most: Duration,
}

/// The longest linger in all: nginx's `lingering_time`.
pub const MOST: Duration = Duration::from_secs(30);

impl Settings {
    /// Linger for a quiet spell of `idle` (the `M0_LINGER_MS` knob, its
    /// default [`crate::tuning::DEFAULT_LINGER`]; None turns the lingering
    /// close off, the negative arm: a finished connection is closed at once,
    /// and a peer still sending gets a reset), [`MOST`] at most in all.
    pub fn quiet_for(idle: Option<Duration>) -> Option<Settings> {
        idle.map(|idle| Settings { idle, most: MOST })
    }
}

/// A connection lingering: when it closes unless its peer sends again.
#[derive(Clone, Copy, Debug)]
pub struct Lingering {
    idle: Duration,
    /// The end of [`Settings::most`].
    ends: Instant,
    until: Instant,
}

impl Lingering {
    /// Whether a finished connection on `fd` lingers, by `settings` (None:
    /// never), what its session said, and whether its peer already ended its
    /// side (`eof`: nothing more can come). If it does, its sending side is
    /// shut down here.
    pub fn begin(
        settings: Option<Settings>,
        asked: Linger,
        eof: bool,
        fd: impl AsFd,
        now: Instant,
    ) -> Option<Lingering> {
        let settings = settings.filter(|_| !eof)?;
        let linger = match asked {
            Linger::No => false,
            Linger::Yes => true,
            Linger::IfUnread => unread_input(&fd),
        };
        if !linger {
            return None;
        }
        // A socket already gone has nothing left to tell: the reads end it.
        let _ = SockRef::from(&fd).shutdown(std::net::Shutdown::Write);
        Some(Lingering::new(settings, now))
    }

    fn new(settings: Settings, now: Instant) -> Lingering {
        let ends = now + settings.most;
        Lingering {
            idle: settings.idle,
            ends,
            until: (now + settings.idle).min(ends),
        }
    }

    /// Bytes came (and were dropped): the quiet spell starts again.
    pub fn heard(&mut self, now: Instant) {
        self.until = (now + self.idle).min(self.ends);
    }

    /// When the connection closes if nothing more comes.
    pub fn deadline(&self) -> Instant {
        self.until
    }
}

/// Whether input is waiting unread in the socket (a peek, which never blocks).
fn unread_input(fd: impl AsFd) -> bool {
    let mut byte = [MaybeUninit::<u8>::uninit()];
    matches!(
        SockRef::from(&fd).recv_with_flags(&mut byte, libc::MSG_PEEK | libc::MSG_DONTWAIT),
        Ok(n) if n > 0
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};

    const SETTINGS: Settings = Settings {
        idle: Duration::from_secs(5),
        most: Duration::from_secs(30),
    };

    #[test]
    fn the_quiet_spell_restarts_with_each_read_within_the_most() {
        let t0 = Instant::now();
        let mut l = Lingering::new(SETTINGS, t0);
        assert_eq!(l.deadline(), t0 + Duration::from_secs(5));
        l.heard(t0 + Duration::from_secs(4));
        assert_eq!(l.deadline(), t0 + Duration::from_secs(9));
        l.heard(t0 + Duration::from_secs(28));
        assert_eq!(l.deadline(), t0 + Duration::from_secs(30), "capped");
    }

    /// `IfUnread` lingers only with bytes waiting; `No` and a peer that ended
    /// its side never do; `Yes` does (and half-closes: the peer reads EOF).
    #[test]
    fn whether_a_connection_lingers() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut peer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (ours, _) = listener.accept().unwrap();
        let now = Instant::now();
        let begin = |asked, eof| Lingering::begin(Some(SETTINGS), asked, eof, &ours, now);
        assert!(begin(Linger::IfUnread, false).is_none(), "nothing unread");
        assert!(begin(Linger::No, false).is_none());
        peer.write_all(b"pipelined").unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !unread_input(&ours) {
            assert!(Instant::now() < deadline, "the bytes never arrived");
            std::thread::yield_now();
        }
        assert!(begin(Linger::No, false).is_none());
        assert!(
            begin(Linger::IfUnread, true).is_none(),
            "the peer ended its side"
        );
        assert!(
            Lingering::begin(None, Linger::Yes, false, &ours, now).is_none(),
            "off"
        );
        assert!(begin(Linger::IfUnread, false).is_some());
        let mut got = Vec::new();
        std::io::Read::read_to_end(&mut peer, &mut got).unwrap();
        assert!(got.is_empty(), "the half-close is the peer's end of input");
    }
}
