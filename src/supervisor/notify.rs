//! systemd's readiness protocol (`sd_notify(3)`), spoken by the supervisor
//! when systemd started it with `NOTIFY_SOCKET` (a `Type=notify` unit):
//! `READY=1` (with `MAINPID`) once every worker is ready, `RELOADING=1`
//! while a SIGHUP or reload roll runs and `READY=1` again after it,
//! `STOPPING=1` when the drain begins, and `WATCHDOG=1` every half of
//! `WATCHDOG_USEC` while the supervisor's loop runs. One datagram a
//! message; a failed send is logged once and otherwise ignored (systemd
//! going away is no reason to stop serving).

use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::{Duration, Instant};

/// Where systemd listens, and how often it wants to hear from us: read from
/// `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID` by the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Systemd {
    /// A path, or `@name` for an abstract socket (Linux).
    pub socket: String,
    /// Half the watchdog's timeout (None: no watchdog for this process).
    pub watchdog: Option<Duration>,
}

impl Systemd {
    /// From the variables' values (None: not started by systemd with a
    /// notify socket). A watchdog meant for another process
    /// (`WATCHDOG_PID`) is not ours.
    pub fn from_vars(
        socket: Option<String>,
        usec: Option<String>,
        pid: Option<String>,
    ) -> Option<Systemd> {
        let socket = socket.filter(|s| !s.is_empty())?;
        let ours = pid.is_none_or(|p| p.trim() == std::process::id().to_string());
        let watchdog = usec
            .and_then(|u| u.trim().parse::<u64>().ok())
            .filter(|&u| u > 0 && ours)
            .map(|u| Duration::from_micros(u / 2));
        Some(Systemd { socket, watchdog })
    }
}

/// The supervisor's end of the notify socket.
pub struct Notifier {
    socket: UnixDatagram,
    to: SocketAddr,
    watchdog: Option<Duration>,
    next_ping: Option<Instant>,
    failed: bool,
}

impl Notifier {
    pub fn open(systemd: &Systemd, now: Instant) -> io::Result<Notifier> {
        let to = match systemd.socket.strip_prefix('@') {
            #[cfg(target_os = "linux")]
            Some(name) => {
                use std::os::linux::net::SocketAddrExt;
                SocketAddr::from_abstract_name(name.as_bytes())?
            }
            #[cfg(not(target_os = "linux"))]
            Some(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "abstract sockets exist only on Linux",
                ))
            }
            None => SocketAddr::from_pathname(&systemd.socket)?,
        };
        Ok(Notifier {
            socket: UnixDatagram::unbound()?,
            to,
            watchdog: systemd.watchdog,
            next_ping: systemd.watchdog.map(|every| now + every),
            failed: false,
        })
    }

    /// Every worker is ready: at the start, and after a roll.
    pub fn ready(&mut self, status: &str) {
        self.send(&format!(
            "READY=1\nMAINPID={}\nSTATUS={status}",
            std::process::id()
        ));
    }

    /// A roll began; `READY=1` ends it.
    pub fn reloading(&mut self) {
        self.send(&format!(
            "RELOADING=1\nMONOTONIC_USEC={}\nSTATUS=rolling restart",
            monotonic_usec()
        ));
    }

    pub fn stopping(&mut self) {
        self.send("STOPPING=1\nSTATUS=draining");
    }

    /// When the next watchdog ping is due (None: no watchdog).
    pub fn next_ping(&self) -> Option<Instant> {
        self.next_ping
    }

    /// Ping the watchdog if it is due at `now`.
    pub fn ping_due(&mut self, now: Instant) {
        if let (Some(every), Some(at)) = (self.watchdog, self.next_ping) {
            if now >= at {
                self.send("WATCHDOG=1");
                self.next_ping = Some(now + every);
            }
        }
    }

    fn send(&mut self, message: &str) {
        if let Err(e) = self.socket.send_to_addr(message.as_bytes(), &self.to) {
            if !self.failed {
                tracing::warn!("telling systemd (NOTIFY_SOCKET): {e}");
                self.failed = true;
            }
        }
    }
}

/// CLOCK_MONOTONIC in microseconds, as systemd's `RELOADING=1` wants it.
fn monotonic_usec() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec to a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variables_say_where_and_how_often() {
        let s = |v: &str| Some(v.to_string());
        assert_eq!(Systemd::from_vars(None, s("1000"), None), None);
        assert_eq!(Systemd::from_vars(s(""), None, None), None);
        let with = Systemd::from_vars(s("/run/notify"), s("30000000"), None).unwrap();
        assert_eq!(with.watchdog, Some(Duration::from_secs(15)));
        let other = std::process::id() + 1;
        let theirs = Systemd::from_vars(s("@n"), s("30000000"), Some(other.to_string()));
        assert_eq!(theirs.unwrap().watchdog, None);
    }

    #[test]
    fn messages_arrive_as_datagrams_and_the_watchdog_pings_when_due() {
        let dir = std::env::temp_dir().join(format!("m0-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify");
        let _ = std::fs::remove_file(&path);
        let systemd_end = UnixDatagram::bind(&path).unwrap();
        systemd_end
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let now = Instant::now();
        let systemd = Systemd {
            socket: path.display().to_string(),
            watchdog: Some(Duration::from_millis(100)),
        };
        let mut n = Notifier::open(&systemd, now).unwrap();
        let mut buf = [0u8; 256];
        let mut next = || {
            let len = systemd_end.recv(&mut buf).unwrap();
            String::from_utf8_lossy(&buf[..len]).into_owned()
        };
        n.ready("2 worker(s) ready");
        let ready = next();
        assert!(ready.starts_with("READY=1\nMAINPID="), "{ready}");
        n.reloading();
        assert!(next().starts_with("RELOADING=1\nMONOTONIC_USEC="));
        n.ping_due(now + Duration::from_millis(50));
        n.stopping();
        assert_eq!(
            next(),
            "STOPPING=1\nSTATUS=draining",
            "no ping before it was due"
        );
        n.ping_due(now + Duration::from_millis(100));
        assert_eq!(next(), "WATCHDOG=1");
        assert_eq!(n.next_ping(), Some(now + Duration::from_millis(200)));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
