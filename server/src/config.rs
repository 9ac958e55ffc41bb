//! The command line, with mongod's option names (`--port`, `--bind_ip`, `--dbpath`, ...), parsed
//! by clap into one `Config` that the rest of the server reads. Nothing else parses arguments.

use clap::{Parser, ValueEnum};
use std::net::IpAddr;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
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
}

impl Config {
    /// The parsed options in the shape of mongod's `getCmdLineOpts.parsed`.
    pub fn parsed_document(&self) -> bson::Document {
        let mut net = bson::doc! { "port": self.port as i32 };
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
        let mut parsed = bson::doc! { "net": net, "storage": storage, "systemLog": system_log };
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
        assert!(!c.auth);
        assert_eq!(c.tls_mode, TlsMode::Disabled);
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
