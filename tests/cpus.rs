//! The default core count under a real cgroup CPU quota (issue 9, point 4):
//! the binary, started inside a child cgroup limited to half a CPU, says it
//! runs one core thread and names the quota. Laid-out cgroup trees are the
//! unit tests' (src/server/cpus/quota_tests.rs); this one needs a machine
//! that lets it create a cgroup (root, a writable cpu controller) and at
//! least two CPUs (else a quota and the mask give the same count), and says
//! why it skips where it cannot.

#![cfg(target_os = "linux")]

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const START_TIMEOUT: Duration = Duration::from_secs(10);

/// A cgroup this test made, and the server in it: killed, then removed.
struct Cgroup {
    dir: PathBuf,
    child: Option<Child>,
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        // An exited process leaves its cgroup shortly after it is reaped.
        let deadline = Instant::now() + Duration::from_secs(2);
        while fs::remove_dir(&self.dir).is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if self.dir.exists() {
            eprintln!("could not remove {}", self.dir.display());
        }
    }
}

/// Where this process's cpu controller is, and which quota file it takes:
/// v1 (`N:...cpu...:/path` under a `cgroup` mount with `cpu`) or v2
/// (`0::/path` under the `cgroup2` mount, the cpu controller available).
fn cpu_hierarchy() -> Result<(PathBuf, bool), String> {
    let cgroup = fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
    let mount = |v1: bool| {
        mountinfo.lines().find_map(|l| {
            let (before, after) = l.split_once(" - ")?;
            let f: Vec<&str> = before.split(' ').collect();
            let a: Vec<&str> = after.split(' ').collect();
            let cpu = a.get(2)?.split(',').any(|o| o == "cpu");
            let fits = if v1 {
                a[0] == "cgroup" && cpu
            } else {
                a[0] == "cgroup2"
            };
            // A mount of a sub-tree (a container's) is not where our path is.
            (fits && f[3] == "/").then(|| PathBuf::from(f[4]))
        })
    };
    for line in cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (id, controllers, path) = (parts.next(), parts.next(), parts.next());
        let (Some(id), Some(controllers), Some(path)) = (id, controllers, path) else {
            continue;
        };
        let v1 = controllers.split(',').any(|c| c == "cpu");
        let v2 = id == "0" && controllers.is_empty();
        if !v1 && !v2 {
            continue;
        }
        let Some(root) = mount(v1) else { continue };
        let dir = root.join(path.trim_start_matches('/'));
        if v1 {
            return Ok((dir, true));
        }
        let controllers = fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
        if controllers.split_whitespace().any(|c| c == "cpu") {
            return Ok((dir, false));
        }
    }
    Err("no cgroup hierarchy with the cpu controller".into())
}

/// Make a child cgroup of `parent` limited to half a CPU.
fn limited_child(parent: &Path, v1: bool) -> Result<Cgroup, String> {
    let dir = parent.join(format!("m0serve-test-{}", std::process::id()));
    fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
    let cg = Cgroup { dir, child: None };
    let write = |file: &str, text: &str| {
        fs::write(cg.dir.join(file), text).map_err(|e| format!("writing {file}: {e}"))
    };
    if v1 {
        write("cpu.cfs_period_us", "100000")?;
        write("cpu.cfs_quota_us", "50000")?;
    } else {
        if !cg.dir.join("cpu.max").exists() {
            // The parent must hand the controller down (refused, EBUSY, where
            // the parent holds processes itself and is not the root).
            fs::write(parent.join("cgroup.subtree_control"), "+cpu")
                .map_err(|e| format!("enabling cpu in {}: {e}", parent.display()))?;
        }
        write("cpu.max", "50000 100000")?;
    }
    Ok(cg)
}

#[test]
fn under_a_real_quota_of_half_a_cpu_the_default_is_one_core_thread() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: creating a cgroup needs root");
        return;
    }
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("skipped: on one CPU a quota of one and the mask agree");
        return;
    }
    let (parent, v1) = match cpu_hierarchy() {
        Ok(h) => h,
        Err(why) => return eprintln!("skipped: {why}"),
    };
    let mut cg = match limited_child(&parent, v1) {
        Ok(cg) => cg,
        Err(why) => return eprintln!("skipped: no cgroup of our own: {why}"),
    };
    let file = if v1 { "cpu.cfs_quota_us" } else { "cpu.max" };

    // The shell moves itself into the cgroup, then becomes the server.
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(r#"echo $$ > "$0/cgroup.procs" && exec "$@""#)
        .arg(&cg.dir)
        .arg(env!("CARGO_BIN_EXE_m0serve"))
        .args(["--port", "0"]);
    for (k, _) in std::env::vars() {
        if k.starts_with("M0SERVE_") || k.starts_with("M0_") || k == "RUST_LOG" {
            cmd.env_remove(k);
        }
    }
    cmd.env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let child = cg.child.insert(cmd.spawn().expect("spawn sh"));
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + START_TIMEOUT;
    let mut lines = Vec::new();
    while !lines.iter().any(|l: &String| l.contains("listening on ")) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => lines.push(line),
            Err(_) => panic!("no listening line within {START_TIMEOUT:?}: {lines:#?}"),
        }
    }
    let want = format!(
        "1 core thread (1 CPU: cgroup {file} 50000/100000 at {}), not pinned",
        cg.dir.display()
    );
    assert!(
        lines.iter().any(|l| l.contains(&want)),
        "want {want:?} in {lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("(uring backend, 1 cores)")
                || l.contains("(portable backend, 1 cores)")),
        "{lines:#?}"
    );
}
