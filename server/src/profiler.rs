//! The database profiler's settings: a level per database (0 off, 1 slow operations or those
//! the filter selects, 2 everything) with an optional filter, and the server-wide sample rate
//! (`slowms` is the server's one slow-operation threshold, `ServerState::slowms`). The entries
//! themselves are written by `commands::profile`. Settings live in memory, as in mongod, where
//! they reset on restart unless given at start-up: `--profile N` is every database's level
//! until `profile` sets its own, `--slowOpSampleRate` the first sample rate.

use bson::Document;
use std::collections::HashMap;
use std::sync::RwLock;

/// Where a database keeps its profile entries.
pub const PROFILE_COLLECTION: &str = "system.profile";
/// The capped size of a `system.profile` the profiler creates (mongod's default, 1 MB).
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
    /// The level of a database `profile` never set (`--profile`).
    default_level: i32,
    /// `sampleRate` as parts per million (1.0 = 1_000_000).
    sample_rate_ppm: std::sync::atomic::AtomicU32,
}

impl Default for Profiler {
    fn default() -> Self {
        Profiler::new(0, 1.0)
    }
}

impl Profiler {
    /// A profiler whose databases start at `default_level` (mongod's `--profile`) with the
    /// sample rate `sample_rate` (`--slowOpSampleRate`).
    pub fn new(default_level: i32, sample_rate: f64) -> Profiler {
        let p = Profiler {
            dbs: RwLock::new(HashMap::new()),
            default_level,
            sample_rate_ppm: std::sync::atomic::AtomicU32::new(1_000_000),
        };
        p.set_sample_rate(sample_rate);
        p
    }

    pub fn get(&self, db: &str) -> Settings {
        self.dbs
            .read()
            .ok()
            .and_then(|m| m.get(db).cloned())
            .unwrap_or(Settings {
                level: self.default_level,
                filter: None,
            })
    }

    /// The level of `db` without cloning its filter (checked on every command).
    pub fn level(&self, db: &str) -> i32 {
        self.dbs
            .read()
            .ok()
            .and_then(|m| m.get(db).map(|s| s.level))
            .unwrap_or(self.default_level)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_up_level_and_rate_until_profile_sets_them() {
        let p = Profiler::new(2, 0.25);
        assert_eq!(p.level("any"), 2);
        assert_eq!(p.get("any").level, 2);
        assert_eq!(p.sample_rate(), 0.25);
        p.set(
            "a",
            Settings {
                level: 0,
                filter: None,
            },
        );
        assert_eq!(p.level("a"), 0);
        assert_eq!(p.level("b"), 2);
        assert_eq!(Profiler::default().level("a"), 0);
    }
}
