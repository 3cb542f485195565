//! The Date header (RFC 9110 §6.6.1), formatted at most once a second per
//! thread: a response only copies 29 cached bytes.

use std::cell::RefCell;
use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The length of an IMF-fixdate, e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
pub const DATE_LEN: usize = 29;

/// An IMF-fixdate, reformatted only when the second changes.
#[derive(Debug)]
pub struct DateCache {
    /// The second `text` was formatted for (`u64::MAX`: never).
    secs: u64,
    text: [u8; DATE_LEN],
    /// How many times `text` was formatted (tests check the caching).
    formats: u64,
}

impl Default for DateCache {
    fn default() -> Self {
        DateCache {
            secs: u64::MAX,
            text: [b' '; DATE_LEN],
            formats: 0,
        }
    }
}

impl DateCache {
    /// The date at `now`, formatting only if the second differs from the cached one.
    pub fn at(&mut self, now: SystemTime) -> &[u8; DATE_LEN] {
        let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        if secs != self.secs {
            let date = httpdate::HttpDate::from(UNIX_EPOCH + Duration::from_secs(secs));
            // An HttpDate always formats to exactly DATE_LEN bytes.
            write!(&mut self.text[..], "{date}").expect("IMF-fixdate is 29 bytes");
            self.secs = secs;
            self.formats += 1;
        }
        &self.text
    }
}

thread_local! {
    // Per thread: core threads never share it, so no lock and no contention.
    static CACHE: RefCell<DateCache> = RefCell::new(DateCache::default());
}

/// Calls `f` with the current date, from this thread's cache.
pub fn with_now<R>(f: impl FnOnce(&[u8]) -> R) -> R {
    CACHE.with(|cache| f(cache.borrow_mut().at(SystemTime::now())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_imf_fixdate() {
        let mut cache = DateCache::default();
        let t = UNIX_EPOCH + Duration::from_secs(784_111_777);
        assert_eq!(cache.at(t), b"Sun, 06 Nov 1994 08:49:37 GMT");
    }

    #[test]
    fn formats_once_per_second() {
        let mut cache = DateCache::default();
        let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let first = *cache.at(t);
        assert_eq!(*cache.at(t + Duration::from_millis(999)), first);
        assert_eq!(cache.formats, 1);
        let next = *cache.at(t + Duration::from_secs(1));
        assert_ne!(next, first);
        assert_eq!(cache.formats, 2);
        assert_eq!(&next, b"Tue, 14 Nov 2023 22:13:21 GMT");
    }

    #[test]
    fn with_now_gives_a_current_date() {
        let before = SystemTime::now() - Duration::from_secs(1);
        let got = with_now(|d| String::from_utf8(d.to_vec()).unwrap());
        let parsed = httpdate::parse_http_date(&got).unwrap();
        assert!(parsed >= before && parsed <= SystemTime::now(), "{got}");
    }
}
