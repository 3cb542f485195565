//! The Prometheus text exposition format (version 0.0.4) of the workers'
//! [`Totals`] and the supervisor's own figures.
//!
//! Hand-encoded rather than through the `prometheus-client` crate: its
//! registry owns its counters (`Arc`s in this process), while ours live in
//! the shared page the workers write, so the crate would only have
//! re-encoded numbers we already hold; the format is a few lines of text.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::counters::{AppFigures, Totals, BUCKETS, CAUSES, CLASSES, EXECUTOR, METHODS, POOL};

/// The `Content-Type` of [`render`]'s output.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// How a series' value is read from what was summed.
type Get<T> = fn(&T) -> u64;
/// A series of one sample a worker: name, type, help, value.
type Series<T> = (&'static str, &'static str, &'static str, Get<T>);

/// One scrape: every worker's series, then the supervisor's.
pub fn render(
    workers: &BTreeMap<u32, Totals>,
    apps: &BTreeMap<u32, AppFigures>,
    restarts: &BTreeMap<(u32, &'static str), u64>,
) -> String {
    let mut out = String::with_capacity(16 << 10);
    let o = &mut out;
    family(
        o,
        "requests_total",
        "counter",
        "Requests answered, by method and status class.",
    );
    for (w, t) in workers {
        for (m, row) in METHODS.iter().zip(&t.requests) {
            for (c, n) in CLASSES.iter().zip(row) {
                line(
                    o,
                    "requests_total",
                    *w,
                    &format!(",method=\"{m}\",status=\"{c}\""),
                    *n,
                );
            }
        }
    }
    family(
        o,
        "request_duration_seconds",
        "histogram",
        "From the first byte of a request's head to the last byte of its answer sent.",
    );
    for (w, t) in workers {
        let mut cumulative = 0;
        for (i, n) in t.duration.iter().enumerate() {
            cumulative += n;
            // `{:?}` writes `1.0`, as the client libraries do, never `1`.
            let le = BUCKETS
                .get(i)
                .map_or("+Inf".to_string(), |b| format!("{b:?}"));
            line(
                o,
                "request_duration_seconds_bucket",
                *w,
                &format!(",le=\"{le}\""),
                cumulative,
            );
        }
        let sum = t.duration_ns as f64 / 1e9;
        let _ = writeln!(
            o,
            "m0serve_request_duration_seconds_sum{{worker=\"{w}\"}} {sum}"
        );
        line(o, "request_duration_seconds_count", *w, "", cumulative);
    }
    let simple: [Series<Totals>; 8] = [
        (
            "requests_in_flight",
            "gauge",
            "Requests whose head arrived and whose answer is not yet sent.",
            |t| (t.in_flight as i64).max(0) as u64,
        ),
        (
            "connections_open",
            "gauge",
            "Connections open now.",
            Totals::open,
        ),
        (
            "connections_accepted_total",
            "counter",
            "Connections accepted.",
            |t| t.accepted,
        ),
        (
            "received_bytes_total",
            "counter",
            "Bytes read from clients.",
            |t| t.bytes_in,
        ),
        (
            "sent_bytes_total",
            "counter",
            "Bytes written to clients.",
            |t| t.bytes_out,
        ),
        (
            "websocket_connections_total",
            "counter",
            "WebSocket connections accepted by the app.",
            |t| t.ws_opened,
        ),
        (
            "websocket_connections_open",
            "gauge",
            "WebSocket connections open now.",
            |t| t.ws_opened.saturating_sub(t.ws_closed),
        ),
        (
            "websocket_messages_total",
            "counter",
            "WebSocket text and binary messages, both ways.",
            |t| t.ws_in + t.ws_out,
        ),
    ];
    for (name, kind, help, get) in simple {
        family(o, name, kind, help);
        for (w, t) in workers {
            line(o, name, *w, "", get(t));
        }
    }
    family(
        o,
        "connections_closed_total",
        "counter",
        "Connections closed, by cause.",
    );
    for (w, t) in workers {
        for (c, n) in CAUSES.iter().zip(&t.closed) {
            line(
                o,
                "connections_closed_total",
                *w,
                &format!(",cause=\"{}\"", c.label()),
                *n,
            );
        }
    }
    render_apps(o, apps);
    family(
        o,
        "worker_restarts_total",
        "counter",
        "Workers replaced, by cause (the supervisor's count).",
    );
    for (&(w, cause), &n) in restarts {
        line(
            o,
            "worker_restarts_total",
            w,
            &format!(",cause=\"{cause}\""),
            n,
        );
    }
    family(
        o,
        "build_info",
        "gauge",
        "The m0serve build serving (always 1).",
    );
    let _ = writeln!(
        o,
        "m0serve_build_info{{version=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION")
    );
    out
}

/// The re-attach histogram's bounds: log2 bucket indices of nanoseconds
/// (`2^i` ns, from about 1 µs to about 1 s).
const REATTACH_LE: [usize; 11] = [10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30];

/// The WSGI pools' and ASGI executors' figures, sampled by each worker.
fn render_apps(o: &mut String, apps: &BTreeMap<u32, AppFigures>) {
    let pools: Vec<_> = apps.iter().filter(|(_, f)| f.kind == POOL).collect();
    let pool: [Series<AppFigures>; 4] = [
        (
            "pool_queue_depth",
            "gauge",
            "Jobs waiting in the WSGI pool's queue.",
            |f| f.pool_queued,
        ),
        (
            "pool_jobs_kept_total",
            "counter",
            "Jobs a pool thread took inside its GIL slice without dropping the GIL.",
            |f| f.pool_kept,
        ),
        (
            "pool_handoffs_total",
            "counter",
            "GIL hand-offs at a spent slice to a parked thread.",
            |f| f.pool_handoffs,
        ),
        (
            "pool_handoff_timeouts_total",
            "counter",
            "Hand-offs that ran out of their bound before the waiter attached.",
            |f| f.pool_handoff_timeouts,
        ),
    ];
    for (name, kind, help, get) in pool {
        family(o, name, kind, help);
        for (w, f) in &pools {
            line(o, name, **w, "", get(f));
        }
    }
    let name = "pool_reattach_wait_seconds";
    family(
        o,
        name,
        "histogram",
        "A pool thread's wait for the GIL when it re-attaches.",
    );
    for (w, f) in &pools {
        let mut cumulative = 0;
        let mut from = 0;
        for i in REATTACH_LE {
            cumulative += f
                .reattach
                .get(from..=i)
                .map_or(0, |b| b.iter().sum::<u64>());
            from = i + 1;
            let le = format!("{:?}", (1u64 << i) as f64 / 1e9);
            line(
                o,
                &format!("{name}_bucket"),
                **w,
                &format!(",le=\"{le}\""),
                cumulative,
            );
        }
        let total: u64 = f.reattach.iter().sum();
        line(o, &format!("{name}_bucket"), **w, ",le=\"+Inf\"", total);
        let sum = f.reattach_sum_ns as f64 / 1e9;
        let _ = writeln!(o, "m0serve_{name}_sum{{worker=\"{w}\"}} {sum}");
        line(o, &format!("{name}_count"), **w, "", total);
    }
    let executors: Vec<_> = apps.iter().filter(|(_, f)| f.kind == EXECUTOR).collect();
    let asgi: [(&str, &str, Get<AppFigures>); 2] = [
        (
            "asgi_queue_depth",
            "Requests waiting for the ASGI executor's loop.",
            |f| f.asgi_queued,
        ),
        (
            "asgi_tasks",
            "Request tasks running on the ASGI executor's loop.",
            |f| f.asgi_tasks,
        ),
    ];
    for (name, help, get) in asgi {
        family(o, name, "gauge", help);
        for (w, f) in &executors {
            line(o, name, **w, "", get(f));
        }
    }
}

fn family(o: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(
        o,
        "# HELP m0serve_{name} {help}\n# TYPE m0serve_{name} {kind}"
    );
}

fn line(o: &mut String, name: &str, worker: u32, labels: &str, value: u64) {
    let _ = writeln!(o, "m0serve_{name}{{worker=\"{worker}\"{labels}}} {value}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_family_is_typed_once_and_buckets_are_cumulative() {
        let mut one = Totals::default();
        one.duration[0] = 2;
        one.duration[3] = 1;
        one.duration[BUCKETS.len()] = 1;
        one.requests[0][1] = 4;
        let workers = BTreeMap::from([(1, one), (2, Totals::default())]);
        let text = render(&workers, &BTreeMap::new(), &BTreeMap::new());
        for family in [
            "requests_total",
            "request_duration_seconds",
            "requests_in_flight",
        ] {
            let typed = format!("# TYPE m0serve_{family} ");
            assert_eq!(text.matches(&typed).count(), 1, "{family}");
        }
        for line in [
            "m0serve_request_duration_seconds_bucket{worker=\"1\",le=\"0.0001\"} 2",
            "m0serve_request_duration_seconds_bucket{worker=\"1\",le=\"0.001\"} 3",
            "m0serve_request_duration_seconds_bucket{worker=\"1\",le=\"10.0\"} 3",
            "m0serve_request_duration_seconds_bucket{worker=\"1\",le=\"+Inf\"} 4",
            "m0serve_request_duration_seconds_count{worker=\"1\"} 4",
            "m0serve_requests_total{worker=\"1\",method=\"GET\",status=\"2xx\"} 4",
            "m0serve_requests_total{worker=\"2\",method=\"GET\",status=\"2xx\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
    }
}
