//! Running compactions: the planner's task for a region, executed as a
//! streaming k-way merge of its files (clipped to the region's range) into
//! one new HFile, written like a flush (temp file → fsync → rename → dir
//! fsync, through the I/O backend), then swapped in with one manifest
//! record (`Files`: added = the output, removed = the inputs) while the
//! table's flush lock is held. A crash before that record leaves an
//! unrecorded file that open deletes; after it, the inputs are unrecorded
//! and deleted likewise. Replaced files are deleted once no region lists
//! them and no reader still holds them (the graveyard).
//!
//! Work arrives on a queue served by `compaction_threads` workers: a
//! minor check after every flush, whole-file TTL drops and scheduled
//! majors from the monitor thread, and `Store::compact` on demand.

use super::flush::{meta_of, write_hfile_as, NewFile, Output};
use super::region::Region;
use super::table::Table;
use super::{Shared, Store};
use crate::cell::RangeTombstone;
use crate::compaction::filter::{self, Filter, Mode};
use crate::compaction::plan::{self, FileStat, Task};
use crate::error::{Error, Result};
use crate::failpoint::pause_at;
use crate::hfile::writer::KEY_MAX;
use crate::hfile::HFileReader;
use crate::ids::{FileId, RegionId, TableId};
use crate::key::RowKey;
use crate::manifest::Record;
use crate::read::source::{CellSource, FileSource};
use crate::region::key_before;
use crate::util::sync::LockExt;
use std::collections::HashSet;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// A queued request.
pub struct Job {
    pub table: TableId,
    pub region: RegionId,
    pub major: bool,
}

/// What one compaction did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// `minor` or `major`.
    pub kind: &'static str,
    /// HFiles merged.
    pub files_in: usize,
    /// Files written: one, one per part of a split compaction, or none.
    pub files_out: usize,
    /// Bytes read from the merged files.
    pub bytes_in: u64,
    /// Bytes written to the new files.
    pub bytes_out: u64,
    /// Cells read.
    pub cells_in: u64,
    /// Cells written (fewer when versions, deletes or expired cells were dropped).
    pub cells_out: u64,
}

pub(super) fn stat_of(f: &HFileReader) -> FileStat {
    let i = f.info();
    FileStat {
        file_id: f.file_id().0,
        bytes: f.len_bytes(),
        min_seq: i.min_seq,
        max_seq: i.max_seq,
        max_ts: if i.cells > 0 { i.max_ts } else { i64::MIN },
        tombstone_max_to: f
            .range_tombstones()
            .iter()
            .map(|t| t.to)
            .max()
            .unwrap_or(i64::MIN),
        min_key: i.min_key,
        max_key: i.max_key,
        created_ms: i.created_ms,
    }
}

fn ttl_cutoff(shared: &Shared, t: &Table) -> Option<i64> {
    t.schema.options.ttl_cutoff(shared.opts.clock.now_ms())
}

/// The task the planner picks for `files` (a region's files) now.
pub fn plan_for(
    shared: &Shared,
    t: &Table,
    files: &[Arc<HFileReader>],
    major: bool,
) -> Option<Task> {
    let stats: Vec<FileStat> = files.iter().map(|f| stat_of(f)).collect();
    plan::plan(
        &stats,
        &shared.opts.compaction,
        ttl_cutoff(shared, t),
        major,
    )
}

/// Plan and run one compaction of `r`; `Ok(None)` when there was nothing
/// to do or the region was split or merged meanwhile.
pub fn compact_region(
    shared: &Shared,
    t: &Table,
    r: &Arc<Region>,
    major: bool,
) -> Result<Option<Outcome>> {
    // One compaction of a region at a time (a worker and `Store::compact`
    // could otherwise plan on overlapping file sets).
    let _one = r.compact_lock.lock_or_recover();
    // Plan and run on one snapshot of the files.
    let files = r.version().files.clone();
    let Some(task) = plan_for(shared, t, &files, major) else {
        return Ok(None);
    };
    r.stats.compaction_running.store(1, Relaxed);
    let t0 = std::time::Instant::now();
    let res = run_task(shared, t, r, task, files);
    let m = &shared.counters.metrics.compaction_seconds;
    m.observe(t0.elapsed().as_secs_f64());
    r.stats.compaction_running.store(0, Relaxed);
    match &res {
        Ok(Some(o)) => {
            r.stats.compactions.fetch_add(1, Relaxed);
            r.stats.compaction_bytes_read.fetch_add(o.bytes_in, Relaxed);
            r.stats
                .compaction_bytes_written
                .fetch_add(o.bytes_out, Relaxed);
            shared.refresh_compaction_debt();
            shared.background.notify_flush_progress();
        }
        Ok(None) => {}
        Err(_) => {
            r.stats.compactions_failed.fetch_add(1, Relaxed);
        }
    }
    res
}

fn run_task(
    shared: &Shared,
    t: &Table,
    r: &Arc<Region>,
    task: Task,
    files: Vec<Arc<HFileReader>>,
) -> Result<Option<Outcome>> {
    let (kind, ids) = match &task {
        Task::DropExpired(ids) => ("ttl-drop", ids),
        Task::Minor(ids) => ("minor", ids),
        Task::Major(ids) => ("major", ids),
    };
    let inputs: Vec<Arc<HFileReader>> = files
        .into_iter()
        .filter(|f| ids.contains(&f.file_id().0))
        .collect();
    let mut o = Outcome {
        kind,
        files_in: inputs.len(),
        bytes_in: inputs.iter().map(|f| f.len_bytes()).sum(),
        ..Default::default()
    };
    let output = match task {
        Task::DropExpired(_) => Vec::new(),
        Task::Minor(_) | Task::Major(_) => {
            let (files, cells_in, cells_out) = merge_files(shared, t, r, &inputs, kind == "major")?;
            o.cells_in = cells_in;
            o.cells_out = cells_out;
            o.bytes_out = files.iter().map(|f| f.len_bytes()).sum();
            o.files_out = files.len();
            files
        }
    };
    if !commit(shared, t, r, &inputs, output.clone(), kind == "major")? {
        output.iter().for_each(|f| discard(shared, f));
        return Ok(None);
    }
    sweep_graveyard(shared);
    tracing::debug!(
        "table {} region {}: {kind} compaction of {} files ({} bytes) -> {} bytes",
        t.schema.name,
        r.id,
        o.files_in,
        o.bytes_in,
        o.bytes_out
    );
    Ok(Some(o))
}

/// Merge `inputs` (clipped to the region) into new files: one, or one
/// per key range part when the compaction is split ([`part_ranges`]),
/// the parts merged on threads of their own. Parts left with nothing to
/// write have no file. On an error every part's file is removed.
fn merge_files(
    shared: &Shared,
    t: &Table,
    r: &Region,
    inputs: &[Arc<HFileReader>],
    major: bool,
) -> Result<(Vec<Arc<HFileReader>>, u64, u64)> {
    let lo = r.start;
    let hi = r.end.map_or(KEY_MAX, |e| key_before(&e).unwrap_or(KEY_MAX));
    let ranges = part_ranges(inputs, lo, hi, parts_for(shared, inputs));
    let first_id = shared.catalog.next_file_ids(ranges.len());
    let created_ms = shared.opts.clock.now_ms();
    let expected = inputs
        .iter()
        .map(|f| f.info().cells as usize)
        .sum::<usize>()
        / ranges.len();
    let bytes_in: u64 = inputs.iter().map(|f| f.len_bytes()).sum();
    let output = match major {
        true => Output::Major,
        false if bytes_in < shared.opts.columnar_min_compaction_bytes => Output::Young,
        false => Output::Minor,
    };
    let part = |i: usize, range: (RowKey, RowKey)| {
        let name = NewFile {
            file_id: first_id.0 + i as u64,
            created_ms,
        };
        merge_part(shared, t, inputs, range, output, name, expected)
    };
    let results: Vec<Result<Part>> = if ranges.len() == 1 {
        vec![part(0, ranges[0])]
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = ranges
                .iter()
                .enumerate()
                .map(|(i, range)| {
                    let part = &part;
                    std::thread::Builder::new()
                        .name(format!("telestore-subcompact-{i}"))
                        .spawn_scoped(s, move || {
                            let _io = shared.enter_background_io();
                            part(i, *range)
                        })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| match h {
                    Ok(h) => h.join().unwrap_or_else(|_| {
                        Err(Error::invalid("subcompaction", "panicked (a bug)"))
                    }),
                    Err(e) => Err(Error::io("spawning a subcompaction thread", e)),
                })
                .collect()
        })
    };
    let mut files: Vec<Arc<HFileReader>> = Vec::new();
    let (mut cells_in, mut cells_out, mut failed) = (0, 0, None);
    for res in results {
        match res {
            Ok(p) => {
                files.extend(p.file);
                cells_in += p.cells_in;
                cells_out += p.cells_out;
            }
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    if let Some(e) = failed {
        files.iter().for_each(|f| discard(shared, f));
        return Err(e);
    }
    Ok((files, cells_in, cells_out))
}

/// What one part of a compaction wrote.
struct Part {
    file: Option<Arc<HFileReader>>,
    cells_in: u64,
    cells_out: u64,
}

/// Merge the cells of `inputs` in `[lo, hi]` into file `name`.
fn merge_part(
    shared: &Shared,
    t: &Table,
    inputs: &[Arc<HFileReader>],
    (lo, hi): (RowKey, RowKey),
    output: Output,
    name: NewFile,
    expected: usize,
) -> Result<Part> {
    let reach = |rt: &RangeTombstone| {
        crate::key::device_range(rt.device, rt.from, rt.to).is_some_and(|(a, b)| a <= hi && b >= lo)
    };
    let tombs: Vec<RangeTombstone> = inputs
        .iter()
        .flat_map(|f| f.range_tombstones().iter().copied())
        .filter(|rt| reach(rt))
        .collect();
    let mut sources: Vec<Box<dyn CellSource>> = Vec::new();
    for f in inputs {
        sources.push(Box::new(FileSource::bulk(f.clone(), lo, hi)?));
    }
    let o = &t.schema.options;
    let (mode, keep_tombs) = if output == Output::Major {
        (
            Mode::major(ttl_cutoff(shared, t), o.max_versions, tombs),
            vec![],
        )
    } else {
        (Mode::Minor, tombs)
    };
    let mut f = Filter::new(mode);
    let mut counts = filter::MergeCounts::default();
    let file = write_hfile_as(shared, t, output, name, expected, &keep_tombs, |w| {
        counts = filter::merge(sources, &mut f, |c| {
            if shared.background.is_closing() {
                return Err(Error::Closed);
            }
            w.add(c)
        })?;
        pause_at("compact-writing");
        Ok(())
    })?;
    let keep = counts.cells_out > 0 || !keep_tombs.is_empty();
    if !keep {
        discard(shared, &file);
    }
    Ok(Part {
        file: keep.then_some(file),
        cells_in: counts.cells_in,
        cells_out: counts.cells_out,
    })
}

/// How many parts a compaction of `inputs` is split into: at most
/// `Options::subcompactions`, each reading at least
/// `subcompaction_min_bytes`; one when the inputs' key ranges do not
/// overlap (they are already sorted runs of their own, and parts of
/// them would be again).
fn parts_for(shared: &Shared, inputs: &[Arc<HFileReader>]) -> usize {
    let o = &shared.opts;
    let bytes: u64 = inputs.iter().map(|f| f.len_bytes()).sum();
    let by_size = (bytes / o.subcompaction_min_bytes.max(1)) as usize;
    let overlap = inputs.iter().enumerate().any(|(i, a)| {
        inputs[i + 1..].iter().any(|b| {
            let (a, b) = (a.info(), b.info());
            a.cells > 0 && b.cells > 0 && a.min_key <= b.max_key && b.min_key <= a.max_key
        })
    });
    if !overlap {
        return 1;
    }
    by_size.clamp(1, o.subcompactions.max(1))
}

/// `[lo, hi]` cut into at most `parts` key ranges holding about as many
/// of the inputs' blocks each (cut at blocks' first keys, so a key and
/// all its versions stay in one part).
fn part_ranges(
    inputs: &[Arc<HFileReader>],
    lo: RowKey,
    hi: RowKey,
    parts: usize,
) -> Vec<(RowKey, RowKey)> {
    let mut firsts: Vec<RowKey> = inputs
        .iter()
        .flat_map(|f| f.index().iter().map(|e| e.first_key))
        .filter(|k| *k > lo && *k <= hi)
        .collect();
    firsts.sort_unstable();
    let mut cuts: Vec<RowKey> = (1..parts)
        .filter_map(|j| firsts.get(firsts.len() * j / parts).copied())
        .collect();
    cuts.dedup();
    let mut out = Vec::with_capacity(cuts.len() + 1);
    let mut from = lo;
    for c in cuts {
        // `c > lo`, so it has a predecessor.
        let Some(before) = key_before(&c) else {
            continue;
        };
        out.push((from, before));
        from = c;
    }
    out.push((from, hi));
    out
}

/// Swap `inputs` for `output` in the region and the manifest. False when
/// the region changed (split, merge, or its files moved) meanwhile.
fn commit(
    shared: &Shared,
    t: &Table,
    r: &Arc<Region>,
    inputs: &[Arc<HFileReader>],
    output: Vec<Arc<HFileReader>>,
    major: bool,
) -> Result<bool> {
    let _g = t.flush_lock.lock_or_recover();
    let current = t.regions().iter().any(|x| Arc::ptr_eq(x, r));
    let files = r.version().files.clone();
    let all_there = inputs
        .iter()
        .all(|i| files.iter().any(|f| Arc::ptr_eq(f, i)));
    // A major compaction dropped markers and tombstones on the premise that
    // it saw every file: the only others may be newer flushes.
    let newest_in = inputs.iter().map(|f| f.info().max_seq).max().unwrap_or(0);
    let only_newer = files
        .iter()
        .filter(|f| !inputs.iter().any(|i| Arc::ptr_eq(f, i)))
        .all(|f| f.info().cells == 0 || f.info().min_seq > newest_in);
    if !current || !all_there || (major && !only_newer) {
        return Ok(false);
    }
    pause_at("compact-before-record");
    commit_locked(shared, t, r, inputs, output)?;
    pause_at("compact-after-record");
    Ok(true)
}

/// [`commit`] for a caller that holds the table's flush lock and knows
/// the region is current.
fn commit_locked(
    shared: &Shared,
    t: &Table,
    r: &Region,
    inputs: &[Arc<HFileReader>],
    output: Vec<Arc<HFileReader>>,
) -> Result<()> {
    let removed: Vec<FileId> = inputs.iter().map(|f| f.file_id()).collect();
    shared.append(&[Record::Files {
        table_id: t.id.0,
        region_id: r.id.0,
        added: output.iter().map(|f| meta_of(f)).collect(),
        removed: removed.iter().map(|f| f.0).collect(),
        flushed_seq: None,
    }])?;
    // Reads below the newest merged cell must not use the new files
    // (they may lack versions those cells hide): region.rs's read order.
    let merged_seq = inputs.iter().map(|f| f.info().max_seq).max().unwrap_or(0);
    r.edit(|v| {
        v.files.retain(|f| !removed.contains(&f.file_id()));
        v.files.extend(output);
        v.compacted_seq = v.compacted_seq.max(merged_seq);
    });
    // Files no region lists any more wait for their last reader.
    let listed: HashSet<u64> = {
        let m = shared.catalog.manifest();
        m.state()
            .tables
            .get(&t.id.0)
            .map(|e| e.all_files().keys().copied().collect())
            .unwrap_or_default()
    };
    let mut grave = shared.background.graveyard();
    grave.extend(
        inputs
            .iter()
            .filter(|f| !listed.contains(&f.file_id().0))
            .cloned(),
    );
    Ok(())
}

/// Rewrite the region's files that hold keys outside its range (shared
/// with a sibling since a split) into one file of its own range. The
/// caller holds the flush lock and the region map (a merge does this so
/// the merged region never lists two copies of a cell).
pub fn own_files(shared: &Shared, t: &Table, r: &Region) -> Result<()> {
    let hi = r.end.map(|e| key_before(&e).unwrap_or(KEY_MAX));
    let shared_files: Vec<Arc<HFileReader>> = r
        .version()
        .files
        .iter()
        .filter(|f| {
            let i = f.info();
            i.cells > 0 && (i.min_key < r.start || hi.is_some_and(|h| i.max_key > h))
        })
        .cloned()
        .collect();
    if shared_files.is_empty() {
        return Ok(());
    }
    let (out, _, _) = merge_files(shared, t, r, &shared_files, false)?;
    commit_locked(shared, t, r, &shared_files, out)
}

/// Remove a published file that will not be recorded.
fn discard(shared: &Shared, f: &HFileReader) {
    f.evict_cached();
    if let Err(e) = shared.backend.remove_file(f.path()) {
        tracing::warn!(
            "could not remove unused {} (removed at next open): {e}",
            f.path().display()
        );
    }
}

/// Delete graveyard files no reader holds any more.
pub fn sweep_graveyard(shared: &Shared) {
    let ready: Vec<Arc<HFileReader>> = {
        let mut g = shared.background.graveyard();
        let (ready, wait): (Vec<_>, Vec<_>) = g.drain(..).partition(|f| Arc::strong_count(f) == 1);
        *g = wait;
        ready
    };
    let mut dirs = HashSet::new();
    for f in ready {
        f.evict_cached();
        match shared.backend.remove_file(f.path()) {
            Ok(()) => {
                dirs.insert(f.path().parent().map(|p| p.to_path_buf()));
            }
            Err(e) => tracing::warn!(
                "could not remove {} (removed at next open): {e}",
                f.path().display()
            ),
        }
    }
    for d in dirs.into_iter().flatten() {
        if let Err(e) = shared.backend.sync_dir(&d) {
            tracing::warn!("could not sync {}: {e}", d.display());
        }
    }
}

/// A compaction worker: serve the queue until it closes.
pub fn worker(shared: Arc<Shared>, rx: crossbeam_channel::Receiver<Job>) {
    let _io = shared.enter_background_io();
    while let Ok(job) = rx.recv() {
        let Some(t) = shared.catalog.table_by_id(job.table) else {
            continue;
        };
        let Some(r) = t.region_by_id(job.region) else {
            continue;
        };
        r.stats.compaction_queued.store(0, Relaxed);
        if shared.poison.check().is_err() || shared.background.is_closing() {
            continue;
        }
        // Minor compactions repeat while the planner finds work.
        for _ in 0..8 {
            let run = std::panic::AssertUnwindSafe(|| compact_region(&shared, &t, &r, job.major));
            let res = std::panic::catch_unwind(run)
                .unwrap_or_else(|_| Err(Error::invalid("compaction", "panicked (a bug)")));
            match res {
                // Minor runs repeat; a major job goes on after dropping
                // expired files whole.
                Ok(Some(o)) if !job.major || o.kind == "ttl-drop" => continue,
                Ok(_) => break,
                Err(Error::Closed) => return,
                Err(e) => {
                    tracing::error!(
                        "compaction of table {} region {} failed: {e}",
                        t.schema.name,
                        r.id
                    );
                    break;
                }
            }
        }
    }
}

impl Shared {
    /// Queue a compaction check of a region (once until it starts).
    pub(crate) fn request_compaction(&self, table: TableId, r: &Region, major: bool) {
        if r.stats.compaction_queued.swap(1, Relaxed) == 1 && !major {
            return;
        }
        let job = Job {
            table,
            region: r.id,
            major,
        };
        // No worker (closing, or compaction_threads = 0): nothing is queued.
        if !self.background.queue_compaction(job) {
            r.stats.compaction_queued.store(0, Relaxed);
        }
    }

    /// Monitor tick: queue due major compactions and every region the
    /// planner has work for.
    pub(crate) fn schedule_compactions(&self) {
        let now = self.opts.clock.now_ms();
        let period = self.opts.major_compaction_period_ms;
        for t in self.catalog.tables() {
            for r in t.regions().iter() {
                let due = r.next_major_ms.load(Relaxed);
                if period > 0 && due == 0 {
                    r.next_major_ms
                        .store(now + jittered(period, u64::from(r.id.0 ^ t.id.0)), Relaxed);
                } else if period > 0 && now >= due {
                    r.next_major_ms
                        .store(now + jittered(period, due as u64), Relaxed);
                    self.request_compaction(t.id, r, true);
                    continue;
                }
                // Any work the planner sees: expired files to drop, and a
                // backstop for a check that was lost (a job queued for a
                // region that was split or merged before it ran).
                let files = r.version().files.clone();
                if plan_for(self, &t, &files, false).is_some() {
                    self.request_compaction(t.id, r, false);
                }
            }
        }
        self.refresh_compaction_debt();
        sweep_graveyard(self);
    }
}

/// `period` ± 50 %, spread deterministically by `salt` so regions do not
/// all compact at once.
fn jittered(period: i64, salt: u64) -> i64 {
    let spread = (crate::util::hash::splitmix64(salt) % 1000) as i64 - 500;
    period + period / 1000 * spread
}

impl Store {
    /// Compact every region of `table` now, on this thread: a major
    /// compaction with `major`, else whatever the planner picks (expired
    /// files, then minor runs) until it finds nothing. Returns what ran.
    /// A major compaction flushes the table's memstores first, so that
    /// what it compacts is everything written before the call.
    pub fn compact(&self, table: &str, major: bool) -> Result<Vec<Outcome>> {
        self.shared.check_writable("compact")?;
        self.shared.poison.check()?;
        let t = self.shared.catalog.table(table)?;
        if major {
            self.flush_tables(Some(table))?;
        }
        let mut out = Vec::new();
        for r in t.regions().iter() {
            while let Some(o) = compact_region(&self.shared, &t, r, major)? {
                let again = !major || o.kind == "ttl-drop";
                out.push(o);
                if !again {
                    break;
                }
            }
        }
        sweep_graveyard(&self.shared);
        Ok(out)
    }
}
