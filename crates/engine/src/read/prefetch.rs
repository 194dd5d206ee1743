//! Read-ahead for long scans: while a scan works through block `i` of an
//! HFile, worker threads verify and decompress the next blocks of its range
//! into the block cache, so a cold scan uses every core. Best effort: a
//! full queue drops requests, an error is left for the scan to meet when it
//! reads that block itself (the cache deduplicates in-flight loads), and a
//! request whose scan has ended (stopped early, or done) is skipped: a
//! finished read leaves no decoding behind to compete with the next ones.

use crate::hfile::columns::{BlockKeys, FieldSlot};
use crate::hfile::HFileReader;
use crate::util::sync::LockExt;
use crossbeam_channel::{bounded, Sender, TrySendError};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;

/// Blocks requested ahead of the one a scan is reading.
pub const PREFETCH_BLOCKS_AHEAD: usize = 8;
/// Requests queued at most.
const QUEUE_REQUESTS_MAX: usize = 256;

/// One block to load: the file, the block's index, the fields to decode
/// as columns (`None`: the block's cells), and its scan (gone: skip it).
type Request = (Arc<HFileReader>, usize, Option<Columns>, Weak<()>);

/// Held by a scan while it runs; its requests are skipped once it is
/// dropped.
pub type ScanAlive = Arc<()>;

/// Whether a block's fields are wanted, seen its keys.
pub type Wanted = Arc<dyn Fn(&BlockKeys) -> bool + Send + Sync>;

/// What to decode of a block as columns.
pub struct Columns {
    pub slots: Arc<[FieldSlot]>,
    /// Sequence numbers too.
    pub seq: bool,
    /// Decode the fields only of a block this says yes to (all if `None`).
    pub wanted: Option<Wanted>,
}

/// Handle to the read-ahead workers; [`Prefetcher::stop`] ends and joins
/// them (the store does so when it closes, so no worker still holds one
/// of its files after `close`).
pub struct Prefetcher {
    tx: Mutex<Option<Sender<Request>>>,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

impl Prefetcher {
    /// Start `workers` threads (at least one).
    pub fn start(workers: usize) -> std::io::Result<Self> {
        let (tx, rx) = bounded::<Request>(QUEUE_REQUESTS_MAX);
        let mut handles = Vec::new();
        for i in 0..workers.max(1) {
            let rx = rx.clone();
            let h = std::thread::Builder::new()
                .name(format!("telestore-readahead-{i}"))
                .spawn(move || {
                    while let Ok((file, block, slots, alive)) = rx.recv() {
                        if alive.strong_count() == 0 {
                            continue;
                        }
                        let _ = match slots {
                            None => file.block(block).map(drop),
                            Some(c) => {
                                let all = |_: &BlockKeys| true;
                                let wanted = c.wanted.as_deref().unwrap_or(&all);
                                file.block_columns_if(block, &c.slots, c.seq, wanted)
                                    .map(drop)
                            }
                        };
                    }
                })?;
            handles.push(h);
        }
        Ok(Prefetcher {
            tx: Mutex::new(Some(tx)),
            workers: Mutex::new(handles),
        })
    }

    /// Stop taking requests, let the workers finish what is queued (at
    /// most [`QUEUE_REQUESTS_MAX`] block loads) and wait for them.
    pub fn stop(&self) {
        drop(self.tx.lock_or_recover().take());
        let handles = std::mem::take(&mut *self.workers.lock_or_recover());
        for h in handles {
            let _ = h.join();
        }
    }

    /// Ask for `block` of `file` to be loaded into the cache: its cells,
    /// or (with `columns`) its keys and those fields as columns; skipped
    /// if `scan` is dropped before a worker gets to it.
    pub fn request(
        &self,
        file: &Arc<HFileReader>,
        block: usize,
        columns: Option<Columns>,
        scan: &ScanAlive,
    ) {
        let tx = self.tx.lock_or_recover();
        if let Some(tx) = tx.as_ref() {
            match tx.try_send((file.clone(), block, columns, Arc::downgrade(scan))) {
                Ok(()) | Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {}
            }
        }
    }
}
