//! Logging through `tracing`: text or one JSON object per line, to stderr or `--logpath`, and a
//! bounded in-memory ring of recent lines that the `getLog` command reads.

use crate::config::{Config, LogFormat};
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
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

    /// (total lines ever written, the lines still held).
    pub fn snapshot(&self) -> (u64, Vec<String>) {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        (g.total_written, g.lines.iter().cloned().collect())
    }
}

struct RingLayer {
    ring: Arc<LogRing>,
}

/// Collects an event's fields as JSON members.
#[derive(Default)]
struct JsonFields {
    message: String,
    attrs: String,
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
        if field.name() == "message" {
            self.message = value.to_string();
            return;
        }
        if !self.attrs.is_empty() {
            self.attrs.push(',');
        }
        json_escape(&mut self.attrs, field.name());
        self.attrs.push(':');
        json_escape(&mut self.attrs, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
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
        json_escape(&mut line, event.metadata().target());
        line.push_str(",\"msg\":");
        json_escape(&mut line, &fields.message);
        let _ = write!(line, ",\"attr\":{{{}}}}}", fields.attrs);
        self.ring.push(line);
    }
}

/// Install the global subscriber. Returns the ring that `getLog` reads.
pub fn init(config: &Config) -> anyhow::Result<Arc<LogRing>> {
    let ring = Arc::new(LogRing::default());
    let level = if config.quiet {
        LevelFilter::WARN
    } else {
        LevelFilter::INFO
    };
    let filter = EnvFilter::builder()
        .with_default_directive(level.into())
        .from_env_lossy();
    let writer: tracing_subscriber::fmt::writer::BoxMakeWriter = match &config.logpath {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(config.logappend)
                .write(true)
                .truncate(!config.logappend)
                .open(path)?;
            tracing_subscriber::fmt::writer::BoxMakeWriter::new(Mutex::new(file))
        }
        None => tracing_subscriber::fmt::writer::BoxMakeWriter::new(std::io::stderr),
    };
    let fmt_layer = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(false);
    let registry = tracing_subscriber::registry()
        .with(filter)
        .with(RingLayer { ring: ring.clone() });
    match config.log_format {
        LogFormat::Json => registry
            .with(fmt_layer.json().flatten_event(true))
            .try_init()?,
        LogFormat::Text => registry.with(fmt_layer).try_init()?,
    }
    Ok(ring)
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
    fn escapes_json() {
        let mut s = String::new();
        json_escape(&mut s, "a\"b\\c\n\u{1}");
        assert_eq!(s, "\"a\\\"b\\\\c\\n\\u0001\"");
    }
}
