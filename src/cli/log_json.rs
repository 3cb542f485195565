//! `--log-format json`: every line the server writes is one JSON object,
//! `{"time", "level", "logger", "worker", "message", ...fields}`, with
//! `logger` `m0serve.error` for the server's own lines and `m0serve.access`
//! for the access log's. An access line in `--access-log-format json` keeps
//! its own fields (the level, logger and worker are added to its object).

use std::fmt::{self, Write as _};
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::{DefaultFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent};
use tracing_subscriber::registry::LookupSpan;

use crate::server::access_log::clf_time::rfc3339_micros;
use crate::server::access_log::format::json_string;

pub(super) struct JsonLines {
    pub(super) worker: Option<usize>,
}

/// The event's message and its other fields, JSON-encoded as they come.
#[derive(Default)]
pub(super) struct Fields {
    message: String,
    rest: String,
    /// The other fields as text, ` name=value` each.
    plain: String,
}

impl Fields {
    /// The message and its fields as one line of text.
    pub(super) fn text(self) -> String {
        self.message + &self.plain
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.plain, " {}={value}", field.name());
            self.rest.push(',');
            json_string(field.name().as_bytes(), &mut self.rest);
            self.rest.push(':');
            json_string(value.as_bytes(), &mut self.rest);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.record_str(field, &format!("{value:?}"));
    }
}

impl<S> FormatEvent<S, DefaultFields> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, DefaultFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut fields = Fields::default();
        event.record(&mut fields);
        writer.write_str(&line(
            *meta.level(),
            meta.target(),
            self.worker,
            &fields.message,
            &fields.rest,
        ))?;
        writer.write_char('\n')
    }
}

/// One line's object.
fn line(level: Level, target: &str, worker: Option<usize>, message: &str, rest: &str) -> String {
    let access = target == "m0serve::access";
    let mut out = String::from("{");
    if !(access && message.starts_with('{')) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let _ = write!(
            out,
            "\"time\":\"{}\",",
            rfc3339_micros(now.as_micros() as u64)
        );
    }
    let logger = if access {
        "m0serve.access"
    } else {
        "m0serve.error"
    };
    let _ = write!(out, "\"level\":\"{level}\",\"logger\":\"{logger}\"");
    if let Some(n) = worker {
        let _ = write!(out, ",\"worker\":{n}");
    }
    match message.strip_prefix('{').filter(|_| access) {
        // The access log's own object: its fields follow ours.
        Some(fields) => {
            out.push(',');
            out.push_str(fields);
        }
        None => {
            out.push_str(",\"message\":");
            json_string(message.as_bytes(), &mut out);
            out.push_str(rest);
            out.push('}');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_line_is_an_object_with_its_level_logger_worker_and_fields() {
        let l = line(
            Level::WARN,
            "m0serve::server",
            Some(2),
            "a \"quoted\" word",
            ",\"core\":\"1\"",
        );
        let (head, tail) = l.split_at(l.find("\"level\"").unwrap());
        assert!(
            head.starts_with("{\"time\":\"") && head.ends_with("Z\","),
            "{l}"
        );
        assert_eq!(
            tail,
            r#""level":"WARN","logger":"m0serve.error","worker":2,"message":"a \"quoted\" word","core":"1"}"#
        );
    }

    #[test]
    fn a_json_access_line_keeps_its_fields_and_a_text_one_is_its_message() {
        let l = line(
            Level::INFO,
            "m0serve::access",
            None,
            "{\"time\":\"t\",\"status\":200}",
            "",
        );
        assert_eq!(
            l,
            r#"{"level":"INFO","logger":"m0serve.access","time":"t","status":200}"#
        );
        let l = line(
            Level::INFO,
            "m0serve::access",
            Some(1),
            "127.0.0.1 - - GET / 200",
            "",
        );
        assert!(
            l.ends_with(
                r#""logger":"m0serve.access","worker":1,"message":"127.0.0.1 - - GET / 200"}"#
            ),
            "{l}"
        );
    }
}
