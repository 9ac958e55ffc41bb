//! `ServerState`: what every connection shares — configuration, parameters, counters reported by
//! `serverStatus`, the shutdown signal, and (once opened) the storage engine. Counters are atomics
//! so the request path never takes a lock to count.

use crate::catalog::Catalog;
use crate::config::Config;
use crate::cursors::CursorRegistry;
use crate::logging::LogRing;
use crate::parameters::Parameters;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;
use tokio::sync::watch;

#[derive(Default)]
pub struct OpCounters {
    pub insert: AtomicU64,
    pub query: AtomicU64,
    pub update: AtomicU64,
    pub delete: AtomicU64,
    pub getmore: AtomicU64,
    pub command: AtomicU64,
}

#[derive(Default)]
pub struct NetworkCounters {
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    pub num_requests: AtomicU64,
}

#[derive(Default)]
pub struct TtlCounters {
    pub passes: AtomicU64,
    pub deleted_documents: AtomicU64,
}

/// Partial indexes index only the documents their filter matches: the engine asks the server's
/// matcher. A filter that no longer parses (it was valid when the index was created) matches
/// nothing rather than everything.
fn partial_filter_compiler() -> storage::FilterCompiler {
    Arc::new(|spec: &bson::Document| -> storage::Predicate {
        match crate::query::matcher::Filter::parse(spec) {
            Ok(f) => Box::new(move |doc: &bson::RawDocument| f.matches(doc)),
            Err(_) => Box::new(|_: &bson::RawDocument| false),
        }
    })
}

/// Collated indexes keep strings as ICU sort-key strings (`Collator::key_string`); the engine
/// asks for the mapping of each such index when it opens or creates it.
pub fn collation_compiler() -> storage::CollationCompiler {
    Arc::new(|spec: &bson::Document| {
        let compiled = crate::query::collation::Spec::parse(spec)
            .and_then(|s| crate::query::collator::for_spec(&s))
            .map_err(|e| e.message)?;
        let collator = compiled.ok_or_else(|| "the simple collation maps nothing".to_string())?;
        Ok(storage::keys::KeyCollation(Arc::new(move |s: &str| {
            collator.key_string(s)
        })))
    })
}

#[derive(Default)]
pub struct ConnectionCounters {
    pub current: AtomicUsize,
    pub active: AtomicUsize,
    pub total_created: AtomicU64,
}

pub struct ServerState {
    pub config: Config,
    pub argv: Vec<String>,
    pub params: Parameters,
    pub log_ring: Arc<LogRing>,
    pub started: Instant,
    /// `topologyVersion.processId`: new for every process start.
    pub process_id: bson::oid::ObjectId,
    pub next_connection_id: AtomicI64,
    pub connections: ConnectionCounters,
    pub opcounters: OpCounters,
    pub network: NetworkCounters,
    pub slowms: AtomicI64,
    pub catalog: Catalog,
    pub cursors: CursorRegistry,
    pub ttl: TtlCounters,
    pub ops: crate::ops::OpRegistry,
    /// Authentication: `--auth`, the generation of users and roles, unauthenticated count.
    pub auth: crate::auth::AuthState,
    /// `--tlsMode` and the TLS acceptor.
    pub tls: crate::tls::Tls,
    /// The blocking pool's gauges (`crate::offload`).
    pub pool: PoolStats,
    /// Test-only fail points (`configureFailPoint`).
    pub failpoints: crate::failpoints::FailPoints,
    /// `--replSet`: the one-member replica set's state (None: standalone).
    pub repl: Option<crate::repl::ReplState>,
    /// Open change streams and oplog cursors.
    pub streams: crate::streams::StreamRegistry,
    /// Logical sessions: one registry of every session (`crate::sessions::registry`) with the
    /// retryable-write and transaction state of each (`crate::sessions`).
    pub sessions: Arc<crate::sessions::SessionTable>,
    /// mongod 8.0's query settings (`crate::query_settings`), loaded at start-up.
    pub query_settings: crate::query_settings::QuerySettings,
    /// `$queryStats`' per-shape statistics (`crate::query_stats`).
    pub query_stats: crate::query_stats::QueryStats,
    /// Multi-document transactions' document locks and counters (`crate::txn`).
    pub txns: Arc<crate::txn::Registry>,
    /// `--logpath`'s writer, for `logRotate` and SIGUSR1 (None in unit tests).
    pub log_output: Option<Arc<crate::logging::LogOutput>>,
    /// The database profiler's settings.
    pub profiler: crate::profiler::Profiler,
    shutdown_tx: watch::Sender<bool>,
}

impl ServerState {
    pub fn new(config: Config, argv: Vec<String>, log_ring: Arc<LogRing>) -> Result<Self, String> {
        let params = Parameters::default();
        params.apply_startup(&config.set_parameter)?;
        // -v counts as logLevel unless --setParameter logLevel says otherwise.
        let level_given = config
            .set_parameter
            .iter()
            .any(|p| p.starts_with("logLevel="));
        let level = if level_given {
            params.get_i64("logLevel")
        } else {
            config.verbosity as i64
        };
        params
            .set("logLevel", &bson::Bson::Int32(level.clamp(0, 5) as i32))
            .map_err(|e| e.message)?;
        let opts = storage::EngineOptions {
            journal_commit_interval_ms: config.journal_commit_interval_ms,
            partial_filter_compiler: Some(partial_filter_compiler()),
            collation_compiler: Some(collation_compiler()),
            cache_size_bytes: config.cache_size_bytes(crate::sysinfo::memory_bytes()),
            checkpoint_interval_ms: config.checkpoint_interval_ms(),
            checkpoint_log_bytes: config.checkpoint_log_bytes(),
            history_bytes: config
                .repl_set
                .as_ref()
                .map(|_| config.oplog_size_mb * 1024 * 1024),
            ..storage::EngineOptions::default()
        };
        let engine = storage::Engine::open(&config.dbpath, opts).map_err(|e| e.to_string())?;
        let catalog = Catalog::open(engine, config.journal_commit_interval_ms.is_some());
        let query_settings = crate::query_settings::QuerySettings::default();
        query_settings.load(catalog.engine());
        let slowms = config.slowms;
        let (profile_level, sample_rate) = (config.profile, config.slow_op_sample_rate);
        let tls = crate::tls::Tls::from_config(&config)?;
        crate::query::js::set_enabled(!config.noscripting);
        let auth = crate::auth::AuthState::new(config.auth);
        let repl = config.repl_set.clone().map(crate::repl::ReplState::new);
        Ok(ServerState {
            config,
            argv,
            params,
            log_ring,
            started: Instant::now(),
            process_id: bson::oid::ObjectId::new(),
            next_connection_id: AtomicI64::new(1),
            connections: ConnectionCounters::default(),
            opcounters: OpCounters::default(),
            network: NetworkCounters::default(),
            slowms: AtomicI64::new(slowms),
            catalog,
            cursors: CursorRegistry::default(),
            ttl: TtlCounters::default(),
            ops: crate::ops::OpRegistry::default(),
            auth,
            tls,
            pool: PoolStats::default(),
            failpoints: crate::failpoints::FailPoints::default(),
            repl,
            streams: crate::streams::StreamRegistry::default(),
            sessions: Arc::default(),
            query_settings,
            query_stats: Default::default(),
            txns: Arc::default(),
            log_output: None,
            profiler: crate::profiler::Profiler::new(profile_level, sample_rate),
            shutdown_tx: watch::channel(false).0,
        })
    }

    /// Stop accepting and interrupt every running operation (InterruptedAtShutdown).
    pub fn request_shutdown(&self) {
        self.ops.interrupt_all();
        self.shutdown_tx.send_replace(true);
    }

    pub fn shutdown_requested(&self) -> watch::Receiver<bool> {
        self.shutdown_tx.subscribe()
    }

    pub fn is_shutting_down(&self) -> bool {
        *self.shutdown_tx.borrow()
    }

    pub fn connections_available(&self) -> usize {
        self.config
            .max_conns
            .saturating_sub(self.connections.current.load(Ordering::Relaxed))
    }
}

/// Gauges and counters of the pool (`serverStatus.metrics.storageJobs`), which
/// `crate::offload` keeps.
#[derive(Default)]
pub struct PoolStats {
    pub queued: AtomicU64,
    pub running: AtomicU64,
    /// Jobs dropped unstarted because their client had gone.
    pub skipped_client_gone: AtomicU64,
    /// Calls answered on the async worker from cached pages (`crate::offload::run_tried`).
    pub served_cached: AtomicU64,
    /// Calls tried there that would have blocked (or ran too long) and went to the pool.
    pub moved_to_pool: AtomicU64,
    /// Writes done on the async worker up to their log append (`crate::offload::run_tried`).
    pub writes_on_worker: AtomicU64,
    /// Writes tried there that would have blocked and went to the pool.
    pub writes_moved_to_pool: AtomicU64,
}
