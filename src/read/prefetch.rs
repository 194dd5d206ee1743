//! Read-ahead for long scans: while a scan works through block `i` of an
//! HFile, worker threads verify and decompress the next blocks of its range
//! into the block cache, so a cold scan uses every core. Best effort: a
//! full queue drops requests, an error is left for the scan to meet when it
//! reads that block itself (the cache deduplicates in-flight loads).

use crate::hfile::HFileReader;
use crossbeam_channel::{bounded, Sender, TrySendError};
use std::sync::Arc;

/// Blocks requested ahead of the one a scan is reading.
pub const PREFETCH_BLOCKS_AHEAD: usize = 8;
/// Requests queued at most.
const QUEUE_REQUESTS_MAX: usize = 256;

/// Handle to the read-ahead workers; they stop when it is dropped.
pub struct Prefetcher {
    tx: Sender<(Arc<HFileReader>, usize)>,
}

impl Prefetcher {
    /// Start `workers` threads (at least one).
    pub fn start(workers: usize) -> std::io::Result<Self> {
        let (tx, rx) = bounded::<(Arc<HFileReader>, usize)>(QUEUE_REQUESTS_MAX);
        for i in 0..workers.max(1) {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("telestore-readahead-{i}"))
                .spawn(move || {
                    while let Ok((file, block)) = rx.recv() {
                        let _ = file.block(block);
                    }
                })?;
        }
        Ok(Prefetcher { tx })
    }

    /// Ask for `block` of `file` to be loaded into the cache.
    pub fn request(&self, file: &Arc<HFileReader>, block: usize) {
        match self.tx.try_send((file.clone(), block)) {
            Ok(()) | Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {}
        }
    }
}
