//! `ServerState`: what every connection shares — configuration, parameters, counters reported by
//! `serverStatus`, the shutdown signal, and (once opened) the storage engine. Counters are atomics
//! so the request path never takes a lock to count.

use crate::config::Config;
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
    shutdown_tx: watch::Sender<bool>,
}

impl ServerState {
    pub fn new(config: Config, argv: Vec<String>, log_ring: Arc<LogRing>) -> Result<Self, String> {
        let params = Parameters::default();
        params.apply_startup(&config.set_parameter)?;
        let slowms = config.slowms;
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
            shutdown_tx: watch::channel(false).0,
        })
    }

    pub fn request_shutdown(&self) {
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
