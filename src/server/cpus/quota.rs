//! The CPU quota of this process's cgroup: how much CPU time it may use, as a
//! count of CPUs (a pod limited to 2 CPUs on a 64-CPU node).
//!
//! The process's cgroup comes from `/proc/self/cgroup`; where its hierarchy
//! is mounted, from `/proc/self/mountinfo`. Both hierarchies are read: v2
//! (`0::/path`, `cpu.max`) and v1 (the line naming the `cpu` controller,
//! `cpu.cfs_quota_us` / `cpu.cfs_period_us`); a controller is attached to one
//! of them only, so at most one has limits. Every level from the process's
//! cgroup up to the mount's root counts: a parent's limit binds its children,
//! so the tightest wins. Levels above the mount (outside a cgroup namespace)
//! are not visible and not needed: the container's own limit is within.

use std::fmt;
use std::fs;
use std::path::{Component, Path, PathBuf};

/// A CPU limit found in a cgroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quota {
    /// `quota / period` rounded up, at least 1.
    pub cpus: usize,
    pub quota_us: u64,
    pub period_us: u64,
    /// `cpu.max` or `cpu.cfs_quota_us`.
    pub file: &'static str,
    /// The cgroup directory that sets it.
    pub dir: PathBuf,
}

impl fmt::Display for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cgroup {} {}/{} at {}",
            self.file,
            self.quota_us,
            self.period_us,
            self.dir.display()
        )
    }
}

/// What a scan found: the tightest quota, and the files it could not read
/// (each ignored, with why, for a log line).
#[derive(Debug, Default)]
pub struct Scan {
    pub quota: Option<Quota>,
    pub ignored: Vec<String>,
}

/// This process's quota, read from `/`.
pub fn read() -> Scan {
    if !cfg!(target_os = "linux") {
        return Scan::default();
    }
    let cgroup = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    scan(Path::new("/"), &cgroup, &mountinfo)
}

/// The quota for a process whose `/proc/self/cgroup` and
/// `/proc/self/mountinfo` read `cgroup` and `mountinfo`, with mount points
/// taken under `root` (`/` in production, a laid-out tree in tests).
pub fn scan(root: &Path, cgroup: &str, mountinfo: &str) -> Scan {
    let mut found = Scan::default();
    for (version, path) in memberships(cgroup) {
        let Some(mount) = mounts(mountinfo).find(|m| m.version == version) else {
            continue;
        };
        let Some(below) = relative(&mount.root, path) else {
            found.ignored.push(format!(
                "cgroup {path} is outside the {} mounted at {} ({}): its quota is not read",
                mount.version.name(),
                mount.point,
                mount.root
            ));
            continue;
        };
        let top = root.join(mount.point.trim_start_matches('/'));
        let mut dir = top.join(&below);
        loop {
            match version.limit(&dir) {
                Ok(Some(q)) if found.quota.as_ref().is_none_or(|f| tighter(&q, f)) => {
                    found.quota = Some(q)
                }
                Ok(_) => {}
                Err(why) => found.ignored.push(why),
            }
            if dir == top || !dir.pop() {
                break;
            }
        }
    }
    found
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

impl Version {
    fn name(self) -> &'static str {
        match self {
            Version::V1 => "cgroup v1 cpu controller",
            Version::V2 => "cgroup v2 hierarchy",
        }
    }

    /// The limit set in `dir`: `Ok(None)` for none (or no file: the root
    /// cgroup has none), `Err` for a file that does not parse.
    fn limit(self, dir: &Path) -> Result<Option<Quota>, String> {
        let (file, quota, period) = match self {
            Version::V2 => {
                let Some(text) = contents(&dir.join("cpu.max")) else {
                    return Ok(None);
                };
                let mut words = text.split_whitespace();
                let (q, p) = (words.next(), words.next().unwrap_or("100000"));
                if words.next().is_some() || q.is_none() {
                    return Err(garbage(dir, "cpu.max", &text));
                }
                ("cpu.max", q.unwrap_or_default().to_string(), p.to_string())
            }
            Version::V1 => {
                let Some(q) = contents(&dir.join("cpu.cfs_quota_us")) else {
                    return Ok(None);
                };
                let Some(p) = contents(&dir.join("cpu.cfs_period_us")) else {
                    return Ok(None);
                };
                (
                    "cpu.cfs_quota_us",
                    q.trim().to_string(),
                    p.trim().to_string(),
                )
            }
        };
        if quota == "max" || quota == "-1" {
            return Ok(None);
        }
        match (quota.parse::<u64>(), period.parse::<u64>()) {
            (Ok(q), Ok(p)) if q > 0 && p > 0 => Ok(Some(Quota {
                cpus: q.div_ceil(p).max(1).try_into().unwrap_or(usize::MAX),
                quota_us: q,
                period_us: p,
                file,
                dir: dir.to_path_buf(),
            })),
            _ => Err(garbage(dir, file, &format!("{quota} {period}"))),
        }
    }
}

fn contents(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok()
}

fn garbage(dir: &Path, file: &str, text: &str) -> String {
    format!(
        "{}: unreadable limit {:?}, ignored",
        dir.join(file).display(),
        text.trim()
    )
}

/// Whether `a` allows less CPU time than `b` (compared exactly, not rounded).
fn tighter(a: &Quota, b: &Quota) -> bool {
    u128::from(a.quota_us) * u128::from(b.period_us)
        < u128::from(b.quota_us) * u128::from(a.period_us)
}

/// The hierarchies `/proc/self/cgroup` places the process in, with its path
/// in each: `0::/path` (v2), `N:cpu,cpuacct:/path` (v1 with `cpu`).
fn memberships(cgroup: &str) -> impl Iterator<Item = (Version, &str)> {
    cgroup.lines().filter_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (id, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        if id == "0" && controllers.is_empty() {
            Some((Version::V2, path))
        } else if controllers.split(',').any(|c| c == "cpu") {
            Some((Version::V1, path))
        } else {
            None
        }
    })
}

struct Mount {
    version: Version,
    /// The cgroup the mount shows at its point (not `/` outside a namespace).
    root: String,
    point: String,
}

/// The cgroup mounts in `/proc/self/mountinfo`: `ID PARENT MAJ:MIN ROOT POINT
/// OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS`.
fn mounts(mountinfo: &str) -> impl Iterator<Item = Mount> + '_ {
    mountinfo.lines().filter_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        let mut fields = before.split(' ');
        let (root, point) = (fields.nth(3)?, fields.next()?);
        let mut after = after.split(' ');
        let (fstype, superopts) = (after.next()?, after.nth(1).unwrap_or(""));
        let version = match fstype {
            "cgroup2" => Version::V2,
            "cgroup" if superopts.split(',').any(|o| o == "cpu") => Version::V1,
            _ => return None,
        };
        Some(Mount {
            version,
            root: unescape(root),
            point: unescape(point),
        })
    })
}

/// `path` below the mount's `root`, or `None` where it is not below it.
fn relative(root: &str, path: &str) -> Option<PathBuf> {
    let below = Path::new(path).strip_prefix(root).ok()?;
    // `..` would climb out of the mount (a cgroup outside a namespace's root).
    below
        .components()
        .all(|c| matches!(c, Component::Normal(_)))
        .then(|| below.to_path_buf())
}

/// mountinfo writes space, tab, newline and backslash as `\ooo` octal.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match octal {
            Some(d) => {
                out.push(d.iter().fold(0u8, |n, b| n.wrapping_mul(8) + (b - b'0')));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
#[path = "quota_tests.rs"]
mod tests;
