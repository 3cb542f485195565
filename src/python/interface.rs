//! Which interface a loaded application speaks: what `--interface` forces,
//! or what `m0serve._interface.detect` finds from the object (`auto`).

use pyo3::prelude::*;

use crate::app::spec::Interface;
use crate::asgi::AsgiVersion;

/// The interface an application is served through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Served {
    Wsgi,
    Asgi(AsgiVersion),
}

impl Served {
    /// As the startup log names it.
    pub fn name(self) -> &'static str {
        match self {
            Served::Wsgi => "WSGI",
            Served::Asgi(AsgiVersion::Three) => "ASGI 3",
            Served::Asgi(AsgiVersion::Two) => "ASGI 2",
        }
    }
}

/// The interface `app` is served through, and why, in words for the log.
/// Nothing here calls the application.
pub fn resolve(
    py: Python<'_>,
    forced: Interface,
    app: &Bound<'_, PyAny>,
) -> PyResult<(Served, String)> {
    let (found, why) = match forced {
        Interface::Wsgi => return Ok((Served::Wsgi, "--interface wsgi".into())),
        Interface::Asgi2 => {
            return Ok((Served::Asgi(AsgiVersion::Two), "--interface asgi2".into()));
        }
        Interface::Auto | Interface::Asgi => detect(py, app)?,
    };
    Ok(match forced {
        // Told ASGI: only the version is looked for.
        Interface::Asgi => match found {
            Served::Asgi(AsgiVersion::Two) => (found, format!("--interface asgi; {why}")),
            _ => (Served::Asgi(AsgiVersion::Three), "--interface asgi".into()),
        },
        _ => (found, why),
    })
}

fn detect(py: Python<'_>, app: &Bound<'_, PyAny>) -> PyResult<(Served, String)> {
    let (kind, why): (String, String) = py
        .import("m0serve._interface")?
        .call_method1("detect", (app,))?
        .extract()?;
    let served = match kind.as_str() {
        "asgi3" => Served::Asgi(AsgiVersion::Three),
        "asgi2" => Served::Asgi(AsgiVersion::Two),
        _ => Served::Wsgi,
    };
    Ok((served, why))
}
