//! `--config FILE` / `-f FILE`: mongod's YAML configuration layout read into typed sections, then
//! merged under the command line (an option given on the command line wins over the file's
//! value). Every key is known: an unknown one fails start-up with its name and line, as does a
//! value of the wrong type. This module only reads the file and fills `Config`; what each option
//! does is decided where `Config` is read.

use super::{Config, LogRotate, TlsMode};
use clap::ValueEnum;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A configuration file bigger than this is refused before it is parsed.
const CONFIG_FILE_BYTES_MAX: u64 = 1024 * 1024;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FileConfig {
    net: Option<Net>,
    storage: Option<Storage>,
    system_log: Option<SystemLog>,
    operation_profiling: Option<OperationProfiling>,
    replication: Option<Replication>,
    security: Option<Security>,
    #[allow(dead_code)]
    process_management: Option<ProcessManagement>,
    set_parameter: Option<BTreeMap<String, Scalar>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Net {
    port: Option<u16>,
    bind_ip: Option<String>,
    bind_ip_all: Option<bool>,
    max_incoming_connections: Option<usize>,
    tls: Option<Tls>,
    /// cairn's own: the Prometheus endpoint (`--metricsPort`).
    metrics_port: Option<u16>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Tls {
    mode: Option<String>,
    certificate_key_file: Option<PathBuf>,
    #[serde(rename = "CAFile")]
    ca_file: Option<PathBuf>,
    allow_invalid_certificates: Option<bool>,
    allow_connections_without_certificates: Option<bool>,
    allow_invalid_hostnames: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Storage {
    db_path: Option<PathBuf>,
    journal: Option<Journal>,
    wired_tiger: Option<WiredTiger>,
    sync_period_secs: Option<f64>,
    /// cairn's own storage options, as `getCmdLineOpts` shows them.
    cairn: Option<CairnStorage>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Journal {
    commit_interval_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct WiredTiger {
    engine_config: Option<EngineConfig>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EngineConfig {
    #[serde(rename = "cacheSizeGB")]
    cache_size_gb: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CairnStorage {
    #[serde(rename = "checkpointLogSizeMB")]
    checkpoint_log_mb: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SystemLog {
    destination: Option<String>,
    path: Option<PathBuf>,
    log_append: Option<bool>,
    log_rotate: Option<String>,
    verbosity: Option<u8>,
    quiet: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct OperationProfiling {
    slow_op_threshold_ms: Option<i64>,
    slow_op_sample_rate: Option<f64>,
    mode: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Replication {
    #[serde(rename = "replSetName")]
    repl_set_name: Option<String>,
    #[serde(rename = "oplogSizeMB")]
    oplog_size_mb: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Security {
    authorization: Option<String>,
    #[serde(rename = "javascriptEnabled")]
    javascript_enabled: Option<bool>,
}

/// Accepted so that a stock `mongod.conf` starts: cairn carries its own time-zone database.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ProcessManagement {
    #[allow(dead_code)]
    time_zone_info: Option<String>,
}

/// A `setParameter` value: YAML scalars of any type, passed on as `--setParameter name=value`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Scalar {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

impl Scalar {
    fn text(&self) -> String {
        match self {
            Scalar::Bool(b) => b.to_string(),
            Scalar::Int(i) => i.to_string(),
            Scalar::Float(f) => f.to_string(),
            Scalar::Str(s) => s.clone(),
        }
    }
}

/// Read and parse `path`; errors name the file (and the key and line where the parser knows them).
pub fn read(path: &std::path::Path) -> Result<FileConfig, String> {
    let shown = path.display();
    let len = std::fs::metadata(path)
        .map_err(|e| format!("cannot read config file {shown}: {e}"))?
        .len();
    if len > CONFIG_FILE_BYTES_MAX {
        return Err(format!(
            "config file {shown} is {len} bytes, more than {CONFIG_FILE_BYTES_MAX}"
        ));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read config file {shown}: {e}"))?;
    parse(&text).map_err(|e| format!("error in config file {shown}: {e}"))
}

pub fn parse(text: &str) -> Result<FileConfig, String> {
    if text.trim().is_empty() {
        return Ok(FileConfig::default());
    }
    serde_saphyr::from_str(text).map_err(|e| e.to_string())
}

fn enum_value<T: ValueEnum>(key: &str, s: &str) -> Result<T, String> {
    T::from_str(s, false).map_err(|_| {
        let names: Vec<String> = T::value_variants()
            .iter()
            .filter_map(|v| v.to_possible_value().map(|p| p.get_name().to_string()))
            .collect();
        format!("{key}: '{s}' is not one of {}", names.join(", "))
    })
}

impl FileConfig {
    /// Fill `c` with the file's values except where `on_command_line(field)` says the option was
    /// given there. Values are checked as the command line checks them.
    pub fn apply(
        self,
        c: &mut Config,
        on_command_line: &dyn Fn(&str) -> bool,
    ) -> Result<(), String> {
        let free = |id: &str| !on_command_line(id);
        if let Some(net) = self.net {
            apply_net(net, c, &free)?;
        }
        if let Some(s) = self.storage {
            apply_storage(s, c, &free)?;
        }
        if let Some(log) = self.system_log {
            apply_system_log(log, c, &free)?;
        }
        if let Some(p) = self.operation_profiling {
            if let (Some(ms), true) = (p.slow_op_threshold_ms, free("slowms")) {
                c.slowms = ms;
            }
            if let (Some(rate), true) = (p.slow_op_sample_rate, free("slow_op_sample_rate")) {
                if !(0.0..=1.0).contains(&rate) {
                    return Err(format!(
                        "operationProfiling.slowOpSampleRate: {rate} is not between 0.0 and 1.0"
                    ));
                }
                c.slow_op_sample_rate = rate;
            }
            if let (Some(mode), true) = (p.mode, free("profile")) {
                c.profile = match mode.as_str() {
                    "off" => 0,
                    "slowOp" => 1,
                    "all" => 2,
                    _ => {
                        return Err(format!(
                            "operationProfiling.mode: '{mode}' is not one of off, slowOp, all"
                        ));
                    }
                };
            }
        }
        if let Some(r) = self.replication {
            if let (Some(name), true) = (r.repl_set_name, free("repl_set")) {
                c.repl_set = Some(name);
            }
            if let (Some(mb), true) = (r.oplog_size_mb, free("oplog_size_mb")) {
                c.oplog_size_mb = in_range("replication.oplogSizeMB", mb, 1, 1024 * 1024)?;
            }
        }
        if let Some(sec) = &self.security
            && sec.javascript_enabled == Some(false)
            && free("noscripting")
        {
            c.noscripting = true;
        }
        if let Some(sec) = self.security
            && let Some(a) = sec.authorization
            && free("auth")
            && free("noauth")
        {
            c.auth = match a.as_str() {
                "enabled" => true,
                "disabled" => false,
                _ => {
                    return Err(format!(
                        "security.authorization: '{a}' is not one of enabled, disabled"
                    ));
                }
            };
        }
        if let Some(params) = self.set_parameter {
            // The file's first, so a command-line --setParameter of the same name wins.
            let mut merged: Vec<String> = params
                .iter()
                .map(|(k, v)| format!("{k}={}", v.text()))
                .collect();
            merged.append(&mut c.set_parameter);
            c.set_parameter = merged;
        }
        Ok(())
    }
}

fn in_range(key: &str, v: u64, lo: u64, hi: u64) -> Result<u64, String> {
    if (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{key}: {v} is not between {lo} and {hi}"))
    }
}

fn apply_net(net: Net, c: &mut Config, free: &dyn Fn(&str) -> bool) -> Result<(), String> {
    if let (Some(p), true) = (net.port, free("port")) {
        c.port = p;
    }
    // Either address option on the command line replaces both of the file's.
    if free("bind_ip") && free("bind_ip_all") {
        if let Some(ips) = net.bind_ip {
            c.bind_ip = ips
                .split(',')
                .map(|s| {
                    s.trim()
                        .parse()
                        .map_err(|_| format!("net.bindIp: '{s}' is not an IP address"))
                })
                .collect::<Result<_, _>>()?;
        }
        if let Some(all) = net.bind_ip_all {
            c.bind_ip_all = all;
        }
    }
    if let (Some(n), true) = (net.max_incoming_connections, free("max_conns")) {
        c.max_conns = in_range(
            "net.maxIncomingConnections",
            n as u64,
            1,
            crate::limits::CONNECTIONS_MAX as u64,
        )? as usize;
    }
    if let (Some(p), true) = (net.metrics_port, free("metrics_port")) {
        c.metrics_port = Some(p);
    }
    if let Some(tls) = net.tls {
        if let (Some(m), true) = (tls.mode, free("tls_mode")) {
            c.tls_mode = enum_value::<TlsMode>("net.tls.mode", &m)?;
        }
        if let (Some(p), true) = (tls.certificate_key_file, free("tls_certificate_key_file")) {
            c.tls_certificate_key_file = Some(p);
        }
        if let (Some(p), true) = (tls.ca_file, free("tls_ca_file")) {
            c.tls_ca_file = Some(p);
        }
        if let (Some(b), true) = (
            tls.allow_invalid_certificates,
            free("tls_allow_invalid_certificates"),
        ) {
            c.tls_allow_invalid_certificates = b;
        }
        if let (Some(b), true) = (
            tls.allow_connections_without_certificates,
            free("tls_allow_connections_without_certificates"),
        ) {
            c.tls_allow_connections_without_certificates = b;
        }
        if let (Some(b), true) = (
            tls.allow_invalid_hostnames,
            free("tls_allow_invalid_hostnames"),
        ) {
            c.tls_allow_invalid_hostnames = b;
        }
    }
    Ok(())
}

fn apply_storage(s: Storage, c: &mut Config, free: &dyn Fn(&str) -> bool) -> Result<(), String> {
    if let (Some(p), true) = (s.db_path, free("dbpath")) {
        c.dbpath = p;
    }
    if let Some(j) = s.journal
        && let (Some(ms), true) = (j.commit_interval_ms, free("journal_commit_interval_ms"))
    {
        c.journal_commit_interval_ms =
            Some(in_range("storage.journal.commitIntervalMs", ms, 1, 500)?);
    }
    if let Some(gb) = s
        .wired_tiger
        .and_then(|w| w.engine_config)
        .and_then(|e| e.cache_size_gb)
        && free("cache_size_gb")
    {
        c.cache_size_gb = Some(
            super::parse_cache_size_gb(&gb.to_string())
                .map_err(|e| format!("storage.wiredTiger.engineConfig.cacheSizeGB: {e}"))?,
        );
    }
    if let (Some(secs), true) = (s.sync_period_secs, free("sync_delay_secs")) {
        c.sync_delay_secs = super::parse_sync_delay(&secs.to_string())
            .map_err(|e| format!("storage.syncPeriodSecs: {e}"))?;
    }
    if let Some(mb) = s.cairn.and_then(|x| x.checkpoint_log_mb)
        && free("checkpoint_log_mb")
    {
        c.checkpoint_log_mb = in_range("storage.cairn.checkpointLogSizeMB", mb, 1, 1024 * 1024)?;
    }
    Ok(())
}

fn apply_system_log(
    log: SystemLog,
    c: &mut Config,
    free: &dyn Fn(&str) -> bool,
) -> Result<(), String> {
    match log.destination.as_deref() {
        None | Some("file") => {}
        Some("syslog") => {
            return Err("systemLog.destination: syslog is not supported by cairn; use file".into());
        }
        Some(other) => {
            return Err(format!(
                "systemLog.destination: '{other}' is not one of file, syslog"
            ));
        }
    }
    if log.destination.is_some() && log.path.is_none() && c.logpath.is_none() {
        return Err("systemLog.destination: file needs systemLog.path".into());
    }
    if let (Some(p), true) = (log.path, free("logpath")) {
        c.logpath = Some(p);
    }
    if let (Some(b), true) = (log.log_append, free("logappend")) {
        c.logappend = b;
    }
    if let (Some(r), true) = (log.log_rotate, free("log_rotate")) {
        c.log_rotate = enum_value::<LogRotate>("systemLog.logRotate", &r)?;
    }
    if let (Some(v), true) = (log.verbosity, free("verbosity")) {
        c.verbosity = in_range("systemLog.verbosity", v as u64, 0, 5)? as u8;
    }
    if let (Some(q), true) = (log.quiet, free("quiet")) {
        c.quiet = q;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    fn load(yaml: &str, args: &[&str]) -> Result<Config, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mongod.conf");
        std::fs::write(&path, yaml).unwrap();
        let mut argv = vec!["cairn", "-f"];
        let p = path.to_str().unwrap().to_string();
        argv.push(&p);
        argv.extend_from_slice(args);
        Config::try_load_from(argv)
    }

    const FULL: &str = "\
net:
  port: 28017
  bindIp: 127.0.0.1,::1
  maxIncomingConnections: 50
  metricsPort: 9216
  tls:
    mode: allowTLS
    certificateKeyFile: /etc/k.pem
    CAFile: /etc/ca.pem
    allowInvalidCertificates: true
    allowConnectionsWithoutCertificates: true
    allowInvalidHostnames: true
storage:
  dbPath: /var/lib/cairn
  journal:
    commitIntervalMs: 100
  wiredTiger:
    engineConfig:
      cacheSizeGB: 0.25
  syncPeriodSecs: 30
systemLog:
  destination: file
  path: /var/log/cairn.log
  logAppend: true
  logRotate: reopen
  verbosity: 2
operationProfiling:
  slowOpThresholdMs: 250
  slowOpSampleRate: 0.5
  mode: slowOp
replication:
  replSetName: rs0
  oplogSizeMB: 64
security:
  authorization: enabled
processManagement:
  timeZoneInfo: /usr/share/zoneinfo
setParameter:
  ttlMonitorSleepSecs: 5
  enableTestCommands: true
";

    #[test]
    fn every_key_reaches_config() {
        let c = load(FULL, &[]).unwrap();
        assert_eq!(c.port, 28017);
        assert_eq!(c.bind_ip.len(), 2);
        assert_eq!(c.max_conns, 50);
        assert_eq!(c.metrics_port, Some(9216));
        assert_eq!(c.tls_mode, TlsMode::AllowTls);
        assert_eq!(
            c.tls_certificate_key_file,
            Some(PathBuf::from("/etc/k.pem"))
        );
        assert_eq!(c.tls_ca_file, Some(PathBuf::from("/etc/ca.pem")));
        assert!(c.tls_allow_invalid_certificates);
        assert!(c.tls_allow_connections_without_certificates);
        assert!(c.tls_allow_invalid_hostnames);
        assert_eq!(c.dbpath, PathBuf::from("/var/lib/cairn"));
        assert_eq!(c.journal_commit_interval_ms, Some(100));
        assert_eq!(c.cache_size_bytes(0), 256 << 20);
        assert_eq!(c.checkpoint_interval_ms(), 30_000);
        assert_eq!(c.logpath, Some(PathBuf::from("/var/log/cairn.log")));
        assert!(c.logappend);
        assert_eq!(c.log_rotate, LogRotate::Reopen);
        assert_eq!(c.verbosity, 2);
        assert_eq!(c.slowms, 250);
        assert_eq!(c.slow_op_sample_rate, 0.5);
        assert_eq!(c.profile, 1);
        assert_eq!(c.repl_set.as_deref(), Some("rs0"));
        assert_eq!(c.oplog_size_mb, 64);
        assert!(c.auth);
        assert_eq!(
            c.set_parameter,
            vec!["enableTestCommands=true", "ttlMonitorSleepSecs=5"]
        );
        let parsed = c.parsed_document();
        assert!(parsed.get_str("config").unwrap().ends_with("mongod.conf"));
        let net = parsed.get_document("net").unwrap();
        assert_eq!(net.get_i32("port").unwrap(), 28017);
        assert_eq!(net.get_i32("maxIncomingConnections").unwrap(), 50);
        let log = parsed.get_document("systemLog").unwrap();
        assert_eq!(log.get_str("destination").unwrap(), "file");
        assert!(log.get_bool("logAppend").unwrap());
        assert_eq!(log.get_i32("verbosity").unwrap(), 2);
        let prof = parsed.get_document("operationProfiling").unwrap();
        assert_eq!(prof.get_i32("slowOpThresholdMs").unwrap(), 250);
        assert_eq!(prof.get_str("mode").unwrap(), "slowOp");
        assert_eq!(prof.get_f64("slowOpSampleRate").unwrap(), 0.5);
        let repl = parsed.get_document("replication").unwrap();
        assert_eq!(repl.get_str("replSetName").unwrap(), "rs0");
    }

    #[test]
    fn command_line_wins() {
        let c = load(
            FULL,
            &[
                "--port",
                "1234",
                "--bind_ip_all",
                "--dbpath",
                "/tmp/x",
                "--slowms",
                "7",
                "--slowOpSampleRate",
                "0.25",
                "--noauth",
                "--setParameter",
                "ttlMonitorSleepSecs=9",
                "-v",
            ],
        )
        .unwrap();
        assert_eq!(c.port, 1234);
        assert!(c.bind_ip_all);
        assert_eq!(c.bind_ip, vec!["127.0.0.1".parse::<IpAddr>().unwrap()]);
        assert_eq!(c.dbpath, PathBuf::from("/tmp/x"));
        assert_eq!(c.slowms, 7);
        assert_eq!(c.slow_op_sample_rate, 0.25);
        assert!(!c.auth);
        assert_eq!(c.verbosity, 1);
        // Both are applied in order: the command line's last.
        assert_eq!(c.set_parameter.last().unwrap(), "ttlMonitorSleepSecs=9");
        // Untouched keys still come from the file.
        assert_eq!(c.max_conns, 50);
    }

    #[test]
    fn unknown_key_names_key_and_line() {
        let e = load("net:\n  port: 1\n  bogusKey: 3\n", &[]).unwrap_err();
        assert!(e.contains("bogusKey"), "{e}");
        assert!(e.contains('3'), "line missing: {e}");
        let e = load("storage:\n  journal:\n    enabled: true\n", &[]).unwrap_err();
        assert!(e.contains("enabled"), "{e}");
        let e = load("sharding:\n  clusterRole: shardsvr\n", &[]).unwrap_err();
        assert!(e.contains("sharding"), "{e}");
    }

    #[test]
    fn bad_values_are_refused() {
        for (yaml, want) in [
            ("net:\n  port: nope\n", "port"),
            ("net:\n  port: 70000\n", "port"),
            ("net:\n  bindIp: localhost-ish\n", "net.bindIp"),
            ("net:\n  tls:\n    mode: sometimes\n", "net.tls.mode"),
            (
                "storage:\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 0\n",
                "cacheSizeGB",
            ),
            (
                "storage:\n  journal:\n    commitIntervalMs: 0\n",
                "commitIntervalMs",
            ),
            ("systemLog:\n  destination: syslog\n", "syslog"),
            ("systemLog:\n  destination: file\n", "systemLog.path"),
            ("systemLog:\n  verbosity: 9\n", "verbosity"),
            ("systemLog:\n  logRotate: shred\n", "logRotate"),
            ("operationProfiling:\n  mode: sometimes\n", "mode"),
            ("security:\n  authorization: maybe\n", "authorization"),
            ("replication:\n  oplogSizeMB: 0\n", "oplogSizeMB"),
            ("net: [1, 2\n", ""),
        ] {
            let e = load(yaml, &[]).unwrap_err();
            assert!(e.contains(want), "{yaml}: {e}");
        }
        // Parameters are checked where the command line's are checked (at start-up, by
        // `Parameters::apply_startup`): the file only passes them on, as `name=value`.
        let c = load("setParameter:\n  noSuchParameter: 1\n", &[]).unwrap();
        assert_eq!(c.set_parameter, vec!["noSuchParameter=1".to_string()]);
    }

    #[test]
    fn empty_file_and_missing_file() {
        let c = load("", &[]).unwrap();
        assert_eq!(c.port, 27017);
        let e = Config::try_load_from(["cairn", "--config", "/nonexistent/cairn.conf"]);
        assert!(e.unwrap_err().contains("/nonexistent/cairn.conf"));
    }
}
