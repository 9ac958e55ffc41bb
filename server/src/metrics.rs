//! `--metricsPort N`: Prometheus text at `GET /metrics` on a second, plain-HTTP listener (off by
//! default). Per-command counts and latency histograms are recorded on the request path (label
//! values come only from the command table, so a client cannot grow the label set); everything
//! else is read at scrape time from the counters `serverStatus` already reports and from the
//! storage engine's stats. HTTP is hyper's; the exposition format is the `prometheus` crate's.

use crate::state::ServerState;
use http_body_util::Full;
use hyper::body::Bytes;
use prometheus::proto::{
    Bucket, Counter, Gauge, Histogram, LabelPair, Metric, MetricFamily, MetricType,
};
use prometheus::{Encoder, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// Latency bucket bounds of commands, in seconds (100 µs to 10 s).
const COMMAND_SECONDS_BOUNDS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// The label of commands not in the command table (unknown names are the client's choice).
const UNKNOWN_COMMAND: &str = "unknown";

pub struct Metrics {
    registry: Registry,
    commands: IntCounterVec,
    command_seconds: HistogramVec,
}

impl Default for Metrics {
    fn default() -> Self {
        let registry = Registry::new();
        let commands = IntCounterVec::new(
            Opts::new("cairn_commands_total", "Commands run, by name and outcome"),
            &["command", "result"],
        )
        .expect("valid metric names");
        let command_seconds = HistogramVec::new(
            HistogramOpts::new("cairn_command_duration_seconds", "Command latency by name")
                .buckets(COMMAND_SECONDS_BOUNDS.to_vec()),
            &["command"],
        )
        .expect("valid metric names");
        // Registering fresh metrics with distinct names in a fresh registry cannot fail.
        let _ = registry.register(Box::new(commands.clone()));
        let _ = registry.register(Box::new(command_seconds.clone()));
        Metrics {
            registry,
            commands,
            command_seconds,
        }
    }
}

/// The process's per-command counters (one server per process). A process-wide registry keeps
/// `ServerState` from importing this module, whose endpoint reads `ServerState`.
pub fn commands() -> &'static Metrics {
    static METRICS: std::sync::OnceLock<Metrics> = std::sync::OnceLock::new();
    METRICS.get_or_init(Metrics::default)
}

impl Metrics {
    /// One command finished (called for every command, whether or not the endpoint is on).
    /// `command` is its name in the command table (`None` for a name the table lacks), so a
    /// client cannot create label values.
    pub fn record_command(&self, command: Option<&'static str>, elapsed: Duration, ok: bool) {
        let label = command.unwrap_or(UNKNOWN_COMMAND);
        let result = if ok { "ok" } else { "error" };
        self.commands.with_label_values(&[label, result]).inc();
        self.command_seconds
            .with_label_values(&[label])
            .observe(elapsed.as_secs_f64());
    }
}

fn family(name: &str, help: &str, kind: MetricType, metrics: Vec<Metric>) -> MetricFamily {
    let mut f = MetricFamily::default();
    f.set_name(name.to_string());
    f.set_help(help.to_string());
    f.set_field_type(kind);
    f.set_metric(metrics);
    f
}

fn counter(name: &str, help: &str, value: u64) -> MetricFamily {
    let mut c = Counter::default();
    c.set_value(value as f64);
    let mut m = Metric::default();
    m.set_counter(c);
    family(name, help, MetricType::COUNTER, vec![m])
}

fn gauge(name: &str, help: &str, value: f64) -> MetricFamily {
    let mut g = Gauge::default();
    g.set_value(value);
    let mut m = Metric::default();
    m.set_gauge(g);
    family(name, help, MetricType::GAUGE, vec![m])
}

/// Counters that share a name and differ by one label.
fn labelled_counters(name: &str, help: &str, label: &str, rows: &[(&str, u64)]) -> MetricFamily {
    let metrics = rows
        .iter()
        .map(|(v, n)| {
            let mut l = LabelPair::default();
            l.set_name(label.to_string());
            l.set_value(v.to_string());
            let mut c = Counter::default();
            c.set_value(*n as f64);
            let mut m = Metric::default();
            m.set_label(vec![l]);
            m.set_counter(c);
            m
        })
        .collect();
    family(name, help, MetricType::COUNTER, metrics)
}

/// A storage histogram as Prometheus buckets, each bound (and the sum) divided by `scale`.
fn histogram(
    name: &str,
    help: &str,
    h: &storage::histogram::HistogramSnapshot,
    scale: f64,
) -> MetricFamily {
    let mut cumulative = 0;
    let buckets = h
        .bounds
        .iter()
        .zip(&h.counts)
        .map(|(bound, n)| {
            cumulative += n;
            let mut b = Bucket::default();
            b.set_upper_bound(*bound as f64 / scale);
            b.set_cumulative_count(cumulative);
            b
        })
        .collect();
    let mut p = Histogram::default();
    p.set_sample_count(h.count());
    p.set_sample_sum(h.sum as f64 / scale);
    p.set_bucket(buckets);
    let mut m = Metric::default();
    m.set_histogram(p);
    family(name, help, MetricType::HISTOGRAM, vec![m])
}

/// The scrape: the recorded families, then the ones read from the server's state now.
pub fn render(state: &ServerState) -> String {
    let mut families = commands().registry.gather();
    let c = &state.connections;
    let o = &state.opcounters;
    let e = state.catalog.engine().stats();
    families.extend([
        gauge(
            "cairn_connections_current",
            "Open client connections",
            c.current.load(Relaxed) as f64,
        ),
        gauge(
            "cairn_connections_active",
            "Connections running a command now",
            c.active.load(Relaxed) as f64,
        ),
        counter(
            "cairn_connections_created_total",
            "Connections accepted since start",
            c.total_created.load(Relaxed),
        ),
        labelled_counters(
            "cairn_opcounters_total",
            "Operations by type, as serverStatus.opcounters",
            "type",
            &[
                ("insert", o.insert.load(Relaxed)),
                ("query", o.query.load(Relaxed)),
                ("update", o.update.load(Relaxed)),
                ("delete", o.delete.load(Relaxed)),
                ("getmore", o.getmore.load(Relaxed)),
                ("command", o.command.load(Relaxed)),
            ],
        ),
        counter(
            "cairn_network_bytes_in_total",
            "Bytes read from clients",
            state.network.bytes_in.load(Relaxed),
        ),
        counter(
            "cairn_network_bytes_out_total",
            "Bytes written to clients",
            state.network.bytes_out.load(Relaxed),
        ),
        gauge(
            "cairn_cursors_open",
            "Open cursors (including change streams)",
            (state.cursors.len() + state.streams.len()) as f64,
        ),
        counter(
            "cairn_ttl_passes_total",
            "TTL monitor passes",
            state.ttl.passes.load(Relaxed),
        ),
        counter(
            "cairn_ttl_deleted_documents_total",
            "Documents deleted by TTL indexes",
            state.ttl.deleted_documents.load(Relaxed),
        ),
        counter(
            "cairn_log_lines_total",
            "Server log lines written",
            state.log_ring.snapshot_total(),
        ),
    ]);
    families.extend(storage_families(&e));
    if state.repl.is_some() {
        families.extend(oplog_families(state, &e));
    }
    let mut out = Vec::new();
    // Encoding families we built ourselves into memory cannot fail.
    let _ = prometheus::TextEncoder::new().encode(&families, &mut out);
    String::from_utf8(out).unwrap_or_default()
}

fn storage_families(e: &storage::EngineStats) -> Vec<MetricFamily> {
    vec![
        gauge(
            "cairn_cache_bytes_max",
            "The cache's size setting",
            e.cache.bytes_max as f64,
        ),
        gauge(
            "cairn_cache_bytes",
            "Bytes held in the cache",
            e.cache.bytes_current as f64,
        ),
        gauge(
            "cairn_cache_dirty_bytes",
            "Bytes of changed pages in the cache",
            e.cache.bytes_dirty as f64,
        ),
        counter(
            "cairn_cache_pages_read_total",
            "Pages read into the cache",
            e.cache.pages_read,
        ),
        counter(
            "cairn_cache_pages_evicted_total",
            "Pages evicted from the cache",
            e.cache.pages_evicted,
        ),
        counter(
            "cairn_cache_pages_evicted_dirty_total",
            "Evicted pages that were written first",
            e.cache.pages_evicted_dirty,
        ),
        gauge(
            "cairn_log_bytes",
            "Bytes of log records on disk",
            e.log_bytes as f64,
        ),
        gauge(
            "cairn_log_live_bytes",
            "Bytes of log records holding current documents",
            e.live_bytes as f64,
        ),
        gauge("cairn_log_segments", "Log segment files", e.segments as f64),
        counter(
            "cairn_checkpoints_total",
            "Checkpoints completed",
            e.checkpoints,
        ),
        gauge(
            "cairn_checkpoint_last_duration_seconds",
            "Duration of the last checkpoint",
            e.checkpoint_last_ms as f64 / 1000.0,
        ),
        histogram(
            "cairn_log_sync_duration_seconds",
            "fdatasync of the log (group commit)",
            &e.group_commit.sync_us,
            1e6,
        ),
        histogram(
            "cairn_group_commit_batch_records",
            "Log records made durable by one sync",
            &e.group_commit.batch_records,
            1.0,
        ),
        histogram(
            "cairn_group_commit_batch_writers",
            "Waiting writers made durable by one sync",
            &e.group_commit.batch_writers,
            1.0,
        ),
        labelled_counters(
            "cairn_group_commit_syncs_total",
            "Log syncs by who ran them",
            "leader",
            &[
                ("writer", e.group_commit.syncs_by_writer),
                ("requested", e.group_commit.syncs_requested),
                ("timer", e.group_commit.syncs_by_timer),
            ],
        ),
    ]
}

fn oplog_families(state: &ServerState, e: &storage::EngineStats) -> Vec<MetricFamily> {
    let engine = state.catalog.engine();
    let last = engine.last_timestamp();
    vec![
        gauge(
            "cairn_oplog_size_bytes_max",
            "The oplog's size setting (--oplogSize)",
            (state.config.oplog_size_mb * 1024 * 1024) as f64,
        ),
        gauge(
            "cairn_oplog_last_timestamp_seconds",
            "Seconds part of the newest oplog entry's timestamp",
            (last >> 32) as f64,
        ),
        gauge(
            "cairn_oplog_first_segment",
            "Oldest log segment the oplog still reads",
            engine.history_start().segment as f64,
        ),
        gauge(
            "cairn_oplog_durable_sequence",
            "Newest durable log sequence",
            e.durable_sequence as f64,
        ),
    ]
}

/// Bind the endpoint on every listening address; returns the bound port (for `--metricsPort 0`).
pub async fn start(state: &Arc<ServerState>, port: u16) -> anyhow::Result<u16> {
    let ips: Vec<std::net::IpAddr> = if state.config.bind_ip_all {
        vec![std::net::Ipv4Addr::UNSPECIFIED.into()]
    } else {
        state.config.bind_ip.clone()
    };
    let mut bound = port;
    for ip in ips {
        let listener = tokio::net::TcpListener::bind((ip, bound))
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen for metrics on {ip}:{bound}: {e}"))?;
        bound = listener.local_addr()?.port();
        tokio::spawn(accept_loop(state.clone(), listener));
    }
    tracing::info!(
        port = bound as u64,
        "Metrics endpoint listening on /metrics"
    );
    Ok(bound)
}

async fn accept_loop(state: Arc<ServerState>, listener: tokio::net::TcpListener) {
    let mut shutdown = state.shutdown_requested();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.changed() => return,
        };
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(e) => {
                tracing::warn!(error = %e, "metrics accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let st = state.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let st = st.clone();
                async move { Ok::<_, std::convert::Infallible>(respond(&st, &req)) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await;
        });
    }
}

fn respond<B>(state: &ServerState, req: &hyper::Request<B>) -> hyper::Response<Full<Bytes>> {
    let (status, ctype, body) = match (req.method(), req.uri().path()) {
        (&hyper::Method::GET, "/metrics") => (
            hyper::StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            render(state),
        ),
        (&hyper::Method::GET, _) => (
            hyper::StatusCode::NOT_FOUND,
            "text/plain",
            "not found: metrics are at /metrics\n".to_string(),
        ),
        _ => (
            hyper::StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "only GET\n".to_string(),
        ),
    };
    let mut resp = hyper::Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(ctype) {
        resp.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_labelled_from_the_table() {
        let m = Metrics::default();
        m.record_command(Some("find"), Duration::from_millis(3), true);
        m.record_command(None, Duration::from_millis(1), false);
        let mut out = Vec::new();
        prometheus::TextEncoder::new()
            .encode(&m.registry.gather(), &mut out)
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(r#"cairn_commands_total{command="find",result="ok"} 1"#));
        assert!(text.contains(r#"command="unknown""#), "{text}");
    }

    #[test]
    fn storage_histogram_is_cumulative() {
        let h = storage::histogram::Histogram::new(&[10, 100]);
        for v in [5, 50, 500] {
            h.record(v);
        }
        let f = histogram("x", "y", &h.snapshot(), 1e3);
        let mut out = Vec::new();
        prometheus::TextEncoder::new()
            .encode(&[f], &mut out)
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("x_bucket{le=\"0.01\"} 1"), "{text}");
        assert!(text.contains("x_bucket{le=\"0.1\"} 2"), "{text}");
        assert!(text.contains("x_bucket{le=\"+Inf\"} 3"), "{text}");
        assert!(text.contains("x_count 3"), "{text}");
    }
}
