//! Server parameters (`--setParameter`, `getParameter`, `setParameter`): one table of names,
//! defaults and types. Values live behind a lock and are read by the parts that use them (the TTL
//! monitor reads `ttlMonitorSleepSecs` at every pass, so a change takes effect without restart).
//! The three read on every query or small write (`cairnReadsOnWorker`, `cairnWritesOnWorker`,
//! `internalQueryStatsRateLimit`) are also kept in atomics, written under the table's write
//! lock whenever the table changes and read with Relaxed loads (no lock, no map look-up):
//! [`Parameters::reads_on_worker`], [`Parameters::writes_on_worker`],
//! [`Parameters::query_stats_on`].

use crate::error::{CommandError, CommandResult, ErrorCode, err};
use bson::{Bson, Document};
use std::collections::BTreeMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering::Relaxed};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int,
    Bool,
    Str,
}

struct Def {
    name: &'static str,
    kind: Kind,
    default: fn() -> Bson,
    /// Settable with the `setParameter` command (others only at start-up or never).
    runtime: bool,
    startup: bool,
}

const DEFS: &[Def] = &[
    Def {
        // cairn's own: read-only calls are first tried on the async worker that received them,
        // served from the buffer pool and the page cache only (`crate::offload::run_tried`);
        // false sends every storage call to the pool.
        name: "cairnReadsOnWorker",
        kind: Kind::Bool,
        default: || Bson::Boolean(true),
        runtime: true,
        startup: true,
    },
    Def {
        // Writes outside transactions first tried on the async worker that received them, up
        // to their log append (`crate::offload::run_tried`); false sends them to the pool.
        name: "cairnWritesOnWorker",
        kind: Kind::Bool,
        default: || Bson::Boolean(true),
        runtime: true,
        startup: true,
    },
    Def {
        name: "ttlMonitorSleepSecs",
        kind: Kind::Int,
        default: || Bson::Int32(60),
        runtime: true,
        startup: true,
    },
    Def {
        // How often the session registry is written to config.system.sessions.
        name: "logicalSessionRefreshMillis",
        kind: Kind::Int,
        default: || Bson::Int32(300_000),
        runtime: true,
        startup: true,
    },
    Def {
        name: "ttlMonitorEnabled",
        kind: Kind::Bool,
        default: || Bson::Boolean(true),
        runtime: true,
        startup: true,
    },
    Def {
        name: "transactionLifetimeLimitSeconds",
        kind: Kind::Int,
        default: || Bson::Int32(60),
        runtime: true,
        startup: true,
    },
    Def {
        // How long a transaction statement waits for a namespace lock (`crate::ns_locks`)
        // before LockTimeout; negative: as long as the transaction may live.
        name: "maxTransactionLockRequestTimeoutMillis",
        kind: Kind::Int,
        default: || Bson::Int32(5),
        runtime: true,
        startup: true,
    },
    Def {
        // cairn's own: the bytes one transaction's pending writes may pin in memory before
        // TransactionTooLargeForCache (mongod's bound is its share of the WiredTiger cache).
        name: "transactionMemoryLimitBytes",
        kind: Kind::Int,
        default: || Bson::Int64(TRANSACTION_MEMORY_LIMIT_BYTES_DEFAULT),
        runtime: true,
        startup: true,
    },
    Def {
        name: "cursorTimeoutMillis",
        kind: Kind::Int,
        default: || Bson::Int64(600_000),
        runtime: true,
        startup: true,
    },
    Def {
        name: "internalQueryMaxBlockingSortMemoryUsageBytes",
        kind: Kind::Int,
        default: || Bson::Int64(100 * 1024 * 1024),
        runtime: true,
        startup: true,
    },
    Def {
        // cairn's own: what all running queries' blocking stages may hold together
        // (`query::budget`); a quarter of the machine's memory by default.
        name: "queryMemoryBudgetBytes",
        kind: Kind::Int,
        default: || Bson::Int64((crate::sysinfo::memory_bytes() / 4).min(i64::MAX as u64) as i64),
        runtime: true,
        startup: true,
    },
    Def {
        // cairn's own: parts a collection scan for a count, a mergeable `$group` or a top-k
        // `$sort` may be split into (`exec::parallel`); 0: one per core, 1: never parallel.
        name: "parallelScanThreads",
        kind: Kind::Int,
        default: || Bson::Int32(0),
        runtime: true,
        startup: true,
    },
    Def {
        // cairn's own: collections with fewer documents are scanned serially.
        name: "parallelScanMinDocuments",
        kind: Kind::Int,
        default: || Bson::Int64(crate::limits::PARALLEL_SCAN_DOCS_MIN_DEFAULT),
        runtime: true,
        startup: true,
    },
    Def {
        // 0: no query statistics are recorded (`crate::query_stats`); any other value records
        // every query (no per-second sampling).
        name: "internalQueryStatsRateLimit",
        kind: Kind::Int,
        default: || Bson::Int32(-1),
        runtime: true,
        startup: true,
    },
    Def {
        name: "logLevel",
        kind: Kind::Int,
        default: || Bson::Int32(0),
        runtime: true,
        startup: true,
    },
    Def {
        name: "quiet",
        kind: Kind::Bool,
        default: || Bson::Boolean(false),
        runtime: true,
        startup: true,
    },
    Def {
        name: "maxIndexBuildMemoryUsageMegabytes",
        kind: Kind::Int,
        default: || Bson::Int32(200),
        runtime: true,
        startup: true,
    },
    Def {
        // Test-only commands (configureFailPoint, waitForFailPoint), as in mongod.
        name: "enableTestCommands",
        kind: Kind::Bool,
        default: || Bson::Boolean(false),
        runtime: false,
        startup: true,
    },
    Def {
        name: "authenticationMechanisms",
        kind: Kind::Str,
        default: || Bson::String("SCRAM-SHA-1,SCRAM-SHA-256".into()),
        runtime: false,
        startup: true,
    },
    Def {
        name: "scramIterationCount",
        kind: Kind::Int,
        default: || Bson::Int32(10_000),
        runtime: true,
        startup: true,
    },
    Def {
        name: "scramSHA256IterationCount",
        kind: Kind::Int,
        default: || Bson::Int32(15_000),
        runtime: true,
        startup: true,
    },
    Def {
        name: "authFailedDelayMs",
        kind: Kind::Int,
        default: || Bson::Int64(crate::limits::AUTH_FAILED_DELAY_MS_DEFAULT),
        runtime: true,
        startup: true,
    },
    Def {
        name: "enableLocalhostAuthBypass",
        kind: Kind::Bool,
        default: || Bson::Boolean(true),
        runtime: false,
        startup: true,
    },
    Def {
        name: "maxUnauthenticatedConnections",
        kind: Kind::Int,
        default: || Bson::Int64(crate::limits::UNAUTHENTICATED_CONNECTIONS_MAX as i64),
        runtime: false,
        startup: true,
    },
    Def {
        name: "unauthenticatedIdleTimeoutMS",
        kind: Kind::Int,
        default: || Bson::Int64(crate::limits::UNAUTHENTICATED_IDLE_MS as i64),
        runtime: true,
        startup: true,
    },
    Def {
        // How far back a snapshot read's atClusterTime may go (`commands::snapshot_read`).
        name: "minSnapshotHistoryWindowInSeconds",
        kind: Kind::Int,
        default: || Bson::Int32(300),
        runtime: true,
        startup: true,
    },
    Def {
        name: "featureCompatibilityVersion",
        kind: Kind::Str,
        default: || Bson::String("8.0".into()),
        runtime: false,
        startup: false,
    },
];

/// `transactionMemoryLimitBytes` unless set (256 MiB).
const TRANSACTION_MEMORY_LIMIT_BYTES_DEFAULT: i64 = 256 << 20;

/// The smallest `queryMemoryBudgetBytes` accepted (1 MiB).
const QUERY_MEMORY_BUDGET_BYTES_MIN: i64 = 1 << 20;

fn def(name: &str) -> Option<&'static Def> {
    DEFS.iter().find(|d| d.name == name)
}

pub struct Parameters {
    values: RwLock<BTreeMap<&'static str, Bson>>,
    /// `cairnReadsOnWorker`, mirrored from `values`.
    reads_on_worker: AtomicBool,
    /// `cairnWritesOnWorker`, mirrored from `values`.
    writes_on_worker: AtomicBool,
    /// `internalQueryStatsRateLimit`, mirrored from `values`.
    query_stats_rate_limit: AtomicI64,
}

impl Default for Parameters {
    fn default() -> Self {
        let p = Parameters {
            values: RwLock::new(DEFS.iter().map(|d| (d.name, (d.default)())).collect()),
            reads_on_worker: AtomicBool::new(false),
            writes_on_worker: AtomicBool::new(false),
            query_stats_rate_limit: AtomicI64::new(0),
        };
        p.mirror(&p.read());
        p
    }
}

fn unrecognized(name: &str) -> CommandError {
    err(
        ErrorCode::InvalidOptions,
        format!("attempted to set unrecognized parameter [{name}], use help:true to see options"),
    )
}

/// Bounds of the parameters that have them (mongod's, for the SCRAM iteration counts).
fn check_range(name: &str, v: &Bson) -> CommandResult<()> {
    let n = match v {
        Bson::Int32(i) => *i as i64,
        Bson::Int64(i) => *i,
        _ => return check_mechanisms(name, v),
    };
    let (lo, hi) = match name {
        "scramIterationCount" => (crate::auth::scram::ITERATIONS_MIN_SHA1, i32::MAX as i64),
        "scramSHA256IterationCount" => (crate::auth::scram::ITERATIONS_MIN_SHA256, i32::MAX as i64),
        "authFailedDelayMs" => (0, 5000),
        "maxUnauthenticatedConnections" => (1, crate::limits::CONNECTIONS_MAX as i64),
        "unauthenticatedIdleTimeoutMS" => (1, i32::MAX as i64),
        "queryMemoryBudgetBytes" => (QUERY_MEMORY_BUDGET_BYTES_MIN, i64::MAX),
        "transactionMemoryLimitBytes" => (1, i64::MAX),
        "minSnapshotHistoryWindowInSeconds" => (0, i32::MAX as i64),
        _ => return Ok(()),
    };
    if !(lo..=hi).contains(&n) {
        return Err(err(
            ErrorCode::BadValue,
            format!("Invalid value for parameter {name}: {n} is not between {lo} and {hi}"),
        ));
    }
    Ok(())
}

fn check_mechanisms(name: &str, v: &Bson) -> CommandResult<()> {
    if name != "authenticationMechanisms" {
        return Ok(());
    }
    let list = v.as_str().unwrap_or_default();
    for m in list.split(',').map(str::trim) {
        if crate::auth::scram::Mechanism::parse(m).is_none() {
            return Err(err(
                ErrorCode::BadValue,
                format!("Received authentication mechanism {m} which is not supported by cairn"),
            ));
        }
    }
    Ok(())
}

/// Coerce a value to the parameter's type, keeping its width for integers.
fn coerce(d: &Def, value: &Bson) -> CommandResult<Bson> {
    let bad = || {
        err(
            ErrorCode::BadValue,
            format!("Invalid value for parameter {}: {}", d.name, value),
        )
    };
    Ok(match (d.kind, value) {
        (Kind::Int, Bson::Int32(_) | Bson::Int64(_)) => value.clone(),
        (Kind::Int, Bson::Double(f)) if f.fract() == 0.0 && f.abs() < 9.0e15 => {
            Bson::Int64(*f as i64)
        }
        (Kind::Int, Bson::String(s)) => Bson::Int64(s.trim().parse::<i64>().map_err(|_| bad())?),
        (Kind::Bool, Bson::Boolean(_)) => value.clone(),
        (Kind::Bool, Bson::Int32(i)) => Bson::Boolean(*i != 0),
        (Kind::Bool, Bson::String(s)) => match s.as_str() {
            "true" | "1" => Bson::Boolean(true),
            "false" | "0" => Bson::Boolean(false),
            _ => return Err(bad()),
        },
        (Kind::Str, Bson::String(_)) => value.clone(),
        _ => return Err(bad()),
    })
}

impl Parameters {
    /// Apply `--setParameter name=value` options.
    pub fn apply_startup(&self, options: &[String]) -> Result<(), String> {
        for opt in options {
            let (name, value) = opt
                .split_once('=')
                .ok_or_else(|| format!("--setParameter takes name=value, got '{opt}'"))?;
            let d = def(name)
                .filter(|d| d.startup)
                .ok_or_else(|| format!("Unknown --setParameter '{name}'"))?;
            let v = coerce(d, &Bson::String(value.to_string())).map_err(|e| e.message)?;
            check_range(d.name, &v).map_err(|e| e.message)?;
            let mut values = self.write();
            values.insert(d.name, v);
            self.mirror(&values);
        }
        self.apply_budget();
        Ok(())
    }

    /// Hands `queryMemoryBudgetBytes` to the budget the query stages charge.
    fn apply_budget(&self) {
        let bytes = self.get_i64("queryMemoryBudgetBytes").max(0) as u64;
        crate::query::budget::GLOBAL.set_max(usize::try_from(bytes).unwrap_or(usize::MAX));
    }

    /// Whether `setParameter` may name `name`: mongod checks every name of the command before
    /// it sets any (InvalidOptions for an unknown one, IllegalOperation for a startup-only one).
    pub fn check_settable(&self, name: &str) -> CommandResult<()> {
        if name == "logComponentVerbosity" {
            return Ok(());
        }
        let d = def(name).ok_or_else(|| unrecognized(name))?;
        if !d.runtime {
            return Err(err(
                ErrorCode::IllegalOperation,
                format!("not allowed to change [{name}] at runtime"),
            ));
        }
        Ok(())
    }

    /// `setParameter` command: returns the previous value (`was`).
    pub fn set(&self, name: &str, value: &Bson) -> CommandResult<Bson> {
        if name == "logComponentVerbosity" {
            if !matches!(value, Bson::Document(_)) {
                return Err(err(
                    ErrorCode::TypeMismatch,
                    format!("log component verbosity is not a BSON object: {value}"),
                ));
            }
            return crate::logging::set_component_verbosity(value)
                .map(Bson::Document)
                .map_err(|m| err(ErrorCode::BadValue, m));
        }
        let was = self.set_table(name, value)?;
        if name == "logLevel" {
            crate::logging::set_global_verbosity(self.get_i64("logLevel").clamp(0, 5) as i32);
        }
        if name == "queryMemoryBudgetBytes" {
            self.apply_budget();
        }
        Ok(was)
    }

    fn set_table(&self, name: &str, value: &Bson) -> CommandResult<Bson> {
        let d = def(name).ok_or_else(|| unrecognized(name))?;
        if !d.runtime {
            return Err(err(
                ErrorCode::IllegalOperation,
                format!("not allowed to change [{name}] at runtime"),
            ));
        }
        let v = coerce(d, value)?;
        check_range(d.name, &v)?;
        let mut values = self.write();
        let was = values.insert(d.name, v).unwrap_or(Bson::Null);
        self.mirror(&values);
        Ok(was)
    }

    /// Copies the hot parameters from the table into their atomics; called with the table
    /// locked, so the atomics never lag a finished write.
    fn mirror(&self, values: &BTreeMap<&'static str, Bson>) {
        let reads = matches!(values.get("cairnReadsOnWorker"), Some(Bson::Boolean(true)));
        self.reads_on_worker.store(reads, Relaxed);
        let writes = matches!(values.get("cairnWritesOnWorker"), Some(Bson::Boolean(true)));
        self.writes_on_worker.store(writes, Relaxed);
        let limit = match values.get("internalQueryStatsRateLimit") {
            Some(Bson::Int32(i)) => i64::from(*i),
            Some(Bson::Int64(i)) => *i,
            _ => 0,
        };
        self.query_stats_rate_limit.store(limit, Relaxed);
    }

    /// `cairnReadsOnWorker`, one Relaxed load.
    pub fn reads_on_worker(&self) -> bool {
        self.reads_on_worker.load(Relaxed)
    }

    /// `cairnWritesOnWorker`, one Relaxed load.
    pub fn writes_on_worker(&self) -> bool {
        self.writes_on_worker.load(Relaxed)
    }

    /// Whether `$queryStats` records (`internalQueryStatsRateLimit` is not 0), one Relaxed load.
    pub fn query_stats_on(&self) -> bool {
        self.query_stats_rate_limit.load(Relaxed) != 0
    }

    pub fn get(&self, name: &str) -> Option<Bson> {
        if name == "featureCompatibilityVersion" {
            return Some(Bson::Document(bson::doc! { "version": "8.0" }));
        }
        if name == "logComponentVerbosity" {
            return Some(Bson::Document(crate::logging::component_verbosity()));
        }
        self.read().get(name).cloned()
    }

    pub fn all(&self) -> Document {
        let mut out = Document::new();
        for d in DEFS {
            if let Some(v) = self.get(d.name) {
                out.insert(d.name, v);
            }
        }
        out.insert(
            "logComponentVerbosity",
            crate::logging::component_verbosity(),
        );
        out
    }

    pub fn get_i64(&self, name: &str) -> i64 {
        match self.read().get(name) {
            Some(Bson::Int32(i)) => *i as i64,
            Some(Bson::Int64(i)) => *i,
            _ => 0,
        }
    }

    /// What one blocking stage may hold (`internalQueryMaxBlockingSortMemoryUsageBytes`).
    pub fn blocking_stage_bytes_max(&self) -> usize {
        usize::try_from(
            self.get_i64("internalQueryMaxBlockingSortMemoryUsageBytes")
                .max(0),
        )
        .unwrap_or(usize::MAX)
    }

    pub fn get_bool(&self, name: &str) -> bool {
        matches!(self.read().get(name), Some(Bson::Boolean(true)))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<&'static str, Bson>> {
        self.values.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<&'static str, Bson>> {
        self.values.write().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn startup_and_runtime() {
        let p = Parameters::default();
        assert_eq!(p.get_i64("ttlMonitorSleepSecs"), 60);
        p.apply_startup(&["ttlMonitorSleepSecs=5".into()]).unwrap();
        assert_eq!(p.get_i64("ttlMonitorSleepSecs"), 5);
        let was = p.set("ttlMonitorSleepSecs", &Bson::Int32(1)).unwrap();
        assert_eq!(was, Bson::Int64(5));
        assert_eq!(p.get_i64("ttlMonitorSleepSecs"), 1);
        assert!(p.apply_startup(&["nope=1".into()]).is_err());
        assert_eq!(
            p.set("nope", &Bson::Int32(1)).unwrap_err().code,
            ErrorCode::InvalidOptions
        );
        assert_eq!(
            p.set("ttlMonitorSleepSecs", &Bson::String("x".into()))
                .unwrap_err()
                .code,
            ErrorCode::BadValue
        );
    }

    #[test]
    fn hot_parameters_follow_the_table() {
        let p = Parameters::default();
        assert!(p.reads_on_worker() && p.writes_on_worker() && p.query_stats_on());
        p.set("cairnWritesOnWorker", &Bson::Boolean(false)).unwrap();
        assert!(!p.writes_on_worker() && !p.get_bool("cairnWritesOnWorker"));
        assert!(p.reads_on_worker(), "one parameter's atomic only");
        p.set("internalQueryStatsRateLimit", &Bson::Int32(0))
            .unwrap();
        p.set("cairnReadsOnWorker", &Bson::String("false".into()))
            .unwrap();
        assert!(!p.reads_on_worker() && !p.query_stats_on());
        assert!(!p.get_bool("cairnReadsOnWorker"));
        assert_eq!(p.get_i64("internalQueryStatsRateLimit"), 0);
        assert_eq!(
            p.get("internalQueryStatsRateLimit"),
            Some(Bson::Int32(0)),
            "the table still answers getParameter"
        );
        // A rejected value leaves both unchanged.
        assert!(
            p.set("cairnReadsOnWorker", &Bson::String("x".into()))
                .is_err()
        );
        assert!(!p.reads_on_worker());
        p.apply_startup(&[
            "internalQueryStatsRateLimit=5".into(),
            "cairnReadsOnWorker=true".into(),
        ])
        .unwrap();
        assert!(p.reads_on_worker() && p.query_stats_on());
        assert_eq!(p.get_i64("internalQueryStatsRateLimit"), 5);
    }
}
