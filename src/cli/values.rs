//! Value parsers shared by the flags: counts, seconds, sizes.

use std::time::Duration;

/// A count that must be at least 1 (`--cores`, `--max-connections`).
pub(super) fn at_least_one(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// Seconds as a non-negative decimal (`10`, `0.5`).
pub(super) fn parse_seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .trim()
        .parse()
        .map_err(|_| "expected a number of seconds, e.g. 10 or 0.5")?;
    Duration::try_from_secs_f64(secs)
        .map_err(|_| "expected a non-negative, finite number of seconds".into())
}

/// Seconds above zero (a timeout of nothing would fire at once).
pub(super) fn parse_positive_seconds(s: &str) -> Result<Duration, String> {
    let secs = parse_seconds(s)?;
    if secs.is_zero() {
        return Err("must be more than 0 seconds".into());
    }
    Ok(secs)
}

/// Whole seconds as Granian writes its durations: `86400`, or units in the
/// order d, h, m, s (`1d`, `24h`, `1h30m`, `90s`).
pub(super) fn parse_duration_secs(s: &str) -> Result<u64, String> {
    const FORMS: &str = "expected whole seconds or a duration like 1d, 12h, 1h30m, 90s";
    let s = s.trim();
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(secs);
    }
    if s.is_empty() {
        return Err(FORMS.into());
    }
    let (mut total, mut rest, mut units) = (0u64, s, "dhms");
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or(FORMS)?;
        let n: u64 = rest[..digits].parse().map_err(|_| FORMS)?;
        let unit = rest[digits..].chars().next().ok_or(FORMS)?;
        // Each unit at most once, largest first.
        let at = units.find(unit).ok_or(FORMS)?;
        units = &units[at + 1..];
        let scale = match unit {
            'd' => 86_400,
            'h' => 3_600,
            'm' => 60,
            _ => 1,
        };
        total = n
            .checked_mul(scale)
            .and_then(|t| total.checked_add(t))
            .ok_or("too large")?;
        rest = &rest[digits + 1..];
    }
    Ok(total)
}

/// Bytes, optionally with a binary suffix: `512`, `64K`, `10M`, `1G`, `1GiB`.
pub(super) fn parse_size(s: &str) -> Result<u64, String> {
    const FORMS: &str =
        "expected bytes, optionally with a K, M, G or T suffix, e.g. 1048576, 512K, 10M, 1G";
    let s = s.trim();
    let (number, suffix) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let number: u64 = number.parse().map_err(|_| FORMS)?;
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        "t" | "tib" => 40,
        _ => return Err(FORMS.into()),
    };
    number
        .checked_mul(1 << shift)
        .ok_or_else(|| "too large".into())
}

/// File permission bits in octal, as chmod takes them: `660`, `0660`, `0o660`.
pub(super) fn parse_mode(s: &str) -> Result<u32, String> {
    const FORM: &str = "expected permission bits in octal, e.g. 660, 0660 or 0o660";
    let s = s.trim();
    let digits = s.strip_prefix("0o").unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        return Err(FORM.into());
    }
    match u32::from_str_radix(digits, 8) {
        Ok(mode) if mode <= 0o777 => Ok(mode),
        _ => Err("permission bits go up to 777 (no setuid, setgid or sticky bit)".into()),
    }
}
