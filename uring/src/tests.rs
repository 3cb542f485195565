//! The ring on real sockets over loopback.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use super::*;

fn listener() -> TcpListener {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    l
}

/// Wait (at most 5 s) until `want` completions matching `pick` arrived; returns them.
fn collect(
    ring: &mut Ring,
    want: usize,
    mut pick: impl FnMut(&Completion) -> bool,
) -> Vec<Completion> {
    let give_up = Instant::now() + Duration::from_secs(5);
    let mut got = Vec::new();
    let mut out = Vec::new();
    while got.len() < want {
        assert!(
            Instant::now() < give_up,
            "only {} of {want} completions",
            got.len()
        );
        ring.set_timer(give_up).unwrap();
        ring.submit_and_wait().unwrap();
        ring.complete(&mut out);
        got.extend(out.drain(..).filter(&mut pick));
    }
    got
}

/// Every completion that arrives within `window`.
fn drain_for(ring: &mut Ring, window: Duration) -> Vec<Completion> {
    let end = Instant::now() + window;
    let mut out = Vec::new();
    while Instant::now() < end {
        ring.set_timer(end).unwrap();
        ring.submit_and_wait().unwrap();
        ring.complete(&mut out);
    }
    out
}

fn accepted(ring: &mut Ring) -> OwnedFd {
    match collect(ring, 1, |c| matches!(c, Completion::Accepted { .. })).pop() {
        Some(Completion::Accepted { result, .. }) => result.unwrap(),
        _ => unreachable!(),
    }
}

fn fd_flags(fd: &OwnedFd) -> (i32, i32) {
    // SAFETY: fcntl on a descriptor borrowed for the call; no pointers.
    unsafe {
        (
            libc::fcntl(fd.as_raw_fd(), libc::F_GETFL),
            libc::fcntl(fd.as_raw_fd(), libc::F_GETFD),
        )
    }
}

#[test]
fn probe_accepts_this_kernel() {
    probe().unwrap();
}

#[test]
fn multishot_accept_takes_several_connections_from_one_submission() {
    let l = listener();
    let mut ring = Ring::new(Config::default()).unwrap();
    assert!(ring.arm_accept(0, l.as_fd()).unwrap());
    assert!(
        !ring.arm_accept(0, l.as_fd()).unwrap(),
        "one multishot at a time"
    );
    let addr = l.local_addr().unwrap();
    let clients: Vec<_> = (0..3).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let got = collect(&mut ring, 3, |c| matches!(c, Completion::Accepted { .. }));
    for c in got {
        let Completion::Accepted { result, more, .. } = c else {
            unreachable!()
        };
        assert!(more, "a multishot accept goes on after each connection");
        let fd = result.unwrap();
        let (fl, fd_fl) = fd_flags(&fd);
        assert_ne!(fl & libc::O_NONBLOCK, 0, "accepted fds are non-blocking");
        assert_ne!(
            fd_fl & libc::FD_CLOEXEC,
            0,
            "accepted fds are close-on-exec"
        );
    }
    assert_eq!(ring.accept_state(0), AcceptState::Armed);
    drop(clients);
}

/// The next [`Completion::Received`], its bytes copied out and its buffer given back.
fn received(ring: &mut Ring) -> (Token, std::io::Result<Vec<u8>>) {
    let Some(Completion::Received { token, result }) =
        collect(ring, 1, |c| matches!(c, Completion::Received { .. })).pop()
    else {
        unreachable!()
    };
    let result = result.map(|r| {
        let bytes = ring.bytes(&r).to_vec();
        ring.give_back(r);
        bytes
    });
    (token, result)
}

#[test]
fn recv_and_send_move_bytes() {
    let l = listener();
    let mut ring = Ring::new(Config::default()).unwrap();
    ring.arm_accept(0, l.as_fd()).unwrap();
    let mut client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let fd = accepted(&mut ring);
    let token = Token::new(7, 3);

    ring.recv(token, fd.as_fd()).unwrap();
    client.write_all(b"hello").unwrap();
    let (t, got) = received(&mut ring);
    assert_eq!(t, token);
    assert_eq!(got.unwrap(), b"hello");

    ring.send(token, fd.as_fd(), b"world".to_vec()).unwrap();
    let Some(Completion::Sent { buf, result, .. }) =
        collect(&mut ring, 1, |c| matches!(c, Completion::Sent { .. })).pop()
    else {
        unreachable!()
    };
    assert_eq!((result.unwrap(), &buf[..]), (5, &b"world"[..]));
    let mut back = [0; 5];
    client.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"world");

    // The peer closing is a zero-length receive.
    ring.recv(token, fd.as_fd()).unwrap();
    drop(client);
    assert_eq!(received(&mut ring).1.unwrap(), b"");
}

/// The point of the pool: recvs waiting on silent connections hold no
/// buffer, so many of them fit in a pool of a few, and each buffer serves
/// connection after connection once given back.
#[test]
fn waiting_recvs_hold_no_buffer_and_given_back_buffers_serve_again() {
    let config = Config {
        recv_bufs_max: 2,
        recv_bufs_initial: 2,
        ..Config::default()
    };
    let mut ring = Ring::new(config).unwrap();
    let pairs: Vec<_> = (0..8)
        .map(|_| std::os::unix::net::UnixStream::pair().unwrap())
        .collect();
    for (i, (a, _)) in pairs.iter().enumerate() {
        ring.recv(Token::new(i as u32, 1), a.as_fd()).unwrap();
    }
    ring.submit().unwrap();
    for (i, (_, b)) in pairs.iter().enumerate() {
        (&*b).write_all(format!("msg {i}").as_bytes()).unwrap();
        let (t, got) = received(&mut ring);
        assert_eq!(t.slot(), i as u32);
        assert_eq!(got.unwrap(), format!("msg {i}").as_bytes());
    }
    assert_eq!(
        ring.recv_buffers(),
        2,
        "eight receives served by two buffers"
    );
}

/// Recvs that find every buffer out end with ENOBUFS, which grows the pool
/// (up to its size), and their bytes wait in the socket for the next recv.
#[test]
fn a_dry_pool_ends_recvs_with_enobufs_and_grows() {
    let config = Config {
        recv_bufs_max: 4,
        recv_bufs_initial: 1,
        ..Config::default()
    };
    let mut ring = Ring::new(config).unwrap();
    let pairs: Vec<_> = (0..3)
        .map(|_| std::os::unix::net::UnixStream::pair().unwrap())
        .collect();
    for (i, (a, b)) in pairs.iter().enumerate() {
        (&*b).write_all(b"x").unwrap();
        ring.recv(Token::new(i as u32, 1), a.as_fd()).unwrap();
    }
    // Hold every buffer lent: the first recv takes the only one.
    let mut lent = Vec::new();
    let mut dry = 0;
    let give_up = Instant::now() + Duration::from_secs(2);
    while lent.len() + dry < 3 && Instant::now() < give_up {
        ring.submit_and_wait().unwrap();
        let mut out = Vec::new();
        ring.complete(&mut out);
        for c in out {
            match c {
                Completion::Received { result: Ok(r), .. } => lent.push(r),
                Completion::Received { result: Err(e), .. } => {
                    assert_eq!(e.raw_os_error(), Some(libc::ENOBUFS));
                    dry += 1;
                }
                _ => {}
            }
        }
    }
    assert_eq!((lent.len(), dry), (1, 2), "one buffer, three receives");
    assert_eq!(
        ring.recv_buffers(),
        4,
        "doubled twice, capped at the pool's size"
    );
    // Armed again, the two that found none get their bytes now.
    for i in 1..3 {
        ring.recv(Token::new(i, 2), pairs[i as usize].0.as_fd())
            .unwrap();
    }
    for c in collect(&mut ring, 2, |c| matches!(c, Completion::Received { .. })) {
        let Completion::Received { result, .. } = c else {
            unreachable!()
        };
        let r = result.unwrap();
        assert_eq!(ring.bytes(&r), b"x");
        ring.give_back(r);
    }
    for r in lent {
        ring.give_back(r);
    }
}

#[test]
fn one_op_of_a_kind_per_token() {
    let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut ring = Ring::new(Config::default()).unwrap();
    let t = Token::new(1, 1);
    ring.recv(t, a.as_fd()).unwrap();
    let e = ring.recv(t, a.as_fd()).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
    ring.recv(Token::new(1, 2), a.as_fd()).unwrap();
}

#[test]
fn the_timer_fires_at_its_deadline_and_an_earlier_one_replaces_it() {
    let mut ring = Ring::new(Config::default()).unwrap();
    let start = Instant::now();
    ring.set_timer(start + Duration::from_millis(60)).unwrap();
    let mut out = Vec::new();
    ring.submit_and_wait().unwrap();
    ring.complete(&mut out);
    assert!(matches!(out[..], [Completion::Timer]), "{out:?}");
    assert!(start.elapsed() >= Duration::from_millis(55), "fired early");
    assert_eq!(ring.timer(), None);

    // A far timer, then a near one: the near one fires, the far one is gone.
    let start = Instant::now();
    ring.set_timer(start + Duration::from_secs(30)).unwrap();
    ring.set_timer(start + Duration::from_millis(30)).unwrap();
    assert_eq!(ring.timer(), Some(start + Duration::from_millis(30)));
    // A later deadline keeps the earlier timer.
    ring.set_timer(start + Duration::from_secs(60)).unwrap();
    let mut out = Vec::new();
    while out.is_empty() {
        ring.submit_and_wait().unwrap();
        ring.complete(&mut out);
    }
    assert!(matches!(out[..], [Completion::Timer]), "{out:?}");
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(
        ring.in_flight(),
        1,
        "only the wake read is left: the far timer was removed"
    );
}

#[test]
fn a_waker_on_another_thread_ends_a_blocked_wait() {
    let mut ring = Ring::new(Config::default()).unwrap();
    for _ in 0..2 {
        let waker = ring.waker();
        let start = Instant::now();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            waker.wake();
        });
        // No timer: only the wake can end this wait.
        let mut out = Vec::new();
        while out.is_empty() {
            ring.submit_and_wait().unwrap();
            ring.complete(&mut out);
        }
        t.join().unwrap();
        assert!(matches!(out[..], [Completion::Woken]), "{out:?}");
        assert!(
            start.elapsed() >= Duration::from_millis(45),
            "the wait did not block"
        );
    }
}

#[test]
fn a_cancelled_accept_leaves_connections_in_the_backlog_until_rearmed() {
    let l = listener();
    let addr = l.local_addr().unwrap();
    let mut ring = Ring::new(Config::default()).unwrap();
    ring.arm_accept(0, l.as_fd()).unwrap();
    ring.cancel_accept(0).unwrap();
    assert_eq!(ring.accept_state(0), AcceptState::Cancelling);
    assert!(
        !ring.arm_accept(0, l.as_fd()).unwrap(),
        "not while the cancel is in flight"
    );
    let last = collect(&mut ring, 1, |c| matches!(c, Completion::Accepted { .. }));
    let Completion::Accepted { result, more, .. } = &last[0] else {
        unreachable!()
    };
    assert!(!more);
    assert_eq!(
        result.as_ref().unwrap_err().raw_os_error(),
        Some(libc::ECANCELED)
    );
    assert_eq!(ring.accept_state(0), AcceptState::Idle);

    let _client = TcpStream::connect(addr).unwrap();
    let quiet = drain_for(&mut ring, Duration::from_millis(100));
    assert!(
        !quiet
            .iter()
            .any(|c| matches!(c, Completion::Accepted { .. })),
        "nothing is accepted while cancelled"
    );
    assert!(ring.arm_accept(0, l.as_fd()).unwrap());
    accepted(&mut ring);
}

#[test]
fn a_cancelled_recv_completes_cancelled() {
    let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut ring = Ring::new(Config::default()).unwrap();
    let t = Token::new(4, 9);
    ring.recv(t, a.as_fd()).unwrap();
    ring.submit().unwrap();
    ring.cancel(Op::Recv, t).unwrap();
    let (token, result) = received(&mut ring);
    assert_eq!(token, t);
    assert_eq!(result.unwrap_err().raw_os_error(), Some(libc::ECANCELED));
}

#[test]
fn dropping_a_ring_with_operations_in_flight_returns_promptly() {
    let l = listener();
    let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut ring = Ring::new(Config::default()).unwrap();
    ring.arm_accept(0, l.as_fd()).unwrap();
    ring.recv(Token::new(0, 0), a.as_fd()).unwrap();
    ring.set_timer(Instant::now() + Duration::from_secs(60))
        .unwrap();
    ring.submit().unwrap();
    let start = Instant::now();
    assert!(
        ring.quiesce_for_test(),
        "every operation finished, nothing leaked"
    );
    assert_eq!(ring.in_flight(), 0);
    assert!(
        start.elapsed() < Duration::from_millis(900),
        "teardown waited out its bound"
    );
}

/// The hang-up poll's one completion, within 5 s.
fn hangup(ring: &mut Ring) -> (Token, std::io::Result<Hangup>) {
    match collect(ring, 1, |c| matches!(c, Completion::Hangup { .. })).pop() {
        Some(Completion::Hangup { token, result }) => (token, result),
        _ => unreachable!(),
    }
}

#[test]
fn a_hangup_poll_ignores_data_and_reports_a_half_close() {
    let l = listener();
    let mut ring = Ring::new(Config::default()).unwrap();
    ring.arm_accept(0, l.as_fd()).unwrap();
    let mut client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let fd = accepted(&mut ring);
    let token = Token::new(4, 9);

    ring.watch_hangup(token, fd.as_fd()).unwrap();
    assert!(
        ring.watch_hangup(token, fd.as_fd()).is_err(),
        "one poll per token"
    );
    // A pipelined request is not a hang-up.
    client.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    let early = drain_for(&mut ring, Duration::from_millis(100));
    assert!(
        !early.iter().any(|c| matches!(c, Completion::Hangup { .. })),
        "data fired the hang-up poll"
    );

    // A FIN: the peer still reads.
    client.shutdown(std::net::Shutdown::Write).unwrap();
    let (t, result) = hangup(&mut ring);
    assert_eq!(t, token);
    let got = result.unwrap();
    assert!(got.read_closed && !got.gone, "{got:?}");
}

#[test]
fn a_hangup_poll_reports_a_reset_as_gone() {
    let l = listener();
    let mut ring = Ring::new(Config::default()).unwrap();
    ring.arm_accept(0, l.as_fd()).unwrap();
    let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let fd = accepted(&mut ring);
    ring.watch_hangup(Token::new(2, 5), fd.as_fd()).unwrap();
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: `linger` is a live, correctly sized option value for the call.
    let rc = unsafe {
        libc::setsockopt(
            client.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0);
    drop(client); // with linger 0: a reset
    let (token, result) = hangup(&mut ring);
    assert_eq!(token, Token::new(2, 5));
    assert!(result.unwrap().gone);
}

#[test]
fn a_cancelled_hangup_poll_completes_with_ecanceled() {
    let l = listener();
    let mut ring = Ring::new(Config::default()).unwrap();
    ring.arm_accept(0, l.as_fd()).unwrap();
    let _client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let fd = accepted(&mut ring);
    let token = Token::new(1, 1);
    ring.watch_hangup(token, fd.as_fd()).unwrap();
    ring.submit().unwrap();
    ring.cancel(Op::Poll, token).unwrap();
    let (_, result) = hangup(&mut ring);
    assert_eq!(result.unwrap_err().raw_os_error(), Some(libc::ECANCELED));
}

/// Two rings on one listener, as two worker processes have: `arm` on each,
/// re-armed after every completion; returns how many of `n` connections each took.
fn spread_between_two_rings(
    n: usize,
    arm: fn(&mut Ring, usize, BorrowedFd<'_>) -> io::Result<bool>,
) -> [usize; 2] {
    let l = listener();
    let mut rings = [
        Ring::new(Config::default()).unwrap(),
        Ring::new(Config::default()).unwrap(),
    ];
    for r in &mut rings {
        arm(r, 0, l.as_fd()).unwrap();
        r.submit().unwrap();
    }
    let addr = l.local_addr().unwrap();
    let mut took = [0; 2];
    let mut clients = Vec::new();
    for _ in 0..n {
        clients.push(TcpStream::connect(addr).unwrap());
        let give_up = Instant::now() + Duration::from_secs(2);
        let mut got = false;
        while !got {
            assert!(Instant::now() < give_up, "a connection no ring accepted");
            for (i, r) in rings.iter_mut().enumerate() {
                let mut done = Vec::new();
                r.complete(&mut done);
                for c in done {
                    if let Completion::Accepted { result: Ok(_), .. } = c {
                        took[i] += 1;
                        got = true;
                    }
                }
                if r.accept_state(0) == AcceptState::Idle {
                    arm(r, 0, l.as_fd()).unwrap();
                }
                r.submit().unwrap();
            }
        }
    }
    took
}

#[test]
fn single_shot_accepts_rotate_connections_between_rings_sharing_a_listener() {
    let [a, b] = spread_between_two_rings(20, Ring::arm_accept_once);
    assert!(
        a >= 5 && b >= 5,
        "single-shot accepts took {a} and {b} of 20"
    );
    // The negative arm: the multishot armed first takes them all.
    let [a, b] = spread_between_two_rings(20, Ring::arm_accept);
    assert!(a == 0 || b == 0, "multishot accepts took {a} and {b} of 20");
}

/// Two rings with a single-shot accept each on `l`, queued in this order.
fn two_rings_armed_once(l: &TcpListener) -> [Ring; 2] {
    [(); 2].map(|_| {
        let mut r = Ring::new(Config::default()).unwrap();
        assert!(r.arm_accept_once(0, l.as_fd()).unwrap());
        r.submit().unwrap();
        r
    })
}

/// The connection the first ring's accept was woken for was stranded: the
/// ring `behind` is not woken for it within 200 ms, and it is still in `l`'s
/// queue (a non-blocking accept takes it).
fn assert_stranded(l: &TcpListener, behind: &mut Ring) {
    let quiet = drain_for(behind, Duration::from_millis(200));
    assert!(
        !quiet
            .iter()
            .any(|c| matches!(c, Completion::Accepted { result: Ok(_), .. })),
        "the ring behind was woken after all: nothing was stranded"
    );
    l.accept()
        .expect("the stranded connection is in the listener's queue");
}

/// Why a worker must not cancel a single-shot accept on a shared listener
/// (and why the drain, which must, takes one connection after its cancel):
/// accept waits are exclusive, so a connection wakes only the ring armed
/// first; with deferred task work that ring runs the accept at its next
/// enter, and a cancel submitted before then ends it cancelled. The
/// connection stays queued and the ring behind is never woken for it.
#[test]
fn a_single_shot_accept_cancelled_after_its_wake_up_strands_the_connection() {
    let l = listener();
    let [mut first, mut behind] = two_rings_armed_once(&l);
    // Loopback completes the handshake inside connect: the wake-up is made.
    let _client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    first.cancel_accept(0).unwrap();
    let ended = collect(&mut first, 1, |c| matches!(c, Completion::Accepted { .. }));
    let Completion::Accepted { result, .. } = &ended[0] else {
        unreachable!()
    };
    if result.is_ok() {
        // A kernel without deferred task work ran the accept on the way
        // back from connect: nothing was stranded to show.
        eprintln!("the accept ran before its cancel: nothing stranded on this kernel");
        return;
    }
    assert_eq!(
        result.as_ref().unwrap_err().raw_os_error(),
        Some(libc::ECANCELED)
    );
    // Still queued: a non-blocking accept (the drain's make-up) takes it.
    assert_stranded(&l, &mut behind);
}

/// Why a worker that shares the listener looks at it now and then on its
/// own: a ring whose owner is gone (a worker killed by SIGKILL or the OOM
/// killer) keeps its accept queued on the listener until the kernel's exit
/// work tears the ring down, later and elsewhere. A connection arriving
/// meanwhile wakes only that accept, whose deferred task work never runs:
/// the connection stays queued, and the ring behind is never woken for it.
#[test]
fn a_ring_closed_after_its_wake_up_strands_the_connection() {
    let l = listener();
    let [mut gone, mut behind] = two_rings_armed_once(&l);
    let _client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    // Not entered again (the owner is dead): only what is already posted.
    let mut posted = Vec::new();
    gone.complete(&mut posted);
    if !posted.is_empty() {
        // A kernel without deferred task work ran the accept on the way
        // back from connect: nothing was stranded to show.
        eprintln!("the accept ran inside connect: nothing stranded on this kernel");
        return;
    }
    drop(gone);
    assert_stranded(&l, &mut behind);
}

#[test]
fn a_writable_poll_waits_for_room() {
    let l = listener();
    let mut ring = Ring::new(Config::default()).unwrap();
    ring.arm_accept(0, l.as_fd()).unwrap();
    let mut client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let fd = accepted(&mut ring);
    // Fill the socket (it is non-blocking): the client reads nothing yet.
    let chunk = [7u8; 65536];
    let mut filled = 0usize;
    loop {
        // SAFETY: `chunk` is valid for its length; `fd` is open for the call.
        let n = unsafe { libc::send(fd.as_raw_fd(), chunk.as_ptr().cast(), chunk.len(), 0) };
        if n < 0 {
            assert_eq!(
                std::io::Error::last_os_error().kind(),
                std::io::ErrorKind::WouldBlock
            );
            break;
        }
        filled += n as usize;
    }
    let token = Token::new(3, 2);
    ring.watch_writable(token, fd.as_fd()).unwrap();
    assert!(
        ring.watch_writable(token, fd.as_fd()).is_err(),
        "one poll per token"
    );
    let early = drain_for(&mut ring, Duration::from_millis(100));
    assert!(
        !early
            .iter()
            .any(|c| matches!(c, Completion::Writable { .. })),
        "fired while the socket was full"
    );
    // The client takes everything: there is room again.
    let mut got = vec![0u8; filled];
    client.read_exact(&mut got).unwrap();
    match collect(&mut ring, 1, |c| matches!(c, Completion::Writable { .. })).pop() {
        Some(Completion::Writable { token: t, result }) => {
            assert_eq!(t, token);
            result.unwrap();
        }
        _ => unreachable!(),
    }
    // With room already, it fires at once.
    ring.watch_writable(token, fd.as_fd()).unwrap();
    match collect(&mut ring, 1, |c| matches!(c, Completion::Writable { .. })).pop() {
        Some(Completion::Writable { result, .. }) => result.unwrap(),
        _ => unreachable!(),
    }
}

#[test]
fn accepts_on_two_listeners_complete_with_their_index_and_cancel_apart() {
    let (a, b) = (listener(), listener());
    let mut ring = Ring::new(Config::default()).unwrap();
    assert!(ring.arm_accept(0, a.as_fd()).unwrap());
    assert!(ring.arm_accept(1, b.as_fd()).unwrap());
    ring.submit().unwrap();
    let _to_b = TcpStream::connect(b.local_addr().unwrap()).unwrap();
    let got = collect(&mut ring, 1, |c| matches!(c, Completion::Accepted { .. }));
    let Completion::Accepted {
        listener, result, ..
    } = &got[0]
    else {
        unreachable!()
    };
    assert_eq!(
        *listener, 1,
        "the completion names the listener it came from"
    );
    assert!(result.is_ok());
    ring.cancel_accept(1).unwrap();
    let ended = collect(&mut ring, 1, |c| matches!(c, Completion::Accepted { .. }));
    assert!(matches!(
        ended[0],
        Completion::Accepted {
            listener: 1,
            more: false,
            ..
        }
    ));
    assert_eq!(ring.accept_state(1), AcceptState::Idle);
    assert_eq!(
        ring.accept_state(0),
        AcceptState::Armed,
        "the other goes on"
    );
    let _to_a = TcpStream::connect(a.local_addr().unwrap()).unwrap();
    let got = collect(&mut ring, 1, |c| matches!(c, Completion::Accepted { .. }));
    assert!(matches!(
        got[0],
        Completion::Accepted {
            listener: 0,
            result: Ok(_),
            ..
        }
    ));
}
