//! The database profiler's settings: a level per database (0 off, 1 slow operations or those
//! the filter selects, 2 everything) with an optional filter, and the server-wide sample rate
//! (`slowms` is the server's one slow-operation threshold, `ServerState::slowms`). The entries
//! themselves are written by `commands::profile`. Settings live in memory, as in mongod, where
//! they reset on restart unless given at start-up.

use bson::Document;
use std::collections::HashMap;
use std::sync::RwLock;

/// Where a database keeps its profile entries.
pub const PROFILE_COLLECTION: &str = "system.profile";
/// Bytes of entries a `system.profile` keeps before the oldest are trimmed (mongod's default
/// capped size for it). The trimming is ours until capped collections can hold it.
pub const PROFILE_BYTES_MAX: u64 = 1024 * 1024;

/// One database's profiling.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub level: i32,
    pub filter: Option<Document>,
}

#[derive(Debug)]
pub struct Profiler {
    dbs: RwLock<HashMap<String, Settings>>,
    /// `sampleRate` as parts per million (1.0 = 1_000_000).
    sample_rate_ppm: std::sync::atomic::AtomicU32,
}

impl Default for Profiler {
    fn default() -> Self {
        Profiler {
            dbs: RwLock::new(HashMap::new()),
            sample_rate_ppm: std::sync::atomic::AtomicU32::new(1_000_000),
        }
    }
}

impl Profiler {
    pub fn get(&self, db: &str) -> Settings {
        self.dbs
            .read()
            .ok()
            .and_then(|m| m.get(db).cloned())
            .unwrap_or_default()
    }

    /// The level of `db` without cloning its filter (checked on every command).
    pub fn level(&self, db: &str) -> i32 {
        self.dbs
            .read()
            .ok()
            .and_then(|m| m.get(db).map(|s| s.level))
            .unwrap_or(0)
    }

    pub fn set(&self, db: &str, settings: Settings) {
        if let Ok(mut m) = self.dbs.write() {
            m.insert(db.to_string(), settings);
        }
    }

    pub fn sample_rate(&self) -> f64 {
        f64::from(
            self.sample_rate_ppm
                .load(std::sync::atomic::Ordering::Relaxed),
        ) / 1e6
    }

    pub fn set_sample_rate(&self, rate: f64) {
        let ppm = (rate.clamp(0.0, 1.0) * 1e6).round() as u32;
        self.sample_rate_ppm
            .store(ppm, std::sync::atomic::Ordering::Relaxed);
    }
}
