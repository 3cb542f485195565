//! `--config FILE`: the command line's settings in a TOML file, below the
//! command line and the `M0SERVE_*` variables and above the defaults.
//!
//! Every long flag's name is a key, with dashes or underscores (`port`,
//! `keep-alive-timeout`, `keep_alive_timeout`); a repeatable flag takes an
//! array (`header = ["X-A: 1", "X-B: 2"]`), a switch `true` or `false`, and
//! `app` names the application. A file named `pyproject.toml` is read from
//! its `[tool.m0serve]` table. The file is turned into flags: what the
//! command line and the variables left at their defaults is added to the
//! command line, so one parser checks every value, and a value it refuses
//! is reported with the file, line and key. Each worker reads the file
//! again at its start, so a SIGHUP roll serves what it says then.

use std::ffi::OsString;
use std::path::Path;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::FlagKind;

/// One setting of the file: the flag it stands for, and where it was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The long flag, without dashes (`keep-alive-timeout`), or `app`.
    pub flag: String,
    /// The arguments it adds to a command line (`--port=8000`, or the
    /// application's name alone).
    pub args: Vec<OsString>,
    /// `FILE:LINE`, for messages and `--print-config`.
    pub at: String,
}

/// The settings of `path`, each checked against `flags` (the command line's
/// long flags and how each takes its value). An error is one line naming
/// the file, the line and the key.
pub fn read(path: &Path, flags: &[(String, FlagKind)]) -> Result<Vec<Entry>, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("--config {shown}: {e}"))?;
    let line = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
    let doc = DeTable::parse(&text).map_err(|e| {
        let at = e
            .span()
            .map_or(String::new(), |s| format!(":{}", line(s.start)));
        format!("{shown}{at}: {}", e.message().trim_end())
    })?;
    let table = if path.file_name().is_some_and(|n| n == "pyproject.toml") {
        match tool_table(doc.get_ref()) {
            Some(table) => table,
            None => return Ok(Vec::new()),
        }
    } else {
        doc.get_ref()
    };
    let mut entries = Vec::new();
    for (key, value) in table {
        let at = format!("{shown}:{}", line(key.span().start));
        let name = key.get_ref().replace('_', "-");
        let refuse = |why: String| format!("{at}: {}: {why}", key.get_ref());
        if name == "app" {
            let app = value
                .get_ref()
                .as_str()
                .ok_or_else(|| refuse("must be a string".into()))?;
            entries.push(Entry {
                flag: name,
                args: vec![app.into()],
                at,
            });
            continue;
        }
        if matches!(name.as_str(), "config" | "print-config") {
            return Err(refuse("is a command-line flag only".into()));
        }
        let Some((_, kind)) = flags.iter().find(|(flag, _)| *flag == name) else {
            return Err(refuse(
                "not a setting (a long flag's name, e.g. port)".into(),
            ));
        };
        let args = flag_args(&name, *kind, value).map_err(refuse)?;
        entries.push(Entry {
            flag: name,
            args,
            at,
        });
    }
    Ok(entries)
}

/// `[tool.m0serve]` of a pyproject.toml, if it has one.
fn tool_table<'a, 'i>(doc: &'a DeTable<'i>) -> Option<&'a DeTable<'i>> {
    let find = |table: &'a DeTable<'i>, name: &str| {
        table
            .iter()
            .find(|(k, _)| k.get_ref() == name)
            .and_then(|(_, v)| v.get_ref().as_table())
    };
    find(find(doc, "tool")?, "m0serve")
}

/// The arguments `--name` of `kind` takes for `value`.
fn flag_args(
    name: &str,
    kind: FlagKind,
    value: &Spanned<DeValue<'_>>,
) -> Result<Vec<OsString>, String> {
    let value = value.get_ref();
    let with = |text: String| OsString::from(format!("--{name}={text}"));
    match kind {
        FlagKind::Switch => match value.as_bool() {
            Some(true) => Ok(vec![format!("--{name}").into()]),
            Some(false) => Ok(Vec::new()),
            None => Err("must be true or false".into()),
        },
        FlagKind::Toggle => match value.as_bool() {
            Some(on) => Ok(vec![with(on.to_string())]),
            None => scalar(value).map(|v| vec![with(v)]),
        },
        FlagKind::Value => scalar(value).map(|v| vec![with(v)]),
        FlagKind::List => match value.as_array() {
            Some(items) => items
                .into_iter()
                .map(|item| scalar(item.get_ref()).map(with))
                .collect(),
            None => scalar(value).map(|v| vec![with(v)]),
        },
    }
}

/// A string, number or boolean as the command line would spell it.
fn scalar(value: &DeValue<'_>) -> Result<String, String> {
    if let Some(s) = value.as_str() {
        return Ok(s.to_string());
    }
    if let Some(i) = value.as_integer() {
        return Ok(i.as_str().replace('_', ""));
    }
    if let Some(f) = value.as_float() {
        return Ok(f.as_str().replace('_', ""));
    }
    if let Some(b) = value.as_bool() {
        return Ok(b.to_string());
    }
    Err(format!("a {} is not a value here", value.type_str()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn flags() -> Vec<(String, FlagKind)> {
        [
            ("port", FlagKind::Value),
            ("header", FlagKind::List),
            ("no-ws", FlagKind::Switch),
            ("access-log", FlagKind::Toggle),
            ("graceful-timeout", FlagKind::Value),
        ]
        .into_iter()
        .map(|(n, k)| (n.to_string(), k))
        .collect()
    }

    fn file(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("m0-config-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn args(entries: &[Entry]) -> Vec<String> {
        entries
            .iter()
            .flat_map(|e| e.args.iter().map(|a| a.to_string_lossy().into_owned()))
            .collect()
    }

    #[test]
    fn each_kind_of_flag_becomes_its_arguments() {
        let path = file(
            "m0.toml",
            "app = 'main:app'\nport = 9000\nheader = ['X-A: 1', 'X-B: 2']\nno_ws = true\naccess-log = false\ngraceful_timeout = 2.5\n",
        );
        let entries = read(&path, &flags()).unwrap();
        let mut got = args(&entries);
        got.sort();
        assert_eq!(
            got,
            [
                "--access-log=false",
                "--graceful-timeout=2.5",
                "--header=X-A: 1",
                "--header=X-B: 2",
                "--no-ws",
                "--port=9000",
                "main:app"
            ]
        );
        let port = entries.iter().find(|e| e.flag == "port").unwrap();
        assert_eq!(port.at, format!("{}:2", path.display()));
    }

    #[test]
    fn a_pyproject_is_read_from_its_tool_table() {
        let path = file(
            "pyproject.toml",
            "[project]\nname = 'x'\n\n[tool.m0serve]\nport = 8080\n",
        );
        assert_eq!(args(&read(&path, &flags()).unwrap()), ["--port=8080"]);
        let bare = file("pyproject.toml", "[project]\nname = 'x'\n");
        assert!(read(&bare, &flags()).unwrap().is_empty());
    }

    #[test]
    fn a_bad_file_or_key_is_one_line_with_its_file_and_line() {
        let path = file("bad.toml", "port = 1\nprot = 2\n");
        let e = read(&path, &flags()).unwrap_err();
        assert_eq!(
            e,
            format!(
                "{}:2: prot: not a setting (a long flag's name, e.g. port)",
                path.display()
            )
        );
        let path = file("syntax.toml", "port = 1\nport = = 2\n");
        let e = read(&path, &flags()).unwrap_err();
        assert!(e.starts_with(&format!("{}:2: ", path.display())), "{e}");
        assert!(!e.contains('\n'), "{e}");
        let path = file("kind.toml", "no-ws = 'yes'\n");
        let e = read(&path, &flags()).unwrap_err();
        assert!(e.ends_with(":1: no-ws: must be true or false"), "{e}");
    }
}
