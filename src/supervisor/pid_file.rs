//! `--pid-file`: the supervisor's pid, written at start and removed at exit.

use std::io;
use std::path::{Path, PathBuf};

/// The written file; dropping it removes it.
pub struct PidFile(PathBuf);

impl PidFile {
    pub fn write(path: &Path) -> io::Result<PidFile> {
        std::fs::write(path, format!("{}\n", std::process::id())).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("writing the pid file {}: {e}", path.display()),
            )
        })?;
        Ok(PidFile(path.to_path_buf()))
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_file(&self.0) {
            tracing::warn!("removing the pid file {}: {e}", self.0.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_holds_this_pid_until_dropped() {
        let path = std::env::temp_dir().join(format!("m0serve-{}.pid", std::process::id()));
        let file = PidFile::write(&path).unwrap();
        let pid = std::fs::read_to_string(&path).unwrap();
        assert_eq!(pid, format!("{}\n", std::process::id()));
        drop(file);
        assert!(!path.exists());
    }
}
