//! Which changed files `--reload` acts on: under one of the watched
//! directories, matching `--reload-include` (`*.py` always, unless
//! excluded) and no `--reload-exclude`, and not inside `__pycache__`,
//! `.git` or a virtualenv (a directory holding `pyvenv.cfg`). A glob is
//! matched against the file's name and its path from the watched
//! directory; an exclude also against each directory on the way.

use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};

/// Watched whatever `--reload-include` adds.
pub const DEFAULT_INCLUDE: &str = "*.py";
/// Directories never looked into: bytecode caches and version control.
const IGNORED_DIRS: [&str; 2] = ["__pycache__", ".git"];

pub struct Filter {
    roots: Vec<PathBuf>,
    include: GlobSet,
    exclude: GlobSet,
}

impl Filter {
    /// `roots`: the watched directories, as the watcher reports paths under them.
    pub fn new(
        roots: Vec<PathBuf>,
        include: &[String],
        exclude: &[String],
    ) -> Result<Filter, String> {
        let mut includes = vec![DEFAULT_INCLUDE.to_string()];
        includes.extend(include.iter().cloned());
        Ok(Filter {
            roots,
            include: globs("--reload-include", &includes)?,
            exclude: globs("--reload-exclude", exclude)?,
        })
    }

    /// Whether a change to `path` calls for a reload.
    pub fn matches(&self, path: &Path) -> bool {
        let Some(root) = self
            .roots
            .iter()
            .filter(|r| path.starts_with(r))
            .max_by_key(|r| r.as_os_str().len())
        else {
            return false;
        };
        let Ok(relative) = path.strip_prefix(root) else {
            return false;
        };
        let Some(name) = relative.file_name() else {
            return false;
        };
        let mut dir = root.clone();
        for part in relative.parent().into_iter().flat_map(Path::iter) {
            dir.push(part);
            if IGNORED_DIRS.iter().any(|d| part == *d)
                || self.exclude.is_match(part)
                || dir.join("pyvenv.cfg").exists()
            {
                return false;
            }
        }
        if self.exclude.is_match(name) || self.exclude.is_match(relative) {
            return false;
        }
        self.include.is_match(name) || self.include.is_match(relative)
    }
}

fn globs(flag: &str, patterns: &[String]) -> Result<GlobSet, String> {
    let mut set = GlobSetBuilder::new();
    for pattern in patterns {
        set.add(Glob::new(pattern).map_err(|e| format!("{flag} {pattern}: {e}"))?);
    }
    set.build().map_err(|e| format!("{flag}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(root: &Path, include: &[&str], exclude: &[&str]) -> Filter {
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        Filter::new(
            vec![root.to_path_buf()],
            &strings(include),
            &strings(exclude),
        )
        .unwrap()
    }

    #[test]
    fn python_files_count_and_caches_git_and_virtualenvs_do_not() {
        let root = std::env::temp_dir().join(format!("m0-watch-filter-{}", std::process::id()));
        std::fs::create_dir_all(root.join("venv/lib")).unwrap();
        std::fs::write(root.join("venv/pyvenv.cfg"), "home = /usr\n").unwrap();
        let f = filter(&root, &[], &[]);
        assert!(f.matches(&root.join("app.py")));
        assert!(f.matches(&root.join("pkg/views.py")));
        assert!(!f.matches(&root.join("notes.txt")));
        assert!(!f.matches(&root.join("pkg/__pycache__/views.cpython-313.pyc")));
        assert!(!f.matches(&root.join("__pycache__/x.py")));
        assert!(!f.matches(&root.join(".git/hooks/pre-commit.py")));
        assert!(!f.matches(&root.join("venv/lib/site.py")));
        assert!(!f.matches(Path::new("/elsewhere/app.py")));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn includes_add_to_python_files_and_excludes_win() {
        let root = Path::new("/srv/app");
        let f = filter(
            root,
            &["*.html", "conf/*.toml"],
            &["test_*.py", "node_modules"],
        );
        assert!(f.matches(&root.join("templates/index.html")));
        assert!(f.matches(&root.join("conf/app.toml")));
        assert!(f.matches(&root.join("app.py")));
        assert!(!f.matches(&root.join("tests/test_app.py")));
        assert!(!f.matches(&root.join("node_modules/x/index.html")));
        let no_python = filter(root, &["*.html"], &["*.py"]);
        assert!(!no_python.matches(&root.join("app.py")));
        assert!(no_python.matches(&root.join("index.html")));
        assert!(Filter::new(vec![], &["a[".into()], &[]).is_err());
    }
}
