//! The command line, with mongod's option names (`--port`, `--bind_ip`, `--dbpath`, ...), parsed
//! by clap into one `Config` that the rest of the server reads. Nothing else parses arguments.

use clap::parser::ValueSource;
use clap::{ArgAction, CommandFactory, FromArgMatches, Parser, ValueEnum};
use std::net::IpAddr;
use std::path::PathBuf;

pub mod file;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
    /// mongod's structured lines (`t`, `s`, `c`, `id`, `ctx`, `msg`, `attr`), as `getLog` shows.
    Mongod,
}

/// mongod's `--logRotate`: what `logRotate` and SIGUSR1 do to `--logpath`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogRotate {
    /// Rename the file with a timestamp suffix and start a new one.
    #[value(name = "rename")]
    Rename,
    /// Close and reopen the file (an outside tool such as logrotate has moved it).
    #[value(name = "reopen")]
    Reopen,
}

/// mongod's `--tlsMode`: which connections the one listener accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TlsMode {
    /// Plain connections only.
    #[value(name = "disabled")]
    Disabled,
    /// Plain and TLS connections (mongod: cluster connections stay plain).
    #[value(name = "allowTLS")]
    AllowTls,
    /// Plain and TLS connections (mongod: cluster connections use TLS).
    #[value(name = "preferTLS")]
    PreferTls,
    /// TLS connections only; plain ones are closed.
    #[value(name = "requireTLS")]
    RequireTls,
}

impl TlsMode {
    pub fn name(self) -> &'static str {
        match self {
            TlsMode::Disabled => "disabled",
            TlsMode::AllowTls => "allowTLS",
            TlsMode::PreferTls => "preferTLS",
            TlsMode::RequireTls => "requireTLS",
        }
    }
}

/// cairn: a MongoDB-compatible document database server.
#[derive(Debug, Clone, Parser)]
#[command(name = "cairn", version = crate::VERSION, about, long_about = None)]
pub struct Config {
    /// Read options from this YAML file in mongod's layout; command-line options win over it.
    #[arg(short = 'f', long = "config", value_name = "FILE")]
    pub config_file: Option<PathBuf>,

    /// TCP port to listen on.
    #[arg(long, default_value_t = 27017)]
    pub port: u16,

    /// Comma-separated IP addresses to listen on.
    #[arg(
        long = "bind_ip",
        alias = "bind-ip",
        default_value = "127.0.0.1",
        value_delimiter = ','
    )]
    pub bind_ip: Vec<IpAddr>,

    /// Listen on all IPv4 and IPv6 addresses (overrides --bind_ip).
    #[arg(long = "bind_ip_all", alias = "bind-ip-all")]
    pub bind_ip_all: bool,

    /// Directory for data files; created if missing.
    #[arg(long, default_value = "./data")]
    pub dbpath: PathBuf,

    /// Write the log to this file instead of stderr.
    #[arg(long)]
    pub logpath: Option<PathBuf>,

    /// Append to --logpath instead of truncating it.
    #[arg(long)]
    pub logappend: bool,

    /// What logRotate and SIGUSR1 do to --logpath.
    #[arg(long = "logRotate", value_enum, default_value_t = LogRotate::Rename)]
    pub log_rotate: LogRotate,

    /// More log detail: -v (debug) to -vvvvv; mongod's verbosity levels.
    #[arg(short = 'v', long = "verbose", action = ArgAction::Count)]
    pub verbosity: u8,

    /// Log only warnings and errors.
    #[arg(long)]
    pub quiet: bool,

    /// Log line format.
    #[arg(long = "log-format", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Set a server parameter at start-up: name=value (repeatable).
    #[arg(long = "setParameter", value_name = "NAME=VALUE")]
    pub set_parameter: Vec<String>,

    /// Most concurrent client connections.
    #[arg(long = "maxConns", default_value_t = crate::limits::CONNECTIONS_MAX)]
    pub max_conns: usize,

    /// Operations slower than this many milliseconds are logged.
    #[arg(long, default_value_t = crate::limits::SLOW_OP_THRESHOLD_MS_DEFAULT)]
    pub slowms: i64,

    /// Profiling level at start-up: 0 off, 1 slow operations, 2 all (mongod's --profile).
    #[arg(long = "profile", default_value_t = 0, value_parser = clap::value_parser!(i32).range(0..=2))]
    pub profile: i32,

    /// The share of slow operations profiled and logged, 0.0 to 1.0 (mongod's
    /// --slowOpSampleRate).
    #[arg(long = "slowOpSampleRate", default_value_t = 1.0, value_parser = sample_rate)]
    pub slow_op_sample_rate: f64,

    /// Serve Prometheus metrics over HTTP at /metrics on this port (off by default).
    #[arg(long = "metricsPort", value_name = "PORT")]
    pub metrics_port: Option<u16>,

    /// Periodic durability: sync the log every N ms and acknowledge writes before they are
    /// durable (writes that ask for `j: true` still wait). Default: every write waits.
    #[arg(long = "journalCommitInterval", value_name = "MS")]
    pub journal_commit_interval_ms: Option<u64>,

    /// Require authentication and check every command against the user's roles.
    #[arg(long, conflicts_with = "noauth")]
    pub auth: bool,

    /// No authentication checks (the default; accepted for mongod's command lines).
    #[arg(long)]
    pub noauth: bool,

    /// Turn server-side JavaScript off: `$where`, `$function` then fail (16395, 31264).
    #[arg(long)]
    pub noscripting: bool,

    /// TLS on the listener.
    #[arg(long = "tlsMode", value_enum, default_value_t = TlsMode::Disabled)]
    pub tls_mode: TlsMode,

    /// PEM file with the server's certificate chain and its private key (TLS modes other than
    /// disabled need it).
    #[arg(long = "tlsCertificateKeyFile", value_name = "PEM")]
    pub tls_certificate_key_file: Option<PathBuf>,

    /// PEM file of CA certificates: clients must present a certificate signed by one of them.
    #[arg(long = "tlsCAFile", value_name = "PEM")]
    pub tls_ca_file: Option<PathBuf>,

    /// With --tlsCAFile: accept client certificates that do not verify (and clients without one).
    #[arg(long = "tlsAllowInvalidCertificates")]
    pub tls_allow_invalid_certificates: bool,

    /// With --tlsCAFile: clients without a certificate may connect (those with one are verified).
    #[arg(long = "tlsAllowConnectionsWithoutCertificates")]
    pub tls_allow_connections_without_certificates: bool,

    /// Accepted for mongod's command lines; a server does not check client host names.
    #[arg(long = "tlsAllowInvalidHostnames")]
    pub tls_allow_invalid_hostnames: bool,

    /// Cache (buffer pool) size in GB, fractions allowed (0.0625 = 64 MiB). Default: half of
    /// (memory less 1 GB), at least 256 MB, where memory is the smaller of physical memory and
    /// the cgroup's limit.
    #[arg(
        long = "wiredTigerCacheSizeGB",
        alias = "cacheSizeGB",
        value_name = "GB",
        value_parser = parse_cache_size_gb
    )]
    pub cache_size_gb: Option<f64>,

    /// Seconds between scheduled checkpoints; 0 turns them off.
    #[arg(
        long = "syncdelay",
        value_name = "SECS",
        default_value_t = crate::limits::SYNC_DELAY_SECS_DEFAULT,
        value_parser = parse_sync_delay
    )]
    pub sync_delay_secs: f64,

    /// A checkpoint also starts once this many MB of log were written since the last one (this
    /// bounds what a restart after a crash replays).
    #[arg(
        long = "checkpointLogSizeMB",
        value_name = "MB",
        default_value_t = crate::limits::CHECKPOINT_LOG_MB_DEFAULT,
        value_parser = clap::value_parser!(u64).range(1..=1024 * 1024)
    )]
    pub checkpoint_log_mb: u64,

    /// Run as a (one-node) replica set of this name: `replSetInitiate` makes it PRIMARY.
    #[arg(long = "replSet", value_name = "NAME")]
    pub repl_set: Option<String>,

    /// With --replSet: the oplog's size in MB (the newest this many MB of log are kept
    /// readable as `local.oplog.rs` and for change streams).
    #[arg(
        long = "oplogSize",
        value_name = "MB",
        default_value_t = crate::limits::OPLOG_SIZE_MB_DEFAULT,
        value_parser = clap::value_parser!(u64).range(1..=1024 * 1024)
    )]
    pub oplog_size_mb: u64,
}

pub(crate) fn parse_cache_size_gb(s: &str) -> Result<f64, String> {
    let gb: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number"))?;
    if !(gb > 0.0 && gb <= crate::limits::CACHE_SIZE_GB_MAX) {
        return Err(format!(
            "must be more than 0 and at most {}",
            crate::limits::CACHE_SIZE_GB_MAX
        ));
    }
    Ok(gb)
}

pub(crate) fn parse_sync_delay(s: &str) -> Result<f64, String> {
    let secs: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number"))?;
    if !(0.0..=crate::limits::SYNC_DELAY_SECS_MAX).contains(&secs) {
        return Err(format!(
            "must be between 0 and {}",
            crate::limits::SYNC_DELAY_SECS_MAX
        ));
    }
    Ok(secs)
}

impl Config {
    /// The process's options: the command line, over `--config FILE` when given. A bad command
    /// line prints clap's message (or help) and exits; a bad file exits with status 2, like
    /// mongod's bad options.
    pub fn load() -> Config {
        let matches = Config::command().get_matches();
        match Self::merge(&matches) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("cairn: {e}");
                std::process::exit(2);
            }
        }
    }

    /// `load` without exiting, for tests.
    pub fn try_load_from<I, T>(argv: I) -> Result<Config, String>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let matches = Config::command()
            .try_get_matches_from(argv)
            .map_err(|e| e.to_string())?;
        Self::merge(&matches)
    }

    fn merge(matches: &clap::ArgMatches) -> Result<Config, String> {
        let mut c = Config::from_arg_matches(matches).map_err(|e| e.to_string())?;
        if let Some(path) = c.config_file.clone() {
            let file = file::read(&path)?;
            file.apply(&mut c, &|id| {
                matches.value_source(id) == Some(ValueSource::CommandLine)
            })?;
        }
        Ok(c)
    }

    /// The cache size in bytes: `--wiredTigerCacheSizeGB`, or mongod's default for `memory_bytes`.
    pub fn cache_size_bytes(&self, memory_bytes: u64) -> u64 {
        match self.cache_size_gb {
            Some(gb) => (gb * (1u64 << 30) as f64).round() as u64,
            None => crate::sysinfo::default_cache_bytes(memory_bytes),
        }
    }

    /// `--syncdelay` in milliseconds (0: no scheduled checkpoints).
    pub fn checkpoint_interval_ms(&self) -> u64 {
        (self.sync_delay_secs * 1000.0).round() as u64
    }

    pub fn checkpoint_log_bytes(&self) -> u64 {
        self.checkpoint_log_mb * 1024 * 1024
    }

    /// The parsed options in the shape of mongod's `getCmdLineOpts.parsed`.
    pub fn parsed_document(&self) -> bson::Document {
        let mut net = bson::doc! { "port": self.port as i32 };
        if self.max_conns != crate::limits::CONNECTIONS_MAX {
            net.insert("maxIncomingConnections", self.max_conns as i32);
        }
        if let Some(p) = self.metrics_port {
            net.insert("metricsPort", p as i32);
        }
        if self.bind_ip_all {
            net.insert("bindIpAll", true);
        } else {
            let ips: Vec<String> = self.bind_ip.iter().map(|ip| ip.to_string()).collect();
            net.insert("bindIp", ips.join(","));
        }
        let mut system_log = bson::doc! { "quiet": self.quiet };
        if let Some(p) = &self.logpath {
            system_log.insert("destination", "file");
            system_log.insert("path", p.display().to_string());
            if self.logappend {
                system_log.insert("logAppend", true);
            }
            if self.log_rotate == LogRotate::Reopen {
                system_log.insert("logRotate", "reopen");
            }
        }
        if self.verbosity > 0 {
            system_log.insert("verbosity", self.verbosity as i32);
        }
        let mut storage = bson::doc! { "dbPath": self.dbpath.display().to_string() };
        if let Some(ms) = self.journal_commit_interval_ms {
            storage.insert("journal", bson::doc! { "commitIntervalMs": ms as i64 });
        }
        if self.tls_mode != TlsMode::Disabled {
            let mut tls = bson::doc! { "mode": self.tls_mode.name() };
            if let Some(p) = &self.tls_certificate_key_file {
                tls.insert("certificateKeyFile", p.display().to_string());
            }
            if let Some(p) = &self.tls_ca_file {
                tls.insert("CAFile", p.display().to_string());
            }
            if self.tls_allow_invalid_certificates {
                tls.insert("allowInvalidCertificates", true);
            }
            if self.tls_allow_connections_without_certificates {
                tls.insert("allowConnectionsWithoutCertificates", true);
            }
            net.insert("tls", tls);
        }
        // mongod lists only the options given; so do we (the defaults show in serverStatus).
        if let Some(gb) = self.cache_size_gb {
            storage.insert(
                "wiredTiger",
                bson::doc! { "engineConfig": { "cacheSizeGB": gb } },
            );
        }
        if self.sync_delay_secs != crate::limits::SYNC_DELAY_SECS_DEFAULT {
            storage.insert("syncPeriodSecs", self.sync_delay_secs);
        }
        if self.checkpoint_log_mb != crate::limits::CHECKPOINT_LOG_MB_DEFAULT {
            storage.insert(
                "cairn",
                bson::doc! { "checkpointLogSizeMB": self.checkpoint_log_mb as i64 },
            );
        }
        let mut parsed = bson::Document::new();
        if let Some(p) = &self.config_file {
            parsed.insert("config", p.display().to_string());
        }
        parsed.insert("net", net);
        let mut profiling = bson::Document::new();
        if self.profile != 0 {
            let mode = if self.profile == 1 { "slowOp" } else { "all" };
            profiling.insert("mode", mode);
        }
        if self.slowms != crate::limits::SLOW_OP_THRESHOLD_MS_DEFAULT {
            profiling.insert("slowOpThresholdMs", self.slowms as i32);
        }
        if self.slow_op_sample_rate != 1.0 {
            profiling.insert("slowOpSampleRate", self.slow_op_sample_rate);
        }
        if !profiling.is_empty() {
            parsed.insert("operationProfiling", profiling);
        }
        parsed.insert("storage", storage);
        parsed.insert("systemLog", system_log);
        if let Some(name) = &self.repl_set {
            let mut replication = bson::doc! { "replSet": name };
            if self.config_file.is_some() {
                // A file names it replSetName; mongod shows the file's spelling.
                replication = bson::doc! { "replSetName": name };
            }
            if self.oplog_size_mb != crate::limits::OPLOG_SIZE_MB_DEFAULT {
                replication.insert("oplogSizeMB", self.oplog_size_mb as i64);
            }
            parsed.insert("replication", replication);
        }
        if self.auth {
            parsed.insert("security", bson::doc! { "authorization": "enabled" });
        }
        if !self.set_parameter.is_empty() {
            let mut params = bson::Document::new();
            for kv in &self.set_parameter {
                if let Some((k, v)) = kv.split_once('=') {
                    params.insert(k, v);
                }
            }
            parsed.insert("setParameter", params);
        }
        parsed
    }
}

/// `--slowOpSampleRate`: a number from 0.0 to 1.0.
fn sample_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("'{s}' is not a sample rate between 0.0 and 1.0")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_mongod() {
        let c = Config::parse_from(["cairn"]);
        assert_eq!(c.port, 27017);
        assert_eq!(c.bind_ip, vec!["127.0.0.1".parse::<IpAddr>().unwrap()]);
        assert_eq!(c.dbpath, PathBuf::from("./data"));
        assert_eq!(c.log_format, LogFormat::Text);
        assert_eq!(c.cache_size_gb, None);
        assert_eq!(c.checkpoint_interval_ms(), 60_000);
        assert_eq!(c.checkpoint_log_bytes(), 64 << 20);
        assert_eq!(c.cache_size_bytes(16 << 30), 15 << 29);
        let storage = c.parsed_document().get_document("storage").unwrap().clone();
        assert!(!storage.contains_key("wiredTiger") && !storage.contains_key("syncPeriodSecs"));
        assert!(!c.auth);
        assert_eq!(c.tls_mode, TlsMode::Disabled);
    }

    #[test]
    fn cache_and_checkpoint_options() {
        let c = Config::parse_from([
            "cairn",
            "--wiredTigerCacheSizeGB",
            "0.0625",
            "--syncdelay",
            "0",
            "--checkpointLogSizeMB",
            "8",
        ]);
        assert_eq!(c.cache_size_bytes(0), 64 << 20);
        assert_eq!(c.checkpoint_interval_ms(), 0);
        assert_eq!(c.checkpoint_log_bytes(), 8 << 20);
        let storage = c.parsed_document().get_document("storage").unwrap().clone();
        let gb = storage
            .get_document("wiredTiger")
            .and_then(|w| w.get_document("engineConfig"))
            .and_then(|e| e.get_f64("cacheSizeGB"))
            .unwrap();
        assert_eq!(gb, 0.0625);
        assert_eq!(storage.get_f64("syncPeriodSecs").unwrap(), 0.0);
        assert_eq!(
            storage
                .get_document("cairn")
                .unwrap()
                .get_i64("checkpointLogSizeMB")
                .unwrap(),
            8
        );
        let alias = Config::parse_from(["cairn", "--cacheSizeGB", "2", "--syncdelay", "1.5"]);
        assert_eq!(alias.cache_size_bytes(0), 2 << 30);
        assert_eq!(alias.checkpoint_interval_ms(), 1500);
        for bad in [
            &["cairn", "--wiredTigerCacheSizeGB", "0"][..],
            &["cairn", "--wiredTigerCacheSizeGB", "-1"],
            &["cairn", "--wiredTigerCacheSizeGB", "20000"],
            &["cairn", "--wiredTigerCacheSizeGB", "lots"],
            &["cairn", "--syncdelay", "-1"],
            &["cairn", "--checkpointLogSizeMB", "0"],
        ] {
            assert!(Config::try_parse_from(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn auth_and_tls_flags() {
        let c = Config::parse_from([
            "cairn",
            "--auth",
            "--tlsMode",
            "requireTLS",
            "--tlsCertificateKeyFile",
            "/k.pem",
        ]);
        assert!(c.auth);
        assert_eq!(c.tls_mode, TlsMode::RequireTls);
        let parsed = c.parsed_document();
        assert_eq!(
            parsed
                .get_document("security")
                .unwrap()
                .get_str("authorization")
                .unwrap(),
            "enabled"
        );
        assert!(Config::try_parse_from(["cairn", "--auth", "--noauth"]).is_err());
        assert!(Config::try_parse_from(["cairn", "--tlsMode", "bogus"]).is_err());
    }

    #[test]
    fn mongod_spellings() {
        let c = Config::parse_from([
            "cairn",
            "--port",
            "1234",
            "--bind_ip",
            "127.0.0.1,::1",
            "--setParameter",
            "ttlMonitorSleepSecs=5",
            "--setParameter",
            "cursorTimeoutMillis=1000",
            "--log-format",
            "json",
        ]);
        assert_eq!(c.port, 1234);
        assert_eq!(c.bind_ip.len(), 2);
        assert_eq!(c.set_parameter.len(), 2);
        assert_eq!(c.log_format, LogFormat::Json);
        let parsed = c.parsed_document();
        assert_eq!(
            parsed
                .get_document("net")
                .unwrap()
                .get_str("bindIp")
                .unwrap(),
            "127.0.0.1,::1"
        );
    }
}
