//! One direction of dependency, kept: every `crate::` path in a module of
//! `src/` names a module of a lower layer, never its own layer's sibling or
//! one above it, and Python (`pyo3`) appears only in the layers that run
//! it. The layers are those of `src/lib.rs`'s doc; this table is their rule.
//! The environment is read in two places only: the command line (`cli`) and
//! the mechanism knobs (`tuning`); everything else is handed what it needs.
//! (The protocol, ring and pool crates are kept apart by cargo itself.)

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Each top-level module of `src/` and its layer: a module may use only
/// modules of a lower number.
const LAYERS: &[(&str, i32)] = &[
    ("python", 10), // the extension module: the console script's entry
    ("cli", 9),     // flags and variables, and which process this is
    ("supervisor", 8),
    ("asgi", 7), // the application interfaces, side by side
    ("wsgi", 7),
    ("server", 6), // the process's cores, and the session gluing protocol to app
    ("app", 5),    // what an application is handed, and hands back
    ("routes", 4), // the Rust-native routes
    ("tls", 3),
    ("reply", 3),
    ("metrics", 2),
    ("backend", 1), // the I/O loops
    ("ipc", 0),     // memory shared between processes
    ("tuning", 0),  // the M0_* knobs, read once
    ("http", -1),   // the sans-IO protocols (m0serve-proto, re-exported)
    ("ws", -1),
    ("h2", -1),
];

/// The layers where Python may be named: the interfaces and their entry,
/// and `app`'s helpers that both interfaces share.
const PYTHON: &[&str] = &["python", "asgi", "wsgi", "app"];

/// The modules that may read the environment.
const ENVIRONMENT: &[&str] = &["cli", "tuning"];

fn layer(module: &str) -> Option<i32> {
    LAYERS
        .iter()
        .find(|(name, _)| *name == module)
        .map(|&(_, n)| n)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file without its comments (doc links may point anywhere).
fn code(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every module named as `crate::NAME` or inside `crate::{...}`.
fn crate_paths(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // The items at the group's own depth, each named by its first word.
            let mut items = vec![String::new()];
            let mut depth = 0;
            for c in group.chars() {
                match c {
                    '}' if depth == 0 => break,
                    ',' if depth == 0 => items.push(String::new()),
                    _ => {
                        depth += usize::from(c == '{');
                        depth -= usize::from(c == '}');
                        items.last_mut().unwrap().push(c);
                    }
                }
            }
            found.extend(items.iter().map(|item| first_word(item.trim())));
        } else {
            found.push(first_word(rest));
        }
    }
    found.retain(|name| !name.is_empty());
    found
}

fn first_word(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// The top-level module a file of `src/` belongs to.
fn module_of(src: &Path, file: &Path) -> String {
    let first = file.strip_prefix(src).unwrap().components().next().unwrap();
    let name = first.as_os_str().to_string_lossy();
    name.trim_end_matches(".rs").to_string()
}

/// (file, what it names) for every use that breaks the rule.
fn violations(src: &Path) -> Vec<(String, String)> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut bad = Vec::new();
    for file in files {
        let module = module_of(src, &file);
        let Some(own) = layer(&module) else {
            if !matches!(module.as_str(), "lib" | "main") {
                bad.push((file.display().to_string(), "a module with no layer".into()));
            }
            continue;
        };
        let code = code(&fs::read_to_string(&file).unwrap());
        for named in crate_paths(&code) {
            if named == module || named == "self" || named == "ALLOCATOR" {
                continue;
            }
            match layer(&named) {
                Some(theirs) if theirs < own => {}
                _ => bad.push((file.display().to_string(), format!("crate::{named}"))),
            }
        }
        if code.contains("pyo3") && !PYTHON.contains(&module.as_str()) {
            bad.push((file.display().to_string(), "pyo3".into()));
        }
        let reads_env = ["env::var", "env::remove_var", "env::set_var"]
            .iter()
            .any(|read| code.contains(read));
        if reads_env && !ENVIRONMENT.contains(&module.as_str()) {
            bad.push((file.display().to_string(), "the environment".into()));
        }
    }
    bad
}

#[test]
fn every_module_uses_only_layers_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let bad = violations(&src);
    let listed: BTreeMap<_, _> = bad.iter().cloned().collect();
    assert!(bad.is_empty(), "uses against the layers: {listed:#?}");
}

#[test]
fn the_rule_catches_an_upward_use_a_sibling_and_python_below() {
    let dir = std::env::temp_dir().join(format!("m0-layers-{}", std::process::id()));
    let write = |path: &str, text: &str| {
        let path = dir.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    };
    write(
        "backend/mod.rs",
        "use crate::server::Options; // crate::cli in a comment\n",
    );
    write("wsgi/mod.rs", "use crate::{app::X, asgi::Y};\n");
    write("tls/mod.rs", "use pyo3::prelude::*;\n");
    write(
        "server/mod.rs",
        "use crate::{app, backend::{Peer, Kind}, ipc::tally::{self, Tally}};\n",
    );
    write(
        "backend/knob.rs",
        "let on = std::env::var_os(\"M0_X\").is_some();\n",
    );
    write("cli/mod.rs", "let level = std::env::var(\"RUST_LOG\");\n");
    let mut bad = violations(&dir);
    bad.sort();
    fs::remove_dir_all(&dir).unwrap();
    let named: Vec<&str> = bad.iter().map(|(_, what)| what.as_str()).collect();
    assert_eq!(
        named,
        ["the environment", "crate::server", "pyo3", "crate::asgi"],
        "{bad:?}"
    );
}
