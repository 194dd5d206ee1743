//! What the write path shares: the WAL writer, the commit thread's queue,
//! and the gate that orders acknowledgement and visibility
//! (`visibility.rs`).

use super::commit::Msg;
use super::visibility::SeqGate;
use crate::util::sync::LockExt;
use crate::wal::WalWriter;
use crossbeam_channel::Sender;
use std::sync::{Mutex, MutexGuard};

/// The WAL, the commit queue and the sequence gate.
pub(crate) struct WritePath {
    wal: Mutex<WalWriter>,
    /// The commit thread's queue (the monitor asks it to unpin the WAL).
    pub commit_tx: Sender<Msg>,
    /// Sequence numbers acknowledged and applied; reads snapshot the
    /// applied one after waiting for what was acknowledged.
    pub gate: SeqGate,
}

impl WritePath {
    pub fn new(wal: WalWriter, commit_tx: Sender<Msg>, last_seq: u64) -> Self {
        WritePath {
            wal: Mutex::new(wal),
            commit_tx,
            gate: SeqGate::new(last_seq),
        }
    }

    pub fn wal(&self) -> MutexGuard<'_, WalWriter> {
        self.wal.lock_or_recover()
    }

    /// Ask the commit thread to free the oldest WAL segment when more
    /// than `segments_max` are live.
    pub fn request_unpin(&self, segments_max: usize) {
        if self.wal().segment_count() > segments_max {
            let _ = self.commit_tx.send(Msg::Unpin);
        }
    }
}
