//! CPU lists in the kernel's cpuset notation (`0-3,8,10-11`): how the
//! startup log names a worker's CPUs, and how a supervisor can hand them to
//! a worker process on its command line.

/// `cpus` in cpuset notation, runs of consecutive ids as ranges; in the
/// given order (a worker's list is in pin order).
pub fn format(cpus: &[usize]) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if j == i {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    out.join(",")
}

/// The ids `format` wrote, in order.
pub fn parse(list: &str) -> Result<Vec<usize>, String> {
    let bad = || format!("not a CPU list: {list:?} (expected e.g. 0-3,8)");
    let mut cpus = Vec::new();
    for part in list.trim().split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
        if a > b {
            return Err(bad());
        }
        cpus.extend(a..=b);
    }
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_singles_round_trip() {
        for (cpus, text) in [
            (vec![0, 1, 2, 3], "0-3"),
            (vec![2, 3, 6], "2-3,6"),
            (vec![5], "5"),
            (vec![3, 0, 1], "3,0-1"),
            (vec![], ""),
        ] {
            assert_eq!(format(&cpus), text);
            if !cpus.is_empty() {
                assert_eq!(parse(text).unwrap(), cpus);
            }
        }
    }

    #[test]
    fn malformed_lists_are_errors() {
        for bad in ["", "a", "3-1", "1,,2", "1-", "-1"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
