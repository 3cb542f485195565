//! The log line format: tracing-subscriber's default, after `worker=N ` in a
//! worker process, so the lines of a supervisor's workers, which share one
//! stderr, say which worker wrote them.

use std::fmt;

use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{DefaultFields, Format, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent};
use tracing_subscriber::registry::LookupSpan;

pub(super) struct Prefixed {
    worker: Option<usize>,
    inner: Format,
}

impl Prefixed {
    pub(super) fn new(worker: Option<usize>) -> Self {
        Prefixed {
            worker,
            inner: Format::default(),
        }
    }
}

impl<S> FormatEvent<S, DefaultFields> for Prefixed
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, DefaultFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        if let Some(n) = self.worker {
            write!(writer, "worker={n} ")?;
        }
        FormatEvent::<S, DefaultFields>::format_event(&self.inner, ctx, writer, event)
    }
}
