//! Writers on their way to group commit. A `PendingWriter` is taken when the server starts a
//! durable write (before parsing and the hop to the storage pool) and given up when that write
//! asks for its sync (`PendingWriter::sync_if_idle`) or ends without writing (drop). While any
//! is outstanding, a writer does not lead a sync of its own and the commit thread holds a
//! requested sync back for a bounded time, so that one fdatasync covers the writers about to
//! ask rather than only the first of them. A pending writer never makes anything durable or
//! not: it only moves a sync later, by at most the hold.

use std::sync::Arc;

use super::{Commit, Ticket};
use crate::error::Result;

/// A durable write on its way (see the module comment); dropping it without asking releases it.
pub struct PendingWriter {
    commit: Arc<Commit>,
    arrived: bool,
}

impl Commit {
    pub(crate) fn pending_writer(self: &Arc<Commit>) -> PendingWriter {
        self.state().pending += 1;
        PendingWriter {
            commit: self.clone(),
            arrived: false,
        }
    }
}

impl PendingWriter {
    /// `Ticket::sync_if_idle` for this writer's write: it is no longer on its way, and when
    /// it is the last one and no sync is in flight, it syncs on this thread for everyone.
    pub fn sync_if_idle(mut self, ticket: &Ticket) -> Result<()> {
        self.arrived = true;
        self.commit.sync_if_idle(ticket, true)
    }
}

impl Drop for PendingWriter {
    fn drop(&mut self) {
        if self.arrived {
            return;
        }
        let mut st = self.commit.state();
        st.pending = st.pending.saturating_sub(1);
        // The last writer on the way gave up: a held sync may start now.
        self.commit.ask(&mut st, 0);
    }
}

impl std::fmt::Debug for PendingWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingWriter")
            .field("arrived", &self.arrived)
            .finish()
    }
}
