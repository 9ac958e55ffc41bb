//! What a stage may use while it runs (`RunCx`: the environment, the memory bound and whether
//! it may spill) and the estimates of the memory values hold, for blocking stages' bound.

use super::PipelineEnv;
use super::codes::{self, perr};
use crate::error::CommandResult;
use bson::{Bson, Document};

/// What a stage may use while running.
#[derive(Clone, Copy)]
pub struct RunCx<'a> {
    pub env: &'a dyn PipelineEnv,
    pub allow_disk_use: bool,
    pub memory_max_bytes: usize,
}

impl RunCx<'_> {
    /// Fails with mongod's 292 once `used_bytes` passes the bound and disk use is not allowed,
    /// and gives the environment its chance to interrupt (blocking stages call this per document).
    pub fn charge(&self, used_bytes: usize, stage: &str) -> CommandResult<()> {
        self.env.check_interrupt()?;
        if used_bytes > self.memory_max_bytes && !self.allow_disk_use {
            return Err(perr(
                codes::MEMORY_NO_DISK_USE,
                format!(
                    "{stage} exceeded memory limit of {} bytes, but did not opt in to external sorting.",
                    self.memory_max_bytes
                ),
            ));
        }
        Ok(())
    }
}

/// An estimate of the memory a value holds, for the blocking-stage bound.
pub fn value_size_bytes(v: &Bson) -> usize {
    match v {
        Bson::String(s) => s.len() + 16,
        Bson::Document(d) => doc_size_bytes(d),
        Bson::Array(items) => items.iter().map(value_size_bytes).sum::<usize>() + 16,
        Bson::Binary(b) => b.bytes.len() + 16,
        _ => 16,
    }
}

pub fn doc_size_bytes(d: &Document) -> usize {
    d.iter()
        .map(|(k, v)| k.len() + value_size_bytes(v))
        .sum::<usize>()
        + 16
}
