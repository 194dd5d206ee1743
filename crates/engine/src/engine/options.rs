//! Store options and write durability.

use crate::clock::{Clock, SystemClock};
use crate::compaction::plan::Policy as CompactionPolicy;
use crate::error::{Error, Result};
use crate::io::priority::IoPriority;
use crate::io::{BackendRef, IoChoice};
use crate::region::hotspot::HotspotConfig;
use std::sync::Arc;

/// When a write is acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Durability {
    /// Acknowledged only after the fdatasync that covers it: survives
    /// `kill -9` and power loss.
    #[default]
    Sync,
    /// Acknowledged once written to the WAL file (OS page cache); the WAL
    /// is fdatasync'ed within `async_sync_interval_ms`. Survives `kill -9`
    /// of the process, but a power loss can lose up to that interval.
    Async,
    /// Not logged: only in the memstore until the next flush. Lost on any
    /// crash before that flush.
    Skip,
}

impl Durability {
    /// `sync`, `async` or `skip`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "sync" => Ok(Durability::Sync),
            "async" => Ok(Durability::Async),
            "skip" => Ok(Durability::Skip),
            other => Err(Error::invalid(
                "durability",
                format!("{other:?} (expected sync, async or skip)"),
            )),
        }
    }
    /// The name `parse` takes.
    pub fn name(self) -> &'static str {
        match self {
            Durability::Sync => "sync",
            Durability::Async => "async",
            Durability::Skip => "skip",
        }
    }
}

/// Options for [`super::Store::open`].
#[derive(Clone)]
pub struct Options {
    /// I/O backend; `None` reads `TELESTORE_IO` (default `auto`).
    pub io: Option<IoChoice>,
    /// A ready backend (tests inject faults this way); overrides `io`.
    pub backend: Option<BackendRef>,
    /// A region's memstore is frozen and flushed when it reaches this size.
    pub flush_threshold_bytes: usize,
    /// Frozen memstores per region before writers wait for flushes.
    pub frozen_memstores_max: usize,
    /// Memory for all memstores together (active and frozen). From three
    /// quarters of it the largest region's memstore is frozen and flushed,
    /// one at a time (the next once at most one frozen memstore is left);
    /// writers wait while memstores hold more than all of it.
    pub memstore_global_bytes: usize,
    /// A region whose HFile data exceeds this splits in two after a flush
    /// (`u64::MAX`: never automatically).
    pub region_split_bytes: u64,
    /// Hotspot detector settings.
    pub hotspot: HotspotConfig,
    /// Worker threads of a table-wide scan (one sub-scan per region).
    pub scan_threads: usize,
    /// Compaction planner settings (minor runs).
    pub compaction: CompactionPolicy,
    /// Background compaction workers (0: compactions run only when asked,
    /// `Store::compact`). Default [`compaction_threads_for`] the machine's
    /// cores: one per two cores, at least 2 and at most 4.
    pub compaction_threads: usize,
    /// Most parts a compaction of one region is split into by key range
    /// (subcompactions), each merged on a thread of its own into a file
    /// of its own; together they are one sorted run
    /// (`compaction::plan::runs`). 1: never split. Default
    /// [`subcompactions_for`] the machine's cores (1 up to 3 cores).
    pub subcompactions: usize,
    /// A minor compaction reading less than this writes rows blocks with
    /// the flush's compression, whatever the table's encoding (pco's
    /// encoder is the most expensive step of a compaction); the data
    /// turns columnar when it is merged into something bigger or at a
    /// major compaction. 0: every compaction writes the table's encoding.
    /// Default 0: at 256 MiB it bought no sustained ingest on the 2-core
    /// VM and wrote more bytes (`benches/RESULTS.md`, "Sustained ingest").
    pub columnar_min_compaction_bytes: u64,
    /// A split compaction reads at least this many bytes per part.
    /// Default 64 MiB.
    pub subcompaction_min_bytes: u64,
    /// I/O priority of the flush and compaction threads (`ioprio_set`):
    /// `Low` (best-effort, lowest level) by default, so their reads and
    /// writes queue behind the WAL's where the disk's scheduler honours
    /// priorities (`crate::io::priority`).
    pub background_io_priority: IoPriority,
    /// Ceiling of flush and compaction writes, bytes per second (0: no
    /// limit, the default). Compactions wait for the limiter; flushes
    /// never wait but their bytes count (`crate::io::rate`).
    pub background_write_bytes_per_sec: u64,
    /// Tune the limiter's rate from the compaction debt: a tenth of the
    /// ceiling with no debt, the whole ceiling from
    /// `compaction_debt_slowdown_bytes`. Default true.
    pub background_write_auto: bool,
    /// From this much compaction debt (all regions together), each write
    /// batch is delayed, 1 to 50 ms as the debt nears the stop
    /// (`engine::pacing`). 0: never. Default 4 GiB.
    pub compaction_debt_slowdown_bytes: u64,
    /// From this much compaction debt writes stall as for too many files
    /// (and are refused `Busy` after `write_stall_max_ms`). 0: never.
    /// Default 16 GiB.
    pub compaction_debt_stop_bytes: u64,
    /// Nice value (0..=19) of the threads that work behind the
    /// acknowledgement: memstore apply, flush and compaction. They are
    /// CPU-bound; at a lower priority they yield the CPU at once to the
    /// commit and network threads an acknowledgement waits for (RocksDB
    /// can lower its background pools the same way). Default 19: at half
    /// the sustained ingest peak it is what keeps the ack p99 near 10 ms
    /// instead of 190–280 ms (benches/RESULTS.md). The price: threads or
    /// processes that keep every core busy at normal priority can starve
    /// flushes and compactions until writers stall and are refused
    /// `Busy`. Set 0 where the store shares its cores with CPU-heavy work
    /// (an unprivileged process cannot raise the priority back later).
    pub background_nice: i32,
    /// Scheduled major compaction period per region (± 50 % jitter);
    /// 0 turns the schedule off.
    pub major_compaction_period_ms: i64,
    /// A region with more HFiles than this stalls the table's writers.
    pub blocking_file_count: usize,
    /// From this many sorted runs in a region, each write batch to its
    /// table is delayed, 1 ms rising to 50 ms at `blocking_file_count`
    /// (RocksDB's level-0 slowdown trigger), so ingest meets compaction
    /// halfway before it hits the wall. 0: never. Default 10.
    pub slowdown_file_count: usize,
    /// Longest write stall before a write is refused with `Busy`.
    pub write_stall_max_ms: u64,
    /// WAL segment size before rolling to a new segment.
    pub wal_segment_bytes: u64,
    /// Zero-fill the next WAL segment in the background (once the active
    /// one is a quarter full), so appends overwrite allocated blocks and
    /// each fdatasync skips the file-system journal (`formats/wal.md`).
    pub wal_preallocate: bool,
    /// Live WAL segments before the active memstores holding edits of the
    /// oldest one are flushed (so a rarely written table cannot pin the
    /// WAL forever).
    pub wal_segments_max: usize,
    /// WAL fdatasyncs in flight at once (1..=8): each group commit is
    /// synced by one of this many workers, so a group need not wait for
    /// the sync of the group before it to finish (`engine::syncer`).
    /// 1 syncs one group at a time. The commit thread's own fdatasyncs
    /// (segment roll-over, the `async` timer, `Store::sync`) come on top.
    pub wal_syncs_in_flight: usize,
    /// Write HFiles (flushes, compactions) with `O_DIRECT` where the
    /// filesystem allows it, so their writes do not pile up in the page
    /// cache and reach the disk in bursts that a WAL fdatasync must wait
    /// behind (`crate::io::direct`). The price: a file just written is not
    /// in the page cache; its first reads come from the disk (or the block
    /// cache). Default true.
    pub direct_hfile_writes: bool,
    /// Put each block a flush writes into the block cache as it is written,
    /// so the newest data is warm the moment its file is published (it is
    /// what telemetry reads ask for; with `direct_hfile_writes` a new file
    /// is not in the page cache either). Compaction output is not cached.
    /// Default true.
    pub cache_flushed_blocks: bool,
    /// A new HFile that is not put into the block cache as it is written
    /// (compaction output, or every file without `cache_flushed_blocks`)
    /// and is at most this big is handed to the kernel's read-ahead once
    /// published (`posix_fadvise(WILLNEED)`): with `direct_hfile_writes`
    /// it is in no cache at all, and its first reads would each wait for
    /// the disk. The kernel reads it in the background into the page
    /// cache (reclaimable memory). 0 turns it off. Default 256 MiB.
    pub readahead_new_files_bytes: u64,
    /// Devices per table whose newest row is kept in memory once `latest`
    /// read it (`engine/latest.rs`): a `latest` of one of them touches no
    /// HFile, however cold the files are after a flush or a compaction.
    /// About 100 bytes per device plus its fields. 0 turns it off.
    /// Default 1,048,576.
    pub latest_cache_devices: usize,
    /// Keep the WAL in this directory (absolute) instead of `wal/` under
    /// the store, e.g. on another disk so that its fsyncs do not queue
    /// behind flush and compaction writes. Chosen when the store is
    /// created and recorded in its manifest: later opens use the recorded
    /// one, and asking for a different one is refused. Default `None`.
    pub wal_dir: Option<std::path::PathBuf>,
    /// Longest delay before an `async` write is fsynced.
    pub async_sync_interval_ms: u64,
    /// Block cache capacity.
    pub block_cache_bytes: u64,
    /// Cut the WAL at the first corrupt entry instead of failing to open.
    pub salvage_wal: bool,
    /// Open without changing anything: a shared lock (several readers at
    /// once, none while a writer holds the store), no torn tail cut, no
    /// orphan removed, no WAL segment created, no background thread;
    /// every write, flush, compaction or registration is refused with
    /// [`Error::ReadOnly`]. What the WAL holds is replayed into memory.
    pub read_only: bool,
    /// Source of "now" for TTL.
    pub clock: Arc<dyn Clock>,
}

/// Default compaction workers on a machine of `cores`: one per two
/// cores, at least 2 and at most 4 (up to 5 cores: 2, 6: 3, 8+: 4). The
/// workers run at `background_nice`, so they take the CPU the commit,
/// apply and network threads leave; a second worker even on 2 cores lets
/// compaction use both when ingest is slowed down for it (sustained
/// ingest 584 k rows/s instead of 415 k over minutes 2–4 of `bench
/// sustained`, `benches/RESULTS.md`). Compactions of one region never
/// run at once (one lock per region).
pub fn compaction_threads_for(cores: usize) -> usize {
    (cores / 2).clamp(2, 4)
}

/// Default subcompactions on a machine of `cores`: one part per two
/// cores, at most 4 (2 cores: 1, that is none; 4: 2; 8+: 4). A split
/// compaction's parts compete with ingest for the same cores.
pub fn subcompactions_for(cores: usize) -> usize {
    (cores / 2).clamp(1, 4)
}

impl Default for Options {
    fn default() -> Self {
        Options {
            io: None,
            backend: None,
            flush_threshold_bytes: 64 << 20,
            frozen_memstores_max: 4,
            memstore_global_bytes: 512 << 20,
            region_split_bytes: 1 << 30,
            hotspot: HotspotConfig::default(),
            scan_threads: std::thread::available_parallelism().map_or(2, |n| n.get().min(8)),
            compaction: CompactionPolicy::default(),
            compaction_threads: compaction_threads_for(
                std::thread::available_parallelism().map_or(1, |n| n.get()),
            ),
            subcompactions: subcompactions_for(
                std::thread::available_parallelism().map_or(1, |n| n.get()),
            ),
            subcompaction_min_bytes: 64 << 20,
            columnar_min_compaction_bytes: 0,
            background_nice: 19,
            background_io_priority: IoPriority::Low,
            background_write_bytes_per_sec: 0,
            background_write_auto: true,
            compaction_debt_slowdown_bytes: 4 << 30,
            compaction_debt_stop_bytes: 16 << 30,
            major_compaction_period_ms: 7 * 24 * 3600 * 1000,
            blocking_file_count: 16,
            slowdown_file_count: 10,
            wal_syncs_in_flight: WAL_SYNCS_IN_FLIGHT_DEFAULT,
            direct_hfile_writes: true,
            cache_flushed_blocks: true,
            readahead_new_files_bytes: 256 << 20,
            latest_cache_devices: 1 << 20,
            wal_dir: None,
            write_stall_max_ms: 10_000,
            wal_segment_bytes: crate::wal::SEGMENT_BYTES_DEFAULT,
            wal_preallocate: true,
            wal_segments_max: 8,
            async_sync_interval_ms: 100,
            block_cache_bytes: 256 << 20,
            salvage_wal: false,
            read_only: false,
            clock: Arc::new(SystemClock),
        }
    }
}

/// Smallest and largest memstore flush threshold (memstore offsets are
/// 32-bit; 2 GiB plus one maximal batch stays below 4 GiB).
pub const FLUSH_THRESHOLD_MIN: usize = 4 << 10;
pub const FLUSH_THRESHOLD_MAX: usize = 2 << 30;
/// Longest scheduled major compaction period (about ten years).
pub const MAJOR_PERIOD_MAX_MS: i64 = 10 * 366 * 24 * 3600 * 1000;
/// Most frozen memstores per table before writers wait.
pub const FROZEN_MEMSTORES_MAX: usize = 64;
/// Default of `Options::wal_syncs_in_flight`.
pub const WAL_SYNCS_IN_FLIGHT_DEFAULT: usize = 2;
/// Largest `Options::wal_syncs_in_flight`.
pub const WAL_SYNCS_IN_FLIGHT_MAX: usize = 8;

/// `Ok` when `value` is in `range`, else an `InvalidInput` naming the
/// option.
fn in_range<T: PartialOrd + std::fmt::Display>(
    what: &'static str,
    value: T,
    range: std::ops::RangeInclusive<T>,
) -> Result<()> {
    if range.contains(&value) {
        return Ok(());
    }
    let (lo, hi) = range.into_inner();
    Err(Error::invalid(what, format!("{value} outside {lo}..={hi}")))
}

impl Options {
    /// Reject settings outside their limits.
    #[expect(
        clippy::too_many_lines,
        reason = "one range check per option, in the order of the struct (the engine API checks what an embedder passes)"
    )]
    pub fn validate(&self) -> Result<()> {
        if let Some(w) = &self.wal_dir {
            if !w.is_absolute() {
                return Err(Error::invalid(
                    "wal_dir",
                    format!("{} is not an absolute path", w.display()),
                ));
            }
        }
        in_range(
            "flush_threshold_bytes",
            self.flush_threshold_bytes,
            FLUSH_THRESHOLD_MIN..=FLUSH_THRESHOLD_MAX,
        )?;
        in_range(
            "frozen_memstores_max",
            self.frozen_memstores_max,
            1..=FROZEN_MEMSTORES_MAX,
        )?;
        if self.memstore_global_bytes < self.flush_threshold_bytes {
            return Err(Error::invalid(
                "memstore_global_bytes",
                format!(
                    "{} below flush_threshold_bytes {}",
                    self.memstore_global_bytes, self.flush_threshold_bytes
                ),
            ));
        }
        if self.region_split_bytes < 4096 {
            return Err(Error::invalid(
                "region_split_bytes",
                format!("{} below 4096", self.region_split_bytes),
            ));
        }
        in_range(
            "wal_syncs_in_flight",
            self.wal_syncs_in_flight,
            1..=WAL_SYNCS_IN_FLIGHT_MAX,
        )?;
        in_range("scan_threads", self.scan_threads, 1..=64)?;
        let h = &self.hotspot;
        if !(h.k > 1.0 && h.k.is_finite()) || h.grace_ms < 0 || h.window_secs == 0 {
            return Err(Error::invalid(
                "hotspot",
                format!(
                    "k {} (> 1), grace {} ms (>= 0), window {} s (> 0)",
                    h.k, h.grace_ms, h.window_secs
                ),
            ));
        }
        let c = &self.compaction;
        if c.min_files < 2
            || c.max_files < c.min_files
            || c.ratio.is_nan()
            || c.ratio <= 0.0
            || c.stuck_files < c.min_files
        {
            return Err(Error::invalid(
                "compaction",
                format!("min_files {} (>= 2), max_files {} (>= min), ratio {} (> 0), stuck_files {} (>= min)", c.min_files, c.max_files, c.ratio, c.stuck_files),
            ));
        }
        in_range("compaction_threads", self.compaction_threads, 0..=16)?;
        in_range("background_nice", self.background_nice, 0..=19)?;
        in_range("subcompactions", self.subcompactions, 1..=16)?;
        let (slow, stop) = (
            self.compaction_debt_slowdown_bytes,
            self.compaction_debt_stop_bytes,
        );
        if slow > 0 && stop > 0 && stop <= slow {
            return Err(Error::invalid(
                "compaction_debt_stop_bytes",
                format!("{stop} must exceed compaction_debt_slowdown_bytes {slow}"),
            ));
        }
        if self.background_write_bytes_per_sec != 0 {
            in_range(
                "background_write_bytes_per_sec",
                self.background_write_bytes_per_sec,
                1 << 20..=u64::MAX,
            )?;
        }
        in_range(
            "subcompaction_min_bytes",
            self.subcompaction_min_bytes,
            4 << 10..=u64::MAX,
        )?;
        if self.blocking_file_count <= c.min_files {
            return Err(Error::invalid(
                "blocking_file_count",
                format!(
                    "{} must exceed compaction.min_files {}",
                    self.blocking_file_count, c.min_files
                ),
            ));
        }
        in_range(
            "major_compaction_period_ms",
            self.major_compaction_period_ms,
            0..=MAJOR_PERIOD_MAX_MS,
        )?;
        if self.slowdown_file_count > 0
            && (self.slowdown_file_count < c.min_files
                || self.slowdown_file_count > self.blocking_file_count)
        {
            return Err(Error::invalid(
                "slowdown_file_count",
                format!(
                    "{} outside compaction.min_files {}..=blocking_file_count {} (0: never)",
                    self.slowdown_file_count, c.min_files, self.blocking_file_count
                ),
            ));
        }
        if c.stuck_files > self.blocking_file_count {
            return Err(Error::invalid(
                "compaction.stuck_files",
                format!(
                    "{} above blocking_file_count {}: a stuck region would stall writers with no compaction planned",
                    c.stuck_files, self.blocking_file_count
                ),
            ));
        }
        if self.wal_segments_max < 2 {
            return Err(Error::invalid("wal_segments_max", "must be at least 2"));
        }
        if self.wal_segment_bytes < 4096 {
            return Err(Error::invalid(
                "wal_segment_bytes",
                format!("{} below 4096", self.wal_segment_bytes),
            ));
        }
        Ok(())
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("io", &self.io)
            .field("flush_threshold_bytes", &self.flush_threshold_bytes)
            .field("memstore_global_bytes", &self.memstore_global_bytes)
            .field("region_split_bytes", &self.region_split_bytes)
            .field("hotspot", &self.hotspot)
            .field("scan_threads", &self.scan_threads)
            .field("compaction", &self.compaction)
            .field("compaction_threads", &self.compaction_threads)
            .field("subcompactions", &self.subcompactions)
            .field("subcompaction_min_bytes", &self.subcompaction_min_bytes)
            .field(
                "columnar_min_compaction_bytes",
                &self.columnar_min_compaction_bytes,
            )
            .field("background_nice", &self.background_nice)
            .field("background_io_priority", &self.background_io_priority)
            .field(
                "background_write_bytes_per_sec",
                &self.background_write_bytes_per_sec,
            )
            .field("background_write_auto", &self.background_write_auto)
            .field(
                "compaction_debt_slowdown_bytes",
                &self.compaction_debt_slowdown_bytes,
            )
            .field(
                "compaction_debt_stop_bytes",
                &self.compaction_debt_stop_bytes,
            )
            .field(
                "major_compaction_period_ms",
                &self.major_compaction_period_ms,
            )
            .field("blocking_file_count", &self.blocking_file_count)
            .field("slowdown_file_count", &self.slowdown_file_count)
            .field("write_stall_max_ms", &self.write_stall_max_ms)
            .field("wal_segment_bytes", &self.wal_segment_bytes)
            .field("wal_preallocate", &self.wal_preallocate)
            .field("async_sync_interval_ms", &self.async_sync_interval_ms)
            .field("block_cache_bytes", &self.block_cache_bytes)
            .field("salvage_wal", &self.salvage_wal)
            .field("read_only", &self.read_only)
            .field("cache_flushed_blocks", &self.cache_flushed_blocks)
            .field("readahead_new_files_bytes", &self.readahead_new_files_bytes)
            .field("latest_cache_devices", &self.latest_cache_devices)
            .field("wal_dir", &self.wal_dir)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::{compaction_threads_for, subcompactions_for};

    #[test]
    fn subcompactions_grow_with_the_cores() {
        let got: Vec<usize> = [1, 2, 3, 4, 6, 8, 64]
            .into_iter()
            .map(subcompactions_for)
            .collect();
        assert_eq!(got, [1, 1, 1, 2, 3, 4, 4]);
    }

    #[test]
    fn compaction_workers_grow_with_the_cores_from_two() {
        let got: Vec<usize> = [1, 2, 4, 5, 6, 8, 10, 64]
            .into_iter()
            .map(compaction_threads_for)
            .collect();
        assert_eq!(got, [2, 2, 2, 2, 3, 4, 4, 4]);
    }
}
