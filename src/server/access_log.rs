//! The access log: one line per answered request in the Common Log Format,
//! emitted through `tracing` under the target `m0serve::access`.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::backend::Peer;
use crate::http::{RequestHead, Version};

/// Log `head` answered with `status` and `bytes` of body.
pub fn record(peer: &Peer, head: &RequestHead, status: u16, bytes: u64) {
    let host = match peer {
        Peer::Tcp(addr) => addr.ip().to_string(),
        Peer::Unix => "unix".to_string(),
    };
    let version = match head.version {
        Version::Http10 => "HTTP/1.0",
        Version::Http11 => "HTTP/1.1",
    };
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    tracing::info!(
        target: "m0serve::access",
        "{host} - - [{}] \"{} {} {version}\" {status} {bytes}",
        clf_time(secs),
        head.method,
        head.target.escape_debug(),
    );
}

/// `10/Oct/2000:13:55:36 +0000` for `secs` since the epoch (UTC).
fn clf_time(secs: u64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{day:02}/{}/{year}:{:02}:{:02}:{:02} +0000",
        MONTHS[(month - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::clf_time;

    #[test]
    fn formats_known_instants() {
        assert_eq!(clf_time(0), "01/Jan/1970:00:00:00 +0000");
        assert_eq!(clf_time(971_186_136), "10/Oct/2000:13:55:36 +0000");
        assert_eq!(clf_time(1_709_210_096), "29/Feb/2024:12:34:56 +0000");
    }
}
