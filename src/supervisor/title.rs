//! Process titles (`m0serve: supervisor`, `m0serve: worker 2`), so `ps` and
//! `top` tell the processes apart. On Linux the argument strings, which
//! `/proc/PID/cmdline` shows, are overwritten in place (what setproctitle
//! does; arguments were parsed before), and the main thread's name (`comm`,
//! 15 bytes) is set too. Elsewhere nothing changes.

/// Set this process's title; call it after the command line has been read.
pub fn set(title: &str) {
    #[cfg(target_os = "linux")]
    linux::set(title);
    #[cfg(not(target_os = "linux"))]
    let _ = title;
}

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::CString;

    pub fn set(title: &str) {
        let comm: String = title.chars().take(15).collect();
        if let Ok(comm) = CString::new(comm) {
            // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
            unsafe { libc::prctl(libc::PR_SET_NAME, comm.as_ptr()) };
        }
        let Some((start, end)) = std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|stat| argv_area(&stat))
        else {
            return;
        };
        let len = end - start;
        let n = title.len().min(len.saturating_sub(1));
        if len == 0 {
            return;
        }
        // SAFETY: [start, end) is where the kernel laid out this process's
        // argument strings, writable memory it owns for its whole life; the
        // runtime copied argv when it started, so only /proc readers see it.
        unsafe {
            let area = start as *mut u8;
            std::ptr::copy_nonoverlapping(title.as_ptr(), area, n);
            std::ptr::write_bytes(area.add(n), 0, len - n);
        }
    }

    /// `arg_start` and `arg_end`, fields 48 and 49 of `/proc/self/stat`
    /// (counted after the parenthesised name, which may hold spaces).
    pub(super) fn argv_area(stat: &str) -> Option<(usize, usize)> {
        let after_name = &stat[stat.rfind(')')? + 1..];
        let mut fields = after_name.split_whitespace().skip(48 - 3);
        let start: usize = fields.next()?.parse().ok()?;
        let end: usize = fields.next()?.parse().ok()?;
        (start != 0 && end > start).then_some((start, end))
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn the_argument_area_is_read_from_this_process_stat() {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let (start, end) = super::linux::argv_area(&stat).expect("arg_start, arg_end");
        let cmdline = std::fs::read("/proc/self/cmdline").unwrap();
        assert_eq!(end - start, cmdline.len());
        // A name with spaces and parentheses does not shift the fields.
        let tricky = stat.replacen('(', "(a) (b ", 1);
        assert_eq!(super::linux::argv_area(&tricky), Some((start, end)));
    }
}
