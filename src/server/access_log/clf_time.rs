//! The access log's timestamps, from seconds since the epoch (UTC: no time
//! zone database is read on the core threads).

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// (year, month 1-12, day, seconds into the day) of `secs` since the epoch.
fn civil(secs: u64) -> (i64, usize, i64, u64) {
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
    (year, month as usize, day, rem)
}

/// `10/Oct/2000:13:55:36 +0000`: the Common Log Format's time.
pub fn clf(secs: u64) -> String {
    let (year, month, day, rem) = civil(secs);
    format!(
        "{day:02}/{}/{year}:{:02}:{:02}:{:02} +0000",
        MONTHS[month - 1],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// `2000-10-10T13:55:36.000123Z`: RFC 3339, for `json` lines.
pub fn rfc3339_micros(micros: u64) -> String {
    let (year, month, day, rem) = civil(micros / 1_000_000);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        micros % 1_000_000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(clf(0), "01/Jan/1970:00:00:00 +0000");
        assert_eq!(clf(971_186_136), "10/Oct/2000:13:55:36 +0000");
        assert_eq!(clf(1_709_210_096), "29/Feb/2024:12:34:56 +0000");
        assert_eq!(
            rfc3339_micros(971_186_136_000_123),
            "2000-10-10T13:55:36.000123Z"
        );
        assert_eq!(
            rfc3339_micros(1_709_210_096_500_000),
            "2024-02-29T12:34:56.500000Z"
        );
    }
}
