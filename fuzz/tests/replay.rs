//! Every file of `corpus/<target>/` and `regressions/<target>/` through its
//! target's property check, without AFL: the seeds keep passing, and an input
//! that once crashed or hung a fuzzer stays fixed.

use std::path::Path;
use std::time::{Duration, Instant};

/// Far more than any input needs: a hang AFL found shows up as a failure here.
const SLOW: Duration = Duration::from_secs(2);

#[test]
fn corpus_and_regressions_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (mut replayed, mut failed) = (0, Vec::new());
    for (name, check) in m0serve_fuzz::TARGETS {
        for folder in ["corpus", "regressions"] {
            let dir = root.join(folder).join(name);
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries {
                let path = entry.unwrap().path();
                if !path.is_file() || path.file_name().is_some_and(|n| n == "README.md") {
                    continue;
                }
                let data = std::fs::read(&path).unwrap();
                let started = Instant::now();
                match std::panic::catch_unwind(|| check(&data)) {
                    Err(_) => failed.push(path.display().to_string()),
                    Ok(()) if started.elapsed() > SLOW => {
                        failed.push(format!("{} (too slow)", path.display()))
                    }
                    Ok(()) => {}
                }
                replayed += 1;
            }
        }
    }
    println!("{replayed} inputs replayed");
    assert!(failed.is_empty(), "failed (panics above): {failed:#?}");
    // Each target has seeds: an empty or misnamed corpus must not pass silently.
    assert!(
        replayed >= m0serve_fuzz::TARGETS.len() * 3,
        "only {replayed} inputs replayed"
    );
}
