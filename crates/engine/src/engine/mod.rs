//! The engine: open and recover a data directory, route writes through the
//! commit thread, flush in the background, serve reads.
//!
//! Directory layout:
//! ```text
//! <dir>/LOCK                      exclusive lock (flock) while open
//! <dir>/MANIFEST                  catalog + live files (formats/manifest.md)
//! <dir>/wal/<n:016>.wal           WAL segments (formats/wal.md)
//! <dir>/tables/<id>/<f:016>.hfile HFiles (formats/hfile.md)
//! ```

mod apply;
mod background;
mod budget;
mod catalog;
mod commit;
mod compact;
mod counters;
pub(crate) mod devices;
mod flush;
mod latest;
pub use latest::LatestCacheStats;
mod open;
mod options;
mod pacing;
mod poison;
mod reads;
mod region;
mod regions;
mod split;
mod syncer;
mod table;
mod threads;
pub mod verify;
mod visibility;
mod writepath;

pub use compact::Outcome as CompactionOutcome;
pub use counters::EngineMetrics;
pub use devices::{check_device_text, tag_conflict, DEVICE_TEXT_MAX, REGISTRY_ID_BASE};
pub use options::{Durability, Options};
pub use reads::{KeySpan, ReadStats};
#[doc(hidden)]
pub use region::{Region, RegionVersion};
pub use regions::RegionInfo;
#[doc(hidden)]
pub use table::Table;

use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::ids::{RegionId, SeqNo, TableId};
use crate::io::{BackendRef, IoKind};
use crate::key::DeviceId;
use crate::manifest::{Record, RegionDef};
use crate::schema::{Batch, BlockEncoding, TableSchema};
use crate::util::sync::LockExt;
use commit::{Msg, Op, WriteReq};
use crossbeam_channel::{bounded, Sender};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// State shared by the store handle and its threads, by role: where the
/// store lives and how it does I/O (the first four fields), the catalog,
/// the write path and its stop switch, what the background threads
/// share, and the counters.
pub struct Shared {
    pub(crate) dir: PathBuf,
    pub(crate) backend: BackendRef,
    pub(crate) opts: Options,
    pub(crate) cache: Arc<BlockCache>,
    pub(crate) catalog: catalog::Catalog,
    pub(crate) write: writepath::WritePath,
    pub(crate) poison: poison::Poison,
    pub(crate) background: background::Background,
    pub(crate) counters: counters::Counters,
    /// What opening found and dropped at the WAL's end (its last entry
    /// torn or damaged), in words; shown by `/health`.
    pub(crate) wal_tail: Option<String>,
    pub(crate) locks: DirLocks,
}

/// The flock locks of the data directory and of a WAL directory outside it.
pub(crate) struct DirLocks {
    pub dir: std::fs::File,
    pub wal: Option<std::fs::File>,
}

impl DirLocks {
    /// Release both now, not when the last handle on the lock files
    /// closes: a child process forked meanwhile by any thread holds a
    /// copy until its exec, and `flock` locks belong to the open file, so
    /// an open right after `close` would fail.
    fn release(&self) {
        let _ = self.dir.unlock();
        if let Some(l) = &self.wal {
            let _ = l.unlock();
        }
    }
}

impl Shared {
    /// `Err(ReadOnly)` on a read-only store: `what` would change it.
    pub(crate) fn check_writable(&self, what: &'static str) -> Result<()> {
        if self.opts.read_only {
            // Stopped for a reason (a daemon serving reads on a full
            // disk): that reason is the better answer.
            self.poison.check()?;
            return Err(Error::ReadOnly {
                what,
                dir: self.dir.clone(),
            });
        }
        Ok(())
    }

    /// Append to the manifest, stopping the write path on an I/O failure
    /// (`Catalog::append`).
    pub(crate) fn append(&self, records: &[Record]) -> Result<()> {
        self.catalog.append(&self.poison, records)
    }

    /// Per table, the sequence number up to which every region's edits
    /// are in HFiles (a WAL segment retires when it holds nothing newer).
    pub(crate) fn durable_seqs(&self) -> HashMap<TableId, SeqNo> {
        let applied = self.write.gate.applied();
        self.catalog
            .tables()
            .iter()
            .map(|t| (t.id, SeqNo(t.durable_seq(applied))))
            .collect()
    }

    /// Delete WAL segments whose every edit has been flushed.
    pub(crate) fn retire_wal(&self) -> Result<()> {
        let durable = self.durable_seqs();
        let f = move |t: TableId| durable.get(&t).copied().unwrap_or_default();
        // Unlinks and the directory fsync run outside the WAL lock: the
        // commit thread appends meanwhile.
        let (segs, (backend, dir)) = {
            let mut w = self.write.wal();
            (w.take_retirable(&f), w.files())
        };
        let outcome = crate::wal::delete_segments(&*backend, &dir, segs);
        self.write.wal().delete_or_restore(outcome)?;
        Ok(())
    }

    /// Memstore bytes over every region, and the region with the largest
    /// active memstore.
    pub(crate) fn memstore_usage(&self) -> MemUsage {
        let mut u = MemUsage::default();
        let mut top = 0;
        for t in self.catalog.tables() {
            for r in t.regions().iter() {
                let (a, f, n) = r.memstore_load();
                u.active += a;
                u.frozen += f;
                u.frozen_count += n;
                if a > top {
                    top = a;
                    u.largest = Some((t.id, r.clone()));
                }
            }
        }
        u
    }
}

/// Memstore memory across the store.
#[derive(Default)]
pub(crate) struct MemUsage {
    pub active: usize,
    pub frozen: usize,
    /// Frozen memstores (being flushed or waiting for the flusher).
    pub frozen_count: usize,
    pub largest: Option<(TableId, Arc<Region>)>,
}

impl MemUsage {
    pub fn total(&self) -> usize {
        self.active + self.frozen
    }
    /// Writers wait above the global limit.
    pub fn over_limit(&self, o: &Options) -> bool {
        self.total() > o.memstore_global_bytes
    }
    /// From three quarters of the global limit the largest active memstore
    /// is handed to the flusher — one at a time, as HBase's flusher takes
    /// regions: while one frozen memstore is flushing and another waits,
    /// freezing more would only make smaller files.
    pub fn wants_flush(&self, o: &Options) -> bool {
        self.total() >= o.memstore_global_bytes / 4 * 3 && self.frozen_count < 2
    }
}

/// Acknowledgement of a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteAck {
    /// Sequence number of the first row; rows are numbered consecutively.
    pub first_seq: u64,
    /// Rows written.
    pub rows: u64,
    /// The durability the write was acknowledged with.
    pub durability: Durability,
}

/// Counters for monitoring and tests.
#[derive(Clone, Debug, Default)]
pub struct StoreStats {
    /// The I/O backend in use.
    pub io: Option<IoKind>,
    /// Live WAL segments.
    pub wal_segments: usize,
    /// Live HFiles, all tables.
    pub hfiles: usize,
    /// Bytes in live HFiles.
    pub hfile_bytes: u64,
    /// Bytes in memstores (active and frozen).
    pub memstore_bytes: usize,
    /// Regions over all tables.
    pub regions: usize,
    /// Writes that waited in a write stall, and writes refused with `Busy`.
    pub stalled_writes: u64,
    /// Writes refused with `Busy` since open.
    pub busy_writes: u64,
    /// Writes delayed for compaction debt (`Options::compaction_debt_slowdown_bytes`).
    pub slowed_writes: u64,
    /// The store's compaction debt as last refreshed (every second and
    /// after each flush and compaction).
    pub compaction_debt_bytes: u64,
    /// The background write limiter's rate now (0: no limiter), the
    /// bytes it let through and the time compactions waited for it.
    pub background_write_rate_bytes_per_sec: u64,
    /// Bytes flushes and compactions wrote since open.
    pub background_write_bytes: u64,
    /// Milliseconds they waited for the background write limiter.
    pub background_write_wait_ms: u64,
    /// New HFiles handed to the kernel's read-ahead
    /// (`Options::readahead_new_files_bytes`).
    pub files_read_ahead: u64,
    /// Rows of put batches applied since the store opened (what WAL
    /// replay restored is not counted).
    pub rows_written: u64,
    /// Memstores frozen and waiting for their flush, over all regions.
    pub frozen_memstores: usize,
    /// The limits of `Options`: all memstores together, the block cache.
    pub memstore_limit_bytes: usize,
    /// The block cache's capacity.
    pub block_cache_capacity_bytes: u64,
    /// The block cache's hits, misses and size.
    pub cache: crate::cache::CacheStats,
    /// The latest-row caches of all tables (`Options::latest_cache_devices`).
    pub latest_cache: LatestCacheStats,
}

/// An open store. Dropping it shuts down cleanly (WAL synced).
pub struct Store {
    shared: Arc<Shared>,
    commit_tx: Sender<Msg>,
    /// Dropped to stop the monitor thread.
    monitor_tx: Option<Sender<()>>,
    /// `None` once stopped.
    threads: Option<threads::Threads>,
}

impl Store {
    /// Open (creating if needed) the store in `dir`, recovering from the
    /// WAL.
    pub fn open(dir: impl AsRef<Path>, opts: Options) -> Result<Store> {
        open::open(dir.as_ref(), opts)
    }

    /// The store's data directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// "Now" on the store's clock (ms since the epoch).
    pub fn now_ms(&self) -> i64 {
        self.shared.opts.clock.now_ms()
    }

    /// `Ok` while the write path works; the error that stopped it
    /// otherwise.
    pub fn health(&self) -> Result<()> {
        self.shared.poison.check()
    }

    /// What the last open found wrong but could go past: the WAL's last
    /// entry torn or damaged (and dropped). Empty when nothing was.
    pub fn warnings(&self) -> Vec<String> {
        self.shared.wal_tail.iter().cloned().collect()
    }

    /// Stop the write path for `cause`: every later write is refused and
    /// [`Store::health`] says why (a daemon that opened a store read-only
    /// because the disk was full serves reads, saying so).
    pub fn stop_writes(&self, cause: &Error) {
        let _ = self.shared.poison.stop(cause);
    }

    /// The engine's latency histograms.
    pub fn metrics(&self) -> EngineMetrics {
        self.shared.counters.metrics.clone()
    }

    /// The I/O backend in use.
    pub fn io_kind(&self) -> IoKind {
        self.shared.backend.kind()
    }

    /// Create a table. Creating an existing table with the identical schema
    /// returns its id; a different schema is [`Error::SchemaConflict`].
    pub fn create_table(&self, schema: TableSchema) -> Result<u32> {
        self.shared.check_writable("create table")?;
        schema.validate()?;
        let mut tables = self.shared.catalog.tables_mut();
        if let Some(t) = tables.get(&schema.name) {
            return match t.current_schema().diff(&schema) {
                None => Ok(t.id.0),
                Some(detail) => Err(Error::SchemaConflict {
                    name: schema.name.clone(),
                    detail,
                }),
            };
        }
        let mut m = self.shared.catalog.manifest();
        let id = m.state().tables.keys().next_back().map_or(1, |k| k + 1);
        let dir = flush::table_dir(&self.shared, TableId(id));
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        self.shared
            .backend
            .sync_dir(&self.shared.dir.join("tables"))?;
        let starts = crate::region::pre_split_starts(schema.options.regions);
        let defs: Vec<RegionDef> = starts
            .iter()
            .enumerate()
            .map(|(i, s)| RegionDef {
                id: i as u32,
                start: *s,
            })
            .collect();
        let record = Record::CreateTable {
            table_id: id,
            schema: schema.clone(),
            regions: defs.clone(),
            next_region_id: defs.len() as u32,
        };
        catalog::Catalog::append_to(&mut m, &self.shared.poison, &[record])?;
        drop(m);
        let fw = schema.fields_width();
        let regions = defs
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let end = starts.get(i + 1).copied();
                let v = RegionVersion::new(fw, vec![], 0);
                Arc::new(Region::new(RegionId(d.id), d.start, end, v))
            })
            .collect();
        tables.insert(
            schema.name.clone(),
            Arc::new(Table::new(
                TableId(id),
                schema,
                regions,
                self.shared.opts.latest_cache_devices,
            )),
        );
        Ok(id)
    }

    /// Schema of a table (with its current block encoding).
    pub fn schema(&self, table: &str) -> Result<TableSchema> {
        Ok(self.shared.catalog.table(table)?.current_schema())
    }

    /// Make compactions of `table` write `encoding` from now
    /// on (durably: a manifest record). Files already written keep their
    /// encoding until a compaction rewrites them; `compact --major`
    /// converts a whole table.
    pub fn set_table_encoding(&self, table: &str, encoding: BlockEncoding) -> Result<()> {
        self.shared.check_writable("set table encoding")?;
        let t = self.shared.catalog.table(table)?;
        let _flushing = t.flush_lock.lock_or_recover();
        if t.encoding() == encoding {
            return Ok(());
        }
        self.shared.append(&[Record::TableEncoding {
            table_id: t.id.0,
            encoding,
        }])?;
        t.set_encoding(encoding);
        Ok(())
    }

    /// Names of all tables, sorted.
    pub fn table_names(&self) -> Vec<String> {
        let mut v: Vec<_> = self
            .shared
            .catalog
            .tables()
            .iter()
            .map(|t| t.schema.name.clone())
            .collect();
        v.sort();
        v
    }

    fn submit(&self, table: Arc<Table>, op: Op, durability: Durability) -> Result<u64> {
        self.shared.poison.check()?;
        self.admit(&table)?;
        let (tx, rx) = bounded(1);
        self.commit_tx
            .send(Msg::Write(WriteReq {
                table,
                op,
                durability,
                reply: tx,
            }))
            .map_err(|_| Error::Closed)?;
        rx.recv().map_err(|_| Error::Closed)?
    }

    /// Write a batch of rows (`device u64 LE | ts i64 LE | fields`, fixed
    /// width). All rows or none are applied.
    pub fn write(&self, table: &str, rows: &[u8], durability: Durability) -> Result<WriteAck> {
        self.write_vec(table, rows.to_vec(), durability)
    }

    /// The most row bytes one [`Store::write`] takes (one WAL entry);
    /// [`Store::write_rows`] splits anything larger by itself.
    pub fn batch_bytes_max(&self) -> usize {
        crate::wal::frame::FRAME_PAYLOAD_MAX
    }

    /// Write any number of rows: every row is checked first (width,
    /// timestamps), then they are written in groups of at most
    /// [`Store::batch_bytes_max`] bytes, each group as one batch (all or
    /// nothing). Rows that fit one group are one batch. If a later group
    /// fails (busy, a stopped write path) the earlier ones stay written
    /// (a warning logs how many rows). The ack names the first group's
    /// first sequence number and all the rows.
    pub fn write_rows(
        &self,
        table: &str,
        rows: Vec<u8>,
        durability: Durability,
    ) -> Result<WriteAck> {
        self.shared.check_writable("write")?;
        let t = self.shared.catalog.table(table)?;
        let width = t.schema.row_width();
        let per = (self.batch_bytes_max() / width).max(1) * width;
        if rows.len() <= per {
            return self.write_batch(t, rows, durability);
        }
        Batch::new(&rows, width)?.check_timestamps()?;
        let mut first_seq = None;
        for (i, chunk) in rows.chunks(per).enumerate() {
            let ack = self
                .write_batch(t.clone(), chunk.to_vec(), durability)
                .inspect_err(|e| {
                    if i > 0 {
                        let written = i * per / width;
                        tracing::warn!("{table}: {written} rows were written before: {e}");
                    }
                })?;
            first_seq.get_or_insert(ack.first_seq);
        }
        Ok(WriteAck {
            first_seq: first_seq.unwrap_or_default(),
            rows: (rows.len() / width) as u64,
            durability,
        })
    }

    /// [`Store::write`] taking the rows by value (no copy: the daemon hands
    /// over the frame it read).
    pub fn write_vec(
        &self,
        table: &str,
        rows: Vec<u8>,
        durability: Durability,
    ) -> Result<WriteAck> {
        self.shared.check_writable("write")?;
        let t = self.shared.catalog.table(table)?;
        self.write_batch(t, rows, durability)
    }

    /// One batch into `t` (looked up, the store writable): every row
    /// checked, then one WAL entry.
    fn write_batch(
        &self,
        t: Arc<Table>,
        rows: Vec<u8>,
        durability: Durability,
    ) -> Result<WriteAck> {
        let batch = Batch::new(&rows, t.schema.row_width())?;
        batch.check_timestamps()?;
        let n = batch.len() as u64;
        if rows.len() > self.batch_bytes_max() {
            return Err(Error::invalid(
                "batch",
                format!(
                    "{} bytes exceeds the {} byte limit; split it",
                    rows.len(),
                    self.batch_bytes_max()
                ),
            ));
        }
        let t0 = std::time::Instant::now();
        let first_seq = self.submit(t, Op::Put(rows), durability)?;
        let m = &self.shared.counters.metrics.write_seconds;
        m.observe(t0.elapsed().as_secs_f64());
        Ok(WriteAck {
            first_seq,
            rows: n,
            durability,
        })
    }

    /// Delete single readings `(device, ts)`.
    pub fn delete(
        &self,
        table: &str,
        points: &[(u64, i64)],
        durability: Durability,
    ) -> Result<WriteAck> {
        self.shared.check_writable("write")?;
        let t = self.shared.catalog.table(table)?;
        let max = crate::wal::frame::FRAME_PAYLOAD_MAX / crate::wal::frame::POINT_DELETE_LEN;
        if points.is_empty() || points.len() > max {
            return Err(Error::invalid(
                "delete",
                format!("{} points (1..={max})", points.len()),
            ));
        }
        let p = points.iter().map(|(d, ts)| (DeviceId(*d), *ts)).collect();
        let first_seq = self.submit(t, Op::DeletePoints(p), durability)?;
        Ok(WriteAck {
            first_seq,
            rows: points.len() as u64,
            durability,
        })
    }

    /// Delete a device's readings with `from <= ts <= to`.
    pub fn delete_range(
        &self,
        table: &str,
        device: u64,
        from: i64,
        to: i64,
        durability: Durability,
    ) -> Result<WriteAck> {
        self.shared.check_writable("write")?;
        let t = self.shared.catalog.table(table)?;
        if from > to {
            return Err(Error::invalid(
                "delete range",
                format!("from {from} > to {to}"),
            ));
        }
        let op = Op::DeleteRange {
            device: DeviceId(device),
            from,
            to,
        };
        let first_seq = self.submit(t, op, durability)?;
        Ok(WriteAck {
            first_seq,
            rows: 1,
            durability,
        })
    }

    /// fdatasync the WAL now (makes earlier `async` writes durable).
    pub fn sync(&self) -> Result<()> {
        if self.shared.opts.read_only {
            return Ok(());
        }
        let (tx, rx) = bounded(1);
        self.commit_tx
            .send(Msg::Sync(tx))
            .map_err(|_| Error::Closed)?;
        rx.recv().map_err(|_| Error::Closed)?
    }

    /// Freeze every active memstore and flush all of them to HFiles; on
    /// return they are durable and recorded.
    pub fn flush(&self) -> Result<()> {
        self.flush_tables(None)
    }

    /// Flush one table (`Some(name)`) or all: every write acknowledged
    /// before the call is in an HFile on return, and the WAL segments that
    /// held only those writes can be retired. (Some of the frozen
    /// memstores may be flushed by the background flusher meanwhile; the
    /// call returns once all of them are.)
    pub fn flush_tables(&self, table: Option<&str>) -> Result<()> {
        self.shared.check_writable("flush")?;
        self.shared.poison.check()?;
        let only = table.map(|n| self.shared.catalog.table(n)).transpose()?;
        let (tx, rx) = bounded(1);
        self.commit_tx
            .send(Msg::Freeze(only.as_ref().map(|t| t.id), tx))
            .map_err(|_| Error::Closed)?;
        rx.recv().map_err(|_| Error::Closed)?;
        let tables = match only {
            Some(t) => vec![t],
            None => self.shared.catalog.tables(),
        };
        for t in tables {
            flush::flush_frozen(&self.shared, &t).map_err(|e| self.shared.poison.stop(&e))?;
        }
        self.shared.poison.check()
    }

    /// Rows of put batches applied since open, WAL replay not counted
    /// (cheap: one load; a write acknowledged a moment ago may not be
    /// counted yet).
    pub fn rows_written(&self) -> u64 {
        self.shared.counters.rows_applied.load(Ordering::Relaxed)
    }

    /// Counters (counting every write acknowledged before the call).
    pub fn stats(&self) -> StoreStats {
        self.shared.write.gate.wait_caught_up();
        let limiter = self.shared.background.limiter.as_deref();
        let mut s = StoreStats {
            io: Some(self.io_kind()),
            wal_segments: self.shared.write.wal().segment_count(),
            cache: self.shared.cache.stats(),
            stalled_writes: self.shared.counters.stalls.load(Ordering::Relaxed),
            busy_writes: self.shared.counters.busy.load(Ordering::Relaxed),
            slowed_writes: self.shared.counters.slowed.load(Ordering::Relaxed),
            compaction_debt_bytes: self.shared.compaction_debt(),
            background_write_rate_bytes_per_sec: limiter.map_or(0, |l| l.rate()),
            background_write_bytes: limiter.map_or(0, |l| l.bytes_through()),
            background_write_wait_ms: limiter.map_or(0, |l| l.waited().as_millis() as u64),
            files_read_ahead: self
                .shared
                .counters
                .files_read_ahead
                .load(Ordering::Relaxed),
            rows_written: self.rows_written(),
            memstore_limit_bytes: self.shared.opts.memstore_global_bytes,
            block_cache_capacity_bytes: self.shared.opts.block_cache_bytes,
            ..Default::default()
        };
        for t in self.shared.catalog.tables() {
            let l = t.latest.stats();
            s.latest_cache.hits += l.hits;
            s.latest_cache.misses += l.misses;
            s.latest_cache.entries += l.entries;
            let mut seen = std::collections::HashSet::new();
            for r in t.regions().iter() {
                let st = r.version();
                for f in st.files.iter().filter(|f| seen.insert(f.file_id())) {
                    s.hfiles += 1;
                    s.hfile_bytes += f.len_bytes();
                }
                s.memstore_bytes +=
                    st.active.bytes() + st.frozen.iter().map(|m| m.bytes()).sum::<usize>();
                s.frozen_memstores += st.frozen.len();
                s.regions += 1;
            }
        }
        s
    }

    /// Close: stop accepting writes, sync the WAL, stop background threads.
    pub fn close(mut self) -> Result<()> {
        self.shutdown();
        self.shared.poison.check()
    }

    /// Stop in dependency order (`threads.rs`): close the monitor's and
    /// the compactors' channels and ask the commit thread to stop, then
    /// join them all, the flusher last.
    fn shutdown(&mut self) {
        self.monitor_tx = None;
        self.shared.background.close();
        let _ = self.commit_tx.send(Msg::Shutdown);
        if let Some(threads) = self.threads.take() {
            threads.stop(|| self.shared.background.stop_flusher());
        }
        self.shared.background.prefetch.stop();
        compact::sweep_graveyard(&self.shared);
        self.shared.locks.release();
    }

    /// Write stall: while a region of the table has more than
    /// `blocking_file_count` HFiles (sorted runs), the store's compaction
    /// debt is at `compaction_debt_stop_bytes` or all memstores together
    /// hold more than `memstore_global_bytes`, wait for flushes and
    /// compactions
    /// (asking the apply thread to freeze memstores for the flusher); past
    /// `write_stall_max_ms` refuse with `Busy` (nothing applied).
    /// Near the file limit it first waits for the apply thread to catch
    /// up with what was acknowledged. Past the debt slowdown threshold it
    /// sleeps a little first (`pacing`).
    #[expect(
        clippy::too_many_lines,
        reason = "the admission rule reads as one decision (stall, slow down, refuse); moves to engine/admission.rs when Shared is split by role"
    )]
    fn admit(&self, t: &Table) -> Result<()> {
        let o = &self.shared.opts;
        // Acknowledged writes still queued for the apply thread turn into
        // files too: once a region is half way to the file limit, let them
        // land first, so the check below sees them (else a fast writer
        // runs up to the 64 MiB apply queue past the limit).
        let most_files = t.regions().iter().map(|r| r.file_count()).max();
        let most_files = most_files.unwrap_or(0);
        if most_files * 2 > o.blocking_file_count {
            self.shared.write.gate.wait_caught_up();
        }
        let slow = self
            .shared
            .debt_slowdown()
            .max(self.runs_slowdown(t, most_files));
        if !slow.is_zero() {
            self.shared.counters.slowed.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(slow);
        }
        let over = || {
            let u = self.shared.memstore_usage();
            // Runs are never more than files: count them only then.
            let files = t
                .regions()
                .iter()
                .filter(|r| {
                    r.file_count() > o.blocking_file_count && r.run_count() > o.blocking_file_count
                })
                .cloned()
                .collect::<Vec<_>>();
            // A region whose flushes are behind counts as memory pressure.
            let frozen_max = o.frozen_memstores_max.max(1);
            let behind = t.regions().iter().any(|r| r.frozen_count() > frozen_max);
            (files, u.over_limit(o) || behind)
        };
        let debt = || self.shared.debt_stops_writes();
        let (files, mem) = over();
        if files.is_empty() && !mem && !debt() {
            return Ok(());
        }
        if self
            .shared
            .counters
            .stalls
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(1000)
        {
            tracing::warn!(
                "write stall on table {}: {} regions over {} files, memstores over limit: {mem}, compaction debt {} bytes",
                t.schema.name,
                files.len(),
                o.blocking_file_count,
                self.shared.compaction_debt()
            );
        }
        if mem {
            let _ = self.commit_tx.send(Msg::Relieve);
        }
        let deadline = std::time::Instant::now() + Duration::from_millis(o.write_stall_max_ms);
        let mut files = files;
        loop {
            // Asked on every turn: a region over the limit may be new (a
            // split's daughters inherit their parent's files, and the
            // parent's queued job dies with it). A queued region is not
            // queued twice.
            for r in &files {
                self.shared.request_compaction(t.id, r, false);
            }
            self.shared.poison.check()?;
            self.shared
                .background
                .wait_flush_progress(Duration::from_millis(20));
            let mem;
            (files, mem) = over();
            if files.is_empty() && !mem && !debt() {
                return Ok(());
            }
            // Memory is relieved one memstore at a time (the apply thread
            // freezes the next largest once the flusher is nearly idle):
            // ask again each turn.
            if mem {
                let _ = self.commit_tx.send(Msg::Relieve);
            }
            if std::time::Instant::now() >= deadline {
                self.shared.counters.busy.fetch_add(1, Ordering::Relaxed);
                return Err(Error::Busy {
                    retry_after_ms: o.write_stall_max_ms.clamp(100, 5_000),
                });
            }
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.shutdown();
    }
}
