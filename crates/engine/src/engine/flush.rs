//! Flush: frozen memstore → HFile. The file is written to a temporary
//! name through the I/O backend, fsynced, renamed, the directory fsynced,
//! recorded in the manifest together with the region's new flushed
//! sequence number; only then does the memstore stop serving reads and
//! may the WAL segments it covered retire.

use super::region::Region;
use super::table::Table;
use super::Shared;
use crate::cell;
use crate::error::Result;
use crate::hfile::writer::PCO_LEVEL_MINOR;
use crate::hfile::{publish, HFileReader, HFileWriter, WriterOptions};
use crate::ids::TableId;
use crate::io::rate::Priority;
use crate::manifest::{FileMeta, Record};
use crate::memstore::{Memstore, ALL_TIME};
use crate::schema::BlockEncoding;
use crate::util::sync::LockExt;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Cells copied out of a memstore per step while writing.
const FLUSH_CHUNK_CELLS: usize = 4096;

/// Directory of a table's HFiles.
pub fn table_dir(shared: &Shared, table_id: TableId) -> PathBuf {
    shared.dir.join("tables").join(table_id.to_string())
}

/// HFile name for a file id.
pub fn file_name(file_id: u64) -> String {
    format!("{file_id:016}.hfile")
}

/// Flush every frozen memstore of `t`, the regions holding the most
/// frozen bytes first; then retire WAL segments and split regions that
/// grew past `region_split_bytes`. The caller must not hold the table's
/// flush lock.
pub fn flush_frozen(shared: &Shared, t: &Table) -> Result<usize> {
    let _g = t.flush_lock.lock_or_recover();
    let mut regions: Vec<_> = t.regions().iter().cloned().collect();
    regions.sort_by_key(|r| std::cmp::Reverse(r.memstore_bytes().1));
    let mut n = 0;
    let mut flushed = Vec::new();
    for r in &regions {
        let k = flush_region(shared, t, r)?;
        if k > 0 {
            flushed.push(r.id);
        }
        n += k;
    }
    if n > 0 {
        // Deleting old segments is housekeeping: a failure leaves them
        // listed (retried after the next flush) and loses nothing.
        if let Err(e) = shared.retire_wal() {
            tracing::warn!("could not retire WAL segments (retried later): {e}");
        }
    }
    for id in &flushed {
        super::split::maybe_split(shared, t, *id)?;
    }
    // Each flushed region (or its daughters) may now have enough files
    // for a minor compaction.
    let min = shared.opts.compaction.min_files;
    for r in t.regions().iter().filter(|r| r.file_count() >= min) {
        shared.request_compaction(t.id, r, false);
    }
    if n > 0 {
        shared.refresh_compaction_debt();
    }
    Ok(n)
}

/// Flush a region's frozen memstores, oldest first. Takes no table lock
/// (splits and merges call it with the region map held).
pub fn flush_region(shared: &Shared, t: &Table, r: &Region) -> Result<usize> {
    let mut n = 0;
    loop {
        let Some(mem) = r.version().frozen.first().cloned() else {
            break;
        };
        let t0 = std::time::Instant::now();
        let reader = if mem.cell_count() > 0 || !mem.range_tombstones().is_empty() {
            Some(write_file(shared, t, &mem)?)
        } else {
            None
        };
        let m = &shared.counters.metrics.flush_seconds;
        m.observe(t0.elapsed().as_secs_f64());
        let added = reader.iter().map(|f| meta_of(f)).collect();
        let bytes = reader.as_ref().map_or(0, |f| f.len_bytes());
        shared.append(&[Record::Files {
            table_id: t.id.0,
            region_id: r.id.0,
            added,
            removed: vec![],
            flushed_seq: Some(mem.max_seq()),
        }])?;
        r.edit(|v| {
            assert!(
                Arc::ptr_eq(&v.frozen[0], &mem),
                "frozen list changed during flush"
            );
            v.frozen.remove(0);
            v.files.extend(reader);
            v.flushed_seq = v.flushed_seq.max(mem.max_seq());
        });
        r.stats.flushes.fetch_add(1, Ordering::Relaxed);
        r.stats.flush_bytes.fetch_add(bytes, Ordering::Relaxed);
        shared.background.notify_flush_progress();
        n += 1;
    }
    Ok(n)
}

pub fn meta_of(r: &HFileReader) -> FileMeta {
    let i = r.info();
    FileMeta {
        file_id: r.file_id().0,
        len_bytes: r.len_bytes(),
        cells: i.cells,
        min_seq: i.min_seq,
        max_seq: i.max_seq,
        min_ts: i.min_ts,
        max_ts: i.max_ts,
    }
}

fn write_file(shared: &Shared, t: &Table, mem: &Memstore) -> Result<Arc<HFileReader>> {
    let width = cell::cell_width(t.schema.fields_width());
    let (lo, hi) = ([0u8; crate::key::KEY_LEN], crate::hfile::writer::KEY_MAX);
    let tombs = mem.range_tombstones();
    write_hfile(shared, t, Output::Flush, mem.cell_count(), &tombs, |w| {
        let mut buf = Vec::with_capacity(FLUSH_CHUNK_CELLS * width);
        let mut after = None;
        loop {
            buf.clear();
            if mem.copy_range(&lo, &hi, ALL_TIME, after, FLUSH_CHUNK_CELLS, &mut buf) == 0 {
                return Ok(());
            }
            for c in buf.chunks_exact(width) {
                w.add(c)?;
            }
            let last = cell::CellRef(&buf[buf.len() - width..]);
            after = Some((*last.key(), last.seq()));
        }
    })
}

/// What a new HFile is for: its block layout, how hard it is compressed
/// and whether its blocks go into the block cache. Young data is written
/// fast and old data densely, as RocksDB's compression per level does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// On the ingest path: always rows blocks (pco's encoder takes about
    /// twice zstd level 1's time, `benches/RESULTS.md`), zstd at most
    /// level 1; blocks cached when `Options::cache_flushed_blocks`. A
    /// columnar table's flushed files turn columnar at their first
    /// compaction.
    Flush,
    /// A minor compaction of young data (it reads less than
    /// `Options::columnar_min_compaction_bytes`): rows blocks and the
    /// flush's compression, like a flush, so that the first merges of
    /// fresh files cost little CPU; not cached.
    Young,
    /// The table's encoding, pco at [`PCO_LEVEL_MINOR`]; not cached (it
    /// rewrites old data).
    Minor,
    /// The table's encoding and levels (pco at `PCO_LEVEL_DEFAULT`); not
    /// cached.
    Major,
}

/// Write a new HFile of table `t` (for `output`): `fill` adds the cells
/// in order, then
/// the file gets `tombs`, is fsynced under a temporary name, renamed,
/// the directory fsynced, and the file opened (checked). On any error the
/// temporary file is removed. The caller records it in the manifest.
pub fn write_hfile(
    shared: &Shared,
    t: &Table,
    output: Output,
    expected_cells: usize,
    tombs: &[crate::cell::RangeTombstone],
    fill: impl FnOnce(&mut HFileWriter) -> Result<()>,
) -> Result<Arc<HFileReader>> {
    let name = NewFile {
        file_id: shared.catalog.next_file_id().0,
        created_ms: shared.opts.clock.now_ms(),
    };
    write_hfile_as(shared, t, output, name, expected_cells, tombs, fill)
}

/// The id and creation time of a file about to be written (the parts of
/// one compaction share the time: `compaction::plan::runs`).
#[derive(Clone, Copy, Debug)]
pub struct NewFile {
    pub file_id: u64,
    pub created_ms: i64,
}

/// [`write_hfile`] under a chosen id and creation time.
pub fn write_hfile_as(
    shared: &Shared,
    t: &Table,
    output: Output,
    name: NewFile,
    expected_cells: usize,
    tombs: &[crate::cell::RangeTombstone],
    fill: impl FnOnce(&mut HFileWriter) -> Result<()>,
) -> Result<Arc<HFileReader>> {
    let file_id = name.file_id;
    let dir = table_dir(shared, t.id);
    let dest = dir.join(file_name(file_id));
    let tmp = dir.join(format!("{}.tmp", file_name(file_id)));
    let mut opts = WriterOptions::for_table(t.id.0, &t.schema, expected_cells, name.created_ms);
    opts.direct = shared.opts.direct_hfile_writes;
    opts.limiter = shared.background.limiter.clone().map(|l| match output {
        Output::Flush => (l, Priority::High),
        Output::Young | Output::Minor | Output::Major => (l, Priority::Low),
    });
    opts.encoding = t.encoding();
    let warm = match output {
        Output::Flush => {
            opts.compression = opts.compression.for_flush();
            opts.encoding = BlockEncoding::Rows;
            shared.opts.cache_flushed_blocks
        }
        Output::Young => {
            opts.compression = opts.compression.for_flush();
            opts.encoding = BlockEncoding::Rows;
            false
        }
        Output::Minor => {
            opts.pco_level = PCO_LEVEL_MINOR;
            false
        }
        Output::Major => false,
    };
    let created = HFileWriter::create(&*shared.backend, &tmp, opts).map(|w| match warm {
        true => w.warm_cache(shared.cache.clone(), file_id),
        false => w,
    });
    let written = created.and_then(|mut w| {
        fill(&mut w)?;
        w.finish(tombs)?;
        publish(&*shared.backend, &tmp, &dest)
    });
    if let Err(e) = written {
        if tmp.exists() {
            let _ = shared.backend.remove_file(&tmp);
        }
        return Err(e);
    }
    let r = HFileReader::open_for_table(&dest, file_id, &t.schema, shared.cache.clone())?;
    let ahead = shared.opts.readahead_new_files_bytes;
    if !warm && ahead > 0 && r.len_bytes() <= ahead && r.advise_willneed() {
        shared
            .counters
            .files_read_ahead
            .fetch_add(1, Ordering::Relaxed);
    }
    Ok(Arc::new(r))
}
