//! What every tool shares: connection flags, the progress bar, the problem log (printed as it
//! happens, a bounded number kept for the report), and namespace patterns.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Problems kept in a `Report` (all are printed).
pub const PROBLEMS_KEPT_MAX: usize = 1000;

/// `--uri`, or `--host`/`--port` as the mongo tools take them.
#[derive(Debug, Clone, Args)]
pub struct ConnArgs {
    /// Connection string, e.g. mongodb://localhost:27017
    #[arg(long)]
    pub uri: Option<String>,
    /// Host (and optional :port) when no --uri is given.
    #[arg(long, default_value = "localhost")]
    pub host: String,
    #[arg(long, default_value_t = 27017)]
    pub port: u16,
    /// No progress bar, no per-problem lines (the summary still prints).
    #[arg(long)]
    pub quiet: bool,
}

impl ConnArgs {
    pub fn uri(&self) -> String {
        match &self.uri {
            Some(u) => u.clone(),
            None if self.host.contains(':') => format!("mongodb://{}/", self.host),
            None => format!("mongodb://{}:{}/", self.host, self.port),
        }
    }

    pub async fn client(&self) -> anyhow::Result<mongodb::Client> {
        let uri = self.uri();
        let client = mongodb::Client::with_uri_str(&uri)
            .await
            .map_err(|e| anyhow::anyhow!("cannot use connection string {uri}: {e}"))?;
        Ok(client)
    }

    /// The database named in the URI path, if any.
    pub fn uri_db(&self) -> Option<String> {
        let uri = self.uri.as_ref()?;
        let rest = uri.split_once("://")?.1;
        let path = rest.split_once('/')?.1;
        let db = path.split('?').next()?;
        (!db.is_empty()).then(|| db.to_owned())
    }
}

/// Problems (bad lines, failed writes) and counters shared by a run's workers.
#[derive(Debug, Default)]
pub struct Tally {
    pub ok: AtomicU64,
    pub failed: AtomicU64,
    problems: Mutex<Vec<String>>,
    quiet: bool,
}

impl Tally {
    pub fn new(quiet: bool) -> Tally {
        Tally {
            quiet,
            ..Tally::default()
        }
    }

    /// Print one problem (above the progress bar) and keep it for the report.
    pub fn problem(&self, bar: &Bar, text: String) {
        if !self.quiet {
            bar.println(&text);
        }
        if let Ok(mut p) = self.problems.lock()
            && p.len() < PROBLEMS_KEPT_MAX
        {
            p.push(text);
        }
    }

    pub fn report(&self, summary: String) -> crate::Report {
        eprintln!("{summary}");
        crate::Report {
            ok: self.ok.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            problems: self.problems.lock().map(|p| p.clone()).unwrap_or_default(),
            summary,
        }
    }
}

/// A progress bar on stderr when it is a terminal; hidden otherwise or with --quiet.
#[derive(Debug, Clone)]
pub struct Bar {
    bar: ProgressBar,
    docs: std::sync::Arc<AtomicU64>,
}

impl Bar {
    /// `total_bytes`: the input size when known (a file), for the ETA.
    pub fn new(label: &str, total_bytes: Option<u64>, quiet: bool) -> Bar {
        let bar = match total_bytes {
            Some(n) => ProgressBar::new(n),
            None => ProgressBar::no_length(),
        };
        if quiet || !std::io::stderr().is_terminal() {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        let template = if total_bytes.is_some() {
            "{prefix} [{bar:30}] {bytes}/{total_bytes} ({binary_bytes_per_sec}, ETA {eta}) {msg}"
        } else {
            "{prefix} {spinner} {bytes} ({binary_bytes_per_sec}) {msg}"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(label.to_owned());
        Bar {
            bar,
            docs: Default::default(),
        }
    }

    /// Count `docs` documents and `bytes` bytes done.
    pub fn advance(&self, docs: u64, bytes: u64) {
        let total = self.docs.fetch_add(docs, Ordering::Relaxed) + docs;
        self.bar.inc(bytes);
        let secs = self.bar.elapsed().as_secs_f64().max(1e-3);
        self.bar
            .set_message(format!("{total} docs, {:.0} docs/s", total as f64 / secs));
    }

    pub fn println(&self, text: &str) {
        if self.bar.is_hidden() {
            eprintln!("{text}");
        } else {
            self.bar.println(text);
        }
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// mongodump's namespace patterns: `db.coll` with `*` matching any run of characters.
pub fn ns_matches(pattern: &str, ns: &str) -> bool {
    fn go(p: &[u8], s: &[u8]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some((b'*', rest)) => (0..=s.len()).any(|i| go(rest, &s[i..])),
            Some((c, rest)) => s.first() == Some(c) && go(rest, &s[1..]),
        }
    }
    go(pattern.as_bytes(), ns.as_bytes())
}

/// `--nsInclude`/`--nsExclude`: included by any include (or when there is none), excluded by any
/// exclude.
pub fn ns_selected(ns: &str, include: &[String], exclude: &[String]) -> bool {
    (include.is_empty() || include.iter().any(|p| ns_matches(p, ns)))
        && !exclude.iter().any(|p| ns_matches(p, ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_patterns() {
        assert!(ns_matches("db.*", "db.coll"));
        assert!(ns_matches("*.users", "app.users"));
        assert!(!ns_matches("db.*", "dbx.coll"));
        assert!(ns_matches("a.b", "a.b"));
        assert!(ns_selected("a.b", &[], &["a.c".into()]));
        assert!(!ns_selected("a.c", &[], &["a.*".into()]));
        assert!(!ns_selected("x.c", &["a.*".into()], &[]));
    }
}
