//! Settings from files: `--config` (a TOML file of flags, [`config_file`]),
//! `--env-file` (the application's environment), and `--print-config`,
//! which shows the merged result and where each value came from.
//!
//! Precedence, highest first: the command line (and the Python API's
//! keywords, which become flags), the `M0SERVE_*` variables, the config
//! file, the defaults.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::PathBuf;

use clap::builder::FalseyValueParser;
use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, Command, CommandFactory};

use super::config_file::{self, Entry};
use super::{clap_error, flags, Args, CliError};

#[derive(clap::Args, Debug)]
pub(super) struct FileArgs {
    /// Read settings from this TOML file (every long flag's name is a key; a pyproject.toml is read from its [tool.m0serve]); the command line and the M0SERVE_* variables win over it.
    #[arg(long, env = "M0SERVE_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,

    /// Print every setting with where it came from (the command line, a variable, the config file, the default), and exit.
    #[arg(long, env = "M0SERVE_PRINT_CONFIG", value_parser = FalseyValueParser::new(), action = ArgAction::Set,
          num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true")]
    pub(super) print_config: bool,

    /// Set the application's environment from this dotenv file (repeatable), in each worker before APP is imported; a variable already set is never overridden.
    #[arg(long = "env-file", env = "M0SERVE_ENV_FILE", value_name = "FILE")]
    env_files: Vec<PathBuf>,
}

impl FileArgs {
    /// The variables of the `--env-file`s, in order (a later file's value
    /// for a name the earlier ones set is ignored, as the environment's
    /// own are); a file that cannot be read or parsed is a usage error.
    pub(super) fn env(&self) -> Result<Vec<(String, String)>, CliError> {
        let mut vars: Vec<(String, String)> = Vec::new();
        for path in &self.env_files {
            let refuse = |e: &dyn std::fmt::Display| {
                CliError::Usage(format!("--env-file {}: {e}", path.display()))
            };
            for item in dotenvy::from_path_iter(path).map_err(|e| refuse(&e))? {
                let (name, value) = item.map_err(|e| refuse(&e))?;
                if !vars.iter().any(|(n, _)| *n == name) {
                    vars.push((name, value));
                }
            }
        }
        Ok(vars)
    }
}

/// The command line `args` parsed with the config file's settings below it:
/// the matches, and the settings the file gave.
pub(super) fn matches(args: Vec<OsString>) -> Result<(ArgMatches, Vec<Entry>), CliError> {
    let first = Args::command()
        .try_get_matches_from(&args)
        .map_err(clap_error)?;
    let Some(path) = first.get_one::<PathBuf>("config") else {
        return Ok((first, Vec::new()));
    };
    let command = Args::command();
    let entries: Vec<Entry> = config_file::read(path, &flags())
        .map_err(CliError::Usage)?
        .into_iter()
        .filter(|entry| unset(&first, &command, &entry.flag))
        .collect();
    // Before the command line's own, so a pair such as --ws/--no-ws (the
    // last wins) still lets the command line win.
    let mut merged = vec![args[0].clone()];
    merged.extend(entries.iter().flat_map(|e| e.args.iter().cloned()));
    merged.extend(args.into_iter().skip(1));
    match Args::command().try_get_matches_from(&merged) {
        Ok(matches) => Ok((matches, entries)),
        Err(e) => Err(blame(&entries).unwrap_or_else(|| clap_error(e))),
    }
}

/// Whether the command line and the variables left the setting `flag` (a
/// long flag, or `app`) at its default.
fn unset(matches: &ArgMatches, command: &Command, flag: &str) -> bool {
    let id = if flag == "app" {
        Some("app".to_string())
    } else {
        command
            .get_arguments()
            .find(|a| a.get_long() == Some(flag))
            .map(|a| a.get_id().to_string())
    };
    id.is_none_or(|id| {
        matches!(
            matches.value_source(&id),
            None | Some(ValueSource::DefaultValue)
        )
    })
}

/// The first of the file's settings the command line refuses on its own,
/// as one line naming the file, line and key.
fn blame(entries: &[Entry]) -> Option<CliError> {
    entries.iter().find_map(|entry| {
        let mut alone = vec![OsString::from("m0serve")];
        alone.extend(entry.args.iter().cloned());
        let e = Args::command().try_get_matches_from(alone).err()?;
        let CliError::Usage(message) = clap_error(e) else {
            return None;
        };
        Some(CliError::Usage(format!(
            "{}: {}: {message}",
            entry.at, entry.flag
        )))
    })
}

/// Every setting with a value, as `name = value  # source`, for `--print-config`.
pub(super) fn describe(matches: &ArgMatches, from_file: &[Entry]) -> String {
    let mut out = String::from("# m0serve's settings, each with where it came from\n");
    let command = Args::command();
    for arg in command.get_arguments() {
        let id = arg.get_id().as_str();
        let Some(source) = matches.value_source(id) else {
            continue;
        };
        let Some(raw) = matches.get_raw(id) else {
            continue;
        };
        let values: Vec<String> = raw.map(|v| format!("{:?}", v.to_string_lossy())).collect();
        let name = arg.get_long().unwrap_or(id);
        let value = match values.as_slice() {
            [one]
                if arg.get_action().takes_values()
                    && !matches!(arg.get_action(), ArgAction::Append) =>
            {
                one.clone()
            }
            many => format!("[{}]", many.join(", ")),
        };
        let origin = match source {
            ValueSource::DefaultValue => "default".to_string(),
            ValueSource::EnvVariable => arg.get_env().map_or("the environment".into(), |e| {
                e.to_string_lossy().into_owned()
            }),
            _ => from_file
                .iter()
                .find(|e| e.flag == name)
                .map_or("command line".into(), |e| e.at.clone()),
        };
        let _ = writeln!(out, "{} = {value}  # {origin}", name.replace('-', "_"));
    }
    out
}
