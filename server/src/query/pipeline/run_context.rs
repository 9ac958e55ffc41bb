//! What a stage may use while it runs (`RunCx`: the environment, the memory bound and whether
//! it may spill) and the estimates of the memory values hold, for blocking stages' bound.

use super::codes::{self, perr};
use super::{DocStream, PipelineEnv};
use crate::error::CommandResult;
use crate::query::budget::{self, Held};
use bson::{Bson, Document};

/// What a stage may use while running.
#[derive(Clone, Copy)]
pub struct RunCx<'a> {
    pub env: &'a dyn PipelineEnv,
    pub allow_disk_use: bool,
    pub memory_max_bytes: usize,
}

impl RunCx<'_> {
    /// Records that a stage which cannot spill now holds `used_bytes` in `held`, and gives the
    /// environment its chance to interrupt (blocking stages call this per document). Fails with
    /// mongod's 292 past the per-stage bound without `allowDiskUse`, and with 146 when the
    /// server's budget for all operations together ([`crate::query::budget`]) has no room.
    pub fn charge(&self, held: &mut Held, used_bytes: usize, stage: &str) -> CommandResult<()> {
        // A stage that cannot spill goes on past the per-stage bound with `allowDiskUse` (as
        // before this budget existed), but not past the server's budget.
        if self.charge_spillable(held, used_bytes, stage)? && held.bytes() != used_bytes {
            return Err(budget::exhausted(stage, used_bytes));
        }
        Ok(())
    }

    /// As [`RunCx::charge`] for a stage that can spill: true when it must spill now (with
    /// `allowDiskUse`, past the per-stage bound or when the server's budget has no room).
    pub fn charge_spillable(
        &self,
        held: &mut Held,
        used_bytes: usize,
        stage: &str,
    ) -> CommandResult<bool> {
        self.env.check_interrupt()?;
        let fits = held.set(used_bytes);
        if used_bytes > self.memory_max_bytes {
            if !self.allow_disk_use {
                return Err(perr(
                    codes::MEMORY_NO_DISK_USE,
                    format!(
                        "{stage} exceeded memory limit of {} bytes, but did not opt in to external sorting.",
                        self.memory_max_bytes
                    ),
                ));
            }
            return Ok(true);
        }
        if !fits {
            if !self.allow_disk_use {
                return Err(budget::exhausted(stage, used_bytes));
            }
            return Ok(true);
        }
        Ok(false)
    }
}

/// Collects a stream for a stage that needs all of it at once, charging its size as it grows;
/// the charge is released when the returned [`Held`] is dropped.
pub fn collect(
    input: DocStream<'_>,
    cx: RunCx<'_>,
    stage: &str,
) -> CommandResult<(Vec<Document>, Held)> {
    let mut docs = Vec::new();
    let mut held = Held::global();
    let mut used_bytes = 0usize;
    for item in input {
        let d = item?;
        used_bytes += doc_size_bytes(&d);
        cx.charge(&mut held, used_bytes, stage)?;
        docs.push(d);
    }
    Ok((docs, held))
}

/// A stream that keeps `held` charged until it is dropped (a blocking stage's output holds the
/// memory its charge stands for until the next stage has read it).
pub fn holding<'a>(input: DocStream<'a>, held: Held) -> DocStream<'a> {
    Box::new(input.inspect(move |_| {
        let _ = &held;
    }))
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
