//! Logging through `tracing`: text or one JSON object per line, to stderr or `--logpath`, and a
//! bounded in-memory ring of recent lines (in mongod's structured shape) that `getLog` reads.
//! Verbosity (`-v`, `systemLog.verbosity`, the `logLevel` and `logComponentVerbosity`
//! parameters) maps mongod's levels onto a reloadable filter: 0 info, 1 debug, 2 and up trace,
//! per component through the module targets that make it up. `logRotate` and SIGUSR1 rename or
//! reopen `--logpath` under the writer's lock, so no line is split between two files.

use crate::config::{Config, LogFormat};
use std::collections::BTreeMap;
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, filter::LevelFilter};

/// Recent log lines, newest last, for `getLog: "global"`.
#[derive(Default)]
pub struct LogRing {
    inner: Mutex<RingInner>,
}

#[derive(Default)]
struct RingInner {
    lines: VecDeque<String>,
    total_written: u64,
}

impl LogRing {
    pub fn push(&self, line: String) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if g.lines.len() == crate::limits::LOG_LINES_MAX {
            g.lines.pop_front();
        }
        g.lines.push_back(line);
        g.total_written += 1;
    }

    pub fn snapshot_total(&self) -> u64 {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .total_written
    }

    /// (total lines ever written, the lines still held).
    pub fn snapshot(&self) -> (u64, Vec<String>) {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        (g.total_written, g.lines.iter().cloned().collect())
    }
}

struct RingLayer {
    ring: Arc<LogRing>,
    /// `--log-format mongod`: the same lines go to the log output too.
    out: Option<Arc<LogOutput>>,
}

/// Collects an event's fields as JSON members.
#[derive(Default)]
struct JsonFields {
    message: String,
    attrs: String,
    /// A field named `attr` holds a whole JSON object (the slow-query line's), used as the
    /// line's `attr` in place of the other fields.
    raw_attr: Option<String>,
    /// `c` and `id` of mongod's line, when the event names them.
    component: Option<String>,
    id: Option<i64>,
    ctx: Option<String>,
}

fn json_escape(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

impl Visit for JsonFields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.record_str(field, &format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => {
                self.message = value.to_string();
                return;
            }
            "attr" => {
                self.raw_attr = Some(value.to_string());
                return;
            }
            "component" => {
                self.component = Some(value.to_string());
                return;
            }
            "ctx" => {
                self.ctx = Some(value.to_string());
                return;
            }
            _ => {}
        }
        if !self.attrs.is_empty() {
            self.attrs.push(',');
        }
        json_escape(&mut self.attrs, field.name());
        self.attrs.push(':');
        json_escape(&mut self.attrs, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if field.name() == "id" {
            self.id = Some(value);
            return;
        }
        self.push_raw(field, &value.to_string());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push_raw(field, &value.to_string());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push_raw(field, &value.to_string());
    }
}

impl JsonFields {
    fn push_raw(&mut self, field: &Field, raw: &str) {
        if !self.attrs.is_empty() {
            self.attrs.push(',');
        }
        json_escape(&mut self.attrs, field.name());
        self.attrs.push(':');
        self.attrs.push_str(raw);
    }
}

fn severity(level: &Level) -> &'static str {
    match *level {
        Level::ERROR => "E",
        Level::WARN => "W",
        Level::INFO => "I",
        _ => "D1",
    }
}

impl<S: Subscriber> Layer<S> for RingLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = JsonFields::default();
        event.record(&mut fields);
        let now = bson::DateTime::now()
            .try_to_rfc3339_string()
            .unwrap_or_default();
        let mut line = format!(
            "{{\"t\":{{\"$date\":\"{now}\"}},\"s\":\"{}\",\"c\":",
            severity(event.metadata().level())
        );
        json_escape(
            &mut line,
            fields
                .component
                .as_deref()
                .unwrap_or(event.metadata().target()),
        );
        if let Some(id) = fields.id {
            let _ = write!(line, ",\"id\":{id}");
        }
        if let Some(ctx) = &fields.ctx {
            line.push_str(",\"ctx\":");
            json_escape(&mut line, ctx);
        }
        line.push_str(",\"msg\":");
        json_escape(&mut line, &fields.message);
        match &fields.raw_attr {
            Some(raw) => {
                let _ = write!(line, ",\"attr\":{raw}}}");
            }
            None => {
                let _ = write!(line, ",\"attr\":{{{}}}}}", fields.attrs);
            }
        }
        if let Some(out) = &self.out {
            let mut w: &LogOutput = out;
            let _ = w.write_all(format!("{line}\n").as_bytes());
        }
        self.ring.push(line);
    }
}

/// Where log lines go: stderr, or `--logpath` behind a lock that rotation takes too.
pub struct LogOutput {
    file: Option<LogFile>,
}

struct LogFile {
    path: PathBuf,
    file: Mutex<std::fs::File>,
}

impl std::io::Write for &LogOutput {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match &self.file {
            Some(f) => f.file.lock().unwrap_or_else(|p| p.into_inner()).write(buf),
            None => std::io::stderr().write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        // One lock per line: a rotation never splits a line between two files.
        match &self.file {
            Some(f) => f
                .file
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .write_all(buf),
            None => std::io::stderr().write_all(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn open_log(path: &std::path::Path, append: bool) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(append)
        .write(true)
        .truncate(!append)
        .open(path)
}

/// The name a rotated file gets: mongod's `<path>.<UTC time with dashes>`, with `.N` added when
/// two rotations fall in one second.
fn rotated_name(path: &std::path::Path) -> PathBuf {
    let stamp = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H-%M-%S")
        .to_string();
    let base = format!("{}.{stamp}", path.display());
    let mut candidate = PathBuf::from(&base);
    let mut n = 1;
    while candidate.exists() && n < crate::limits::LOG_ROTATE_SAME_SECOND_MAX {
        candidate = PathBuf::from(format!("{base}.{n}"));
        n += 1;
    }
    candidate
}

impl LogOutput {
    /// `logRotate` / SIGUSR1. Returns the rotated file's new name (rename mode), or None when
    /// logging goes to stderr (nothing to rotate) or the file was reopened.
    pub fn rotate(&self, mode: crate::config::LogRotate) -> std::io::Result<Option<PathBuf>> {
        let Some(f) = &self.file else {
            return Ok(None);
        };
        let mut guard = f.file.lock().unwrap_or_else(|p| p.into_inner());
        let _ = guard.flush();
        match mode {
            crate::config::LogRotate::Rename => {
                let to = rotated_name(&f.path);
                std::fs::rename(&f.path, &to)?;
                *guard = open_log(&f.path, false)?;
                Ok(Some(to))
            }
            crate::config::LogRotate::Reopen => {
                *guard = open_log(&f.path, true)?;
                Ok(None)
            }
        }
    }
}

/// mongod's log components and the module targets (prefixes) that make each up here.
pub const COMPONENTS: &[(&str, &[&str])] = &[
    ("accessControl", &["cairn_server::auth"]),
    ("command", &["cairn_server::commands"]),
    (
        "control",
        &["cairn_server::server", "cairn_server::background"],
    ),
    (
        "network",
        &[
            "cairn_server::connection",
            "cairn_server::listener",
            "cairn_server::tls",
            "cairn_server::metrics",
        ],
    ),
    (
        "query",
        &[
            "cairn_server::query",
            "cairn_server::planner",
            "cairn_server::exec",
        ],
    ),
    (
        "replication",
        &["cairn_server::repl", "cairn_server::streams"],
    ),
    ("storage", &["cairn_storage", "cairn_server::catalog"]),
    (
        "index",
        &["cairn_storage::index", "cairn_storage::index_build"],
    ),
];

/// Verbosity now: the global level and the components set apart from it (-1: inherit).
struct Verbosity {
    global: i32,
    quiet: bool,
    components: BTreeMap<&'static str, i32>,
    /// RUST_LOG, when set, is the filter and verbosity changes are ignored.
    env: bool,
}

type FilterHandle = tracing_subscriber::reload::Handle<EnvFilter, tracing_subscriber::Registry>;

struct Control {
    verbosity: Mutex<Verbosity>,
    handle: FilterHandle,
}

static CONTROL: OnceLock<Control> = OnceLock::new();

fn level_name(v: i32, quiet: bool) -> &'static str {
    match v {
        _ if quiet && v <= 0 => "warn",
        i32::MIN..=0 => "info",
        1 => "debug",
        _ => "trace",
    }
}

fn directives(v: &Verbosity) -> String {
    let mut out = level_name(v.global, v.quiet).to_string();
    for (name, targets) in COMPONENTS {
        if let Some(&level) = v.components.get(name).filter(|l| **l >= 0) {
            for t in *targets {
                let _ = write!(out, ",{t}={}", level_name(level, false));
            }
        }
    }
    out
}

fn reload(v: &Verbosity) {
    if v.env {
        return;
    }
    if let Some(c) = CONTROL.get()
        && let Ok(f) = EnvFilter::try_new(directives(v))
    {
        let _ = c.handle.reload(f);
    }
}

/// The `logLevel` parameter (and `-v`): the global verbosity, 0 to 5.
pub fn set_global_verbosity(level: i32) {
    if let Some(c) = CONTROL.get() {
        let mut v = c.verbosity.lock().unwrap_or_else(|p| p.into_inner());
        v.global = level;
        reload(&v);
    }
}

/// `getParameter: {logComponentVerbosity: 1}`: mongod's document (-1 for "as the global").
pub fn component_verbosity() -> bson::Document {
    let (global, comps) = match CONTROL.get() {
        Some(c) => {
            let v = c.verbosity.lock().unwrap_or_else(|p| p.into_inner());
            (v.global, v.components.clone())
        }
        None => (0, BTreeMap::new()),
    };
    let mut d = bson::doc! { "verbosity": global };
    for (name, _) in COMPONENTS {
        let level = comps.get(name).copied().unwrap_or(-1);
        d.insert(*name, bson::doc! { "verbosity": level });
    }
    d
}

/// `setParameter: {logComponentVerbosity: {verbosity: N, query: {verbosity: M}, ...}}`; a
/// component given as a number is its verbosity, as mongod allows. Returns the previous value.
pub fn set_component_verbosity(spec: &bson::Bson) -> Result<bson::Document, String> {
    let bson::Bson::Document(spec) = spec else {
        return Err("logComponentVerbosity must be an object".into());
    };
    let level_of = |key: &str, v: &bson::Bson| -> Result<i32, String> {
        let n = match v {
            bson::Bson::Int32(i) => *i as i64,
            bson::Bson::Int64(i) => *i,
            bson::Bson::Double(f) if f.fract() == 0.0 => *f as i64,
            bson::Bson::Document(d) => match d.get("verbosity") {
                Some(inner) => return level_of_num(key, inner),
                None => return Ok(-2),
            },
            _ => return Err(format!("Invalid verbosity for {key}: {v}")),
        };
        check_level(key, n)
    };
    let mut updates = Vec::new();
    let mut global = None;
    for (k, v) in spec {
        if k == "verbosity" {
            global = Some(level_of_num(k, v)?);
            continue;
        }
        let Some((name, _)) = COMPONENTS.iter().find(|(n, _)| *n == k) else {
            return Err(format!("Invalid component name {k}"));
        };
        updates.push((*name, level_of(k, v)?));
    }
    let was = component_verbosity();
    if let Some(c) = CONTROL.get() {
        let mut v = c.verbosity.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(g) = global {
            v.global = g;
        }
        for (name, level) in updates {
            // -2: a sub-document without its own verbosity leaves the component as it was.
            if level >= -1 {
                v.components.insert(name, level);
            }
        }
        reload(&v);
    }
    Ok(was)
}

fn level_of_num(key: &str, v: &bson::Bson) -> Result<i32, String> {
    let n = match v {
        bson::Bson::Int32(i) => *i as i64,
        bson::Bson::Int64(i) => *i,
        bson::Bson::Double(f) if f.fract() == 0.0 => *f as i64,
        _ => return Err(format!("Invalid verbosity for {key}: {v}")),
    };
    check_level(key, n)
}

fn check_level(key: &str, n: i64) -> Result<i32, String> {
    if !(-1..=5).contains(&n) {
        return Err(format!(
            "Invalid verbosity for {key}: {n} is not between -1 and 5"
        ));
    }
    Ok(n as i32)
}

/// What `init` hands the server: the ring for `getLog` and the output for `logRotate`.
pub struct Logging {
    pub ring: Arc<LogRing>,
    pub output: Arc<LogOutput>,
}

/// Install the global subscriber.
pub fn init(config: &Config) -> anyhow::Result<Logging> {
    let ring = Arc::new(LogRing::default());
    let env = std::env::var_os("RUST_LOG").is_some_and(|v| !v.is_empty());
    let verbosity = Verbosity {
        global: config.verbosity as i32,
        quiet: config.quiet,
        components: BTreeMap::new(),
        env,
    };
    let filter = if env {
        EnvFilter::builder()
            .with_default_directive(LevelFilter::INFO.into())
            .from_env_lossy()
    } else {
        EnvFilter::try_new(directives(&verbosity))?
    };
    let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
    let output = Arc::new(LogOutput {
        file: match &config.logpath {
            Some(path) => Some(LogFile {
                path: path.clone(),
                file: Mutex::new(open_log(path, config.logappend)?),
            }),
            None => None,
        },
    });
    let fmt_layer = tracing_subscriber::fmt::layer()
        .with_writer(output.clone())
        .with_ansi(false);
    let mongod_out = (config.log_format == LogFormat::Mongod).then(|| output.clone());
    let registry = tracing_subscriber::registry().with(filter).with(RingLayer {
        ring: ring.clone(),
        out: mongod_out,
    });
    match config.log_format {
        LogFormat::Json => registry
            .with(fmt_layer.json().flatten_event(true))
            .try_init()?,
        LogFormat::Text => registry.with(fmt_layer).try_init()?,
        LogFormat::Mongod => registry.try_init()?,
    }
    let _ = CONTROL.set(Control {
        verbosity: Mutex::new(verbosity),
        handle,
    });
    Ok(Logging { ring, output })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_is_bounded() {
        let r = LogRing::default();
        for i in 0..(crate::limits::LOG_LINES_MAX + 10) {
            r.push(i.to_string());
        }
        let (total, lines) = r.snapshot();
        assert_eq!(total as usize, crate::limits::LOG_LINES_MAX + 10);
        assert_eq!(lines.len(), crate::limits::LOG_LINES_MAX);
        assert_eq!(lines[0], "10");
    }

    #[test]
    fn verbosity_directives() {
        let mut v = Verbosity {
            global: 0,
            quiet: false,
            components: BTreeMap::new(),
            env: false,
        };
        assert_eq!(directives(&v), "info");
        v.global = 1;
        assert_eq!(directives(&v), "debug");
        v.global = 0;
        v.quiet = true;
        assert_eq!(directives(&v), "warn");
        v.quiet = false;
        v.components.insert("storage", 2);
        v.components.insert("query", -1);
        let d = directives(&v);
        assert!(d.starts_with("info,cairn_storage=trace"), "{d}");
        assert!(!d.contains("planner"), "{d}");
        assert!(EnvFilter::try_new(d).is_ok());
        assert!(check_level("x", 6).is_err() && check_level("x", -1).is_ok());
    }

    #[test]
    fn rotation_renames_and_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cairn.log");
        let out = LogOutput {
            file: Some(LogFile {
                path: path.clone(),
                file: Mutex::new(open_log(&path, false).unwrap()),
            }),
        };
        (&out).write_all(b"one\n").unwrap();
        let to = out
            .rotate(crate::config::LogRotate::Rename)
            .unwrap()
            .unwrap();
        assert!(
            to.display()
                .to_string()
                .starts_with(&path.display().to_string())
        );
        (&out).write_all(b"two\n").unwrap();
        let again = out
            .rotate(crate::config::LogRotate::Rename)
            .unwrap()
            .unwrap();
        assert_ne!(
            to, again,
            "a second rotation in the same second gets its own name"
        );
        (&out).write_all(b"three\n").unwrap();
        assert_eq!(std::fs::read_to_string(&to).unwrap(), "one\n");
        assert_eq!(std::fs::read_to_string(&again).unwrap(), "two\n");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "three\n");
        // Reopen: an outside tool moved the file; writes go on in a new one at the path.
        let moved = dir.path().join("moved.log");
        std::fs::rename(&path, &moved).unwrap();
        assert!(
            out.rotate(crate::config::LogRotate::Reopen)
                .unwrap()
                .is_none()
        );
        (&out).write_all(b"four\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "four\n");
        let stderr_only = LogOutput { file: None };
        assert!(
            stderr_only
                .rotate(crate::config::LogRotate::Rename)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn escapes_json() {
        let mut s = String::new();
        json_escape(&mut s, "a\"b\\c\n\u{1}");
        assert_eq!(s, "\"a\\\"b\\\\c\\n\\u0001\"");
    }
}
