//! Open and recover: lock the directory, pick the I/O backend, clean up
//! orphans, load the manifest and HFiles, replay the WAL, start threads.

use super::apply::{Applier, APPLY_QUEUE_BYTES};
use super::budget::ByteBudget;
use super::commit::{apply, Committer, Op};
use super::flush::{self, file_name};
use super::region::{Region, RegionVersion};
use super::table::Table;
use super::{Options, Shared, Store};
use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::hfile::HFileReader;
use crate::ids::{RegionId, SeqNo, TableId};
use crate::io::{self, BackendRef, IoChoice};
use crate::key::DeviceId;
use crate::manifest::{Manifest, TableEntry};
use crate::read::prefetch::Prefetcher;
use crate::wal::frame::{Entry, EntryKind};
use crate::wal::{self, WalWriter};
use crossbeam_channel::{bounded, unbounded};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

/// Open in named phases: take the directory ([`lock_phase`]), pick the
/// I/O backend ([`select_backend`]), load the catalog ([`load_catalog`]:
/// manifest, WAL directory, HFiles, regions), replay the WAL
/// ([`replay_phase`]), build the shared state ([`build_shared`]) and,
/// unless read-only, start the threads ([`start_threads`]).
pub fn open(dir: &Path, opts: Options) -> Result<Store> {
    let read_only = opts.read_only;
    let lock = lock_phase(dir, &opts)?;
    let backend = select_backend(&opts)?;
    let catalog = load_catalog(dir, &opts, &backend)?;
    let replayed = replay_phase(dir, &opts, &backend, &catalog)?;
    let entries = replayed.outcome.entries;
    let next_seq = replayed.next_seq;
    let (shared, channels) = build_shared(dir, opts, backend, catalog, replayed, lock)?;
    if read_only {
        // No writer, flusher, compactor or monitor: nothing may change
        // the directory. Replayed edits stay in memstores for reads.
        tracing::debug!(
            "opened {} read-only ({entries} WAL entries replayed)",
            dir.display()
        );
        return Ok(Store {
            shared,
            commit_tx: channels.commit_tx,
            monitor_tx: None,
            threads: None,
        });
    }
    // Memstores frozen during replay are flushed now (no writer can run
    // before `open` returns).
    for t in shared.catalog.tables() {
        if t.frozen_count() > 0 {
            shared.background.request_flush(t.id);
        }
    }
    let commit_tx = channels.commit_tx.clone();
    let (monitor_tx, threads) = start_threads(&shared, channels, next_seq)?;
    tracing::info!(
        "opened {} (io: {}, {entries} WAL entries replayed, next seq {next_seq})",
        dir.display(),
        shared.backend.kind().name(),
    );
    Ok(Store {
        shared,
        commit_tx,
        monitor_tx: Some(monitor_tx),
        threads: Some(threads),
    })
}

/// Phase 1: check the options, create the directory (read-write) or
/// require it (read-only), and lock it.
fn lock_phase(dir: &Path, opts: &Options) -> Result<std::fs::File> {
    opts.validate()?;
    if opts.read_only {
        require_store(dir)?;
    } else {
        for d in [dir.to_path_buf(), dir.join("tables")] {
            std::fs::create_dir_all(&d).map_err(|e| Error::io(&d, e))?;
        }
    }
    lock_dir(dir, opts.read_only)
}

/// Phase 2: the backend the options name, else `TELESTORE_IO`'s, else the
/// probe's.
fn select_backend(opts: &Options) -> Result<BackendRef> {
    match &opts.backend {
        Some(b) => Ok(b.clone()),
        None => io::select(match opts.io {
            Some(c) => c,
            None => IoChoice::from_env()?,
        }),
    }
}

/// What [`load_catalog`] found on disk.
struct Loaded {
    manifest: Manifest,
    wal_dir: std::path::PathBuf,
    wal_lock: Option<std::fs::File>,
    cache: Arc<BlockCache>,
    tables: HashMap<u32, Arc<Table>>,
    /// The highest sequence number the files and manifest record.
    max_seq: u64,
    /// Per table, the lowest flushed sequence number of its regions: WAL
    /// segments holding nothing newer are retired after replay.
    flushed: HashMap<TableId, SeqNo>,
}

/// Phase 3: the manifest, the WAL directory (locked), every table's
/// regions and HFiles.
fn load_catalog(dir: &Path, opts: &Options, backend: &BackendRef) -> Result<Loaded> {
    let read_only = opts.read_only;
    let mut manifest = if read_only {
        Manifest::open_read_only(dir, backend.clone())?
    } else {
        Manifest::open(dir, backend.clone())?
    };
    let (wal_dir, record) = wal_dir_of(dir, opts.wal_dir.as_deref(), &manifest, read_only)?;
    let wal_lock = lock_wal_dir(dir, &wal_dir, read_only)?;
    if let Some(r) = record {
        // Recorded once the directory is ours, before its first segment.
        manifest.append(&[r])?;
    }
    let cache = Arc::new(BlockCache::new(opts.block_cache_bytes));
    let mut tables = HashMap::new();
    let mut max_seq = 0u64;
    for (id, entry) in &manifest.state().tables {
        let files = load_files(dir, *id, entry, &cache, &**backend, read_only)?;
        for f in files.values() {
            max_seq = max_seq.max(f.info().max_seq);
        }
        let fw = entry.schema.fields_width();
        let mut regions = Vec::new();
        for (start, r) in &entry.regions {
            max_seq = max_seq.max(r.flushed_seq);
            let mine = r
                .files
                .keys()
                .filter_map(|f| files.get(f).cloned())
                .collect();
            let v = RegionVersion::new(fw, mine, r.flushed_seq);
            let end = entry.end_of(start);
            regions.push(Arc::new(Region::new(RegionId(r.id), *start, end, v)));
        }
        let t = Table::new(
            TableId(*id),
            entry.schema.clone(),
            regions,
            opts.latest_cache_devices,
        );
        tables.insert(*id, Arc::new(t));
    }
    let flushed = manifest
        .state()
        .tables
        .iter()
        .map(|(id, t)| {
            let seq = t.regions.values().map(|r| r.flushed_seq).min();
            (TableId(*id), SeqNo(seq.unwrap_or(0)))
        })
        .collect();
    Ok(Loaded {
        manifest,
        wal_dir,
        wal_lock,
        cache,
        tables,
        max_seq,
        flushed,
    })
}

/// What [`replay_phase`] leaves: the WAL's segments and tail, and the next
/// sequence number.
struct Replayed {
    outcome: wal::ReplayOutcome,
    next_seq: u64,
}

/// Phase 4: replay the WAL into the catalog's memstores.
fn replay_phase(
    dir: &Path,
    opts: &Options,
    backend: &BackendRef,
    catalog: &Loaded,
) -> Result<Replayed> {
    let now = opts.clock.now_ms();
    let recovery = match (opts.read_only, opts.salvage_wal) {
        (true, _) => wal::Recovery::ReadOnly,
        (false, false) => wal::Recovery::Repair,
        (false, true) => wal::Recovery::Salvage,
    };
    let outcome = wal::replay(&catalog.wal_dir, &**backend, recovery, |e| {
        // Keep each memstore within the threshold while replaying a long
        // WAL; the frozen ones are flushed as soon as the threads run.
        for r in replay_entry(&catalog.tables, e, now)? {
            if r.active().bytes() >= opts.flush_threshold_bytes {
                r.freeze();
            }
        }
        Ok(())
    })?;
    let max_seq = catalog.max_seq.max(outcome.last_seq);
    let next_seq = max_seq.checked_add(1).ok_or_else(|| {
        Error::corrupt(
            "sequence numbers exhausted (u64::MAX recorded)",
            dir.join("MANIFEST"),
            0,
        )
    })?;
    Ok(Replayed { outcome, next_seq })
}

/// The receiving ends of the threads' channels, until they start.
struct Channels {
    flush_rx: crossbeam_channel::Receiver<Option<TableId>>,
    commit_tx: crossbeam_channel::Sender<super::commit::Msg>,
    commit_rx: crossbeam_channel::Receiver<super::commit::Msg>,
    compact_rx: crossbeam_channel::Receiver<super::compact::Job>,
}

/// Phase 5: open the WAL for writing (retiring what every region flushed)
/// and build the state the store and its threads share.
fn build_shared(
    dir: &Path,
    opts: Options,
    backend: BackendRef,
    catalog: Loaded,
    replayed: Replayed,
    dir_lock: std::fs::File,
) -> Result<(Arc<Shared>, Channels)> {
    let Loaded {
        manifest,
        wal_dir,
        wal_lock,
        cache,
        tables,
        flushed,
        ..
    } = catalog;
    let Replayed { outcome, next_seq } = replayed;
    let wal_tail = outcome.tail_note.clone();
    let writer = if opts.read_only {
        WalWriter::read_only(&wal_dir, backend.clone(), outcome.segments)
    } else {
        let mut w = WalWriter::open(
            &wal_dir,
            backend.clone(),
            outcome.segments,
            outcome.last_segment,
            opts.wal_segment_bytes,
            opts.wal_preallocate,
            opts.wal_syncs_in_flight,
        )?;
        w.retire(&|t| flushed.get(&t).copied().unwrap_or_default())?;
        w
    };
    let (flush_tx, flush_rx) = unbounded();
    let (commit_tx, commit_rx) = unbounded();
    let (compact_tx, compact_rx) = unbounded();
    let limit = opts.background_write_bytes_per_sec;
    let limiter = (limit > 0).then(|| Arc::new(crate::io::rate::RateLimiter::new(limit)));
    let prefetch = Prefetcher::start(std::thread::available_parallelism().map_or(2, |n| n.get()))
        .map_err(|e| Error::io("<read-ahead threads>", e))?;
    let shared = Arc::new(Shared {
        dir: dir.to_path_buf(),
        backend,
        opts,
        cache,
        catalog: super::catalog::Catalog::new(manifest, tables.into_values().collect()),
        write: super::writepath::WritePath::new(writer, commit_tx.clone(), next_seq - 1),
        poison: super::poison::Poison::default(),
        background: super::background::Background::new(flush_tx, compact_tx, limiter, prefetch),
        counters: super::counters::Counters::default(),
        wal_tail,
        locks: super::DirLocks {
            dir: dir_lock,
            wal: wal_lock,
        },
    });
    let channels = Channels {
        flush_rx,
        commit_tx,
        commit_rx,
        compact_rx,
    };
    Ok((shared, channels))
}

/// Phase 6: the commit and apply threads, the compaction workers, the
/// flusher and the region monitor, named (`threads.rs` says the order they
/// stop in). Returns the monitor's stop channel with them.
fn start_threads(
    shared: &Arc<Shared>,
    channels: Channels,
    next_seq: u64,
) -> Result<(crossbeam_channel::Sender<()>, super::threads::Threads)> {
    let Channels {
        flush_rx,
        commit_rx,
        compact_rx,
        ..
    } = channels;
    // Unbounded in messages, bounded in bytes (the budget).
    let (apply_tx, apply_rx) = unbounded();
    let budget = Arc::new(ByteBudget::new(APPLY_QUEUE_BYTES));
    let committer = Committer::new(
        shared.clone(),
        commit_rx,
        apply_tx,
        budget.clone(),
        next_seq,
    )?;
    let applier = Applier {
        shared: shared.clone(),
        rx: apply_rx,
        budget,
    };
    let nice = shared.opts.background_nice;
    let (monitor_tx, monitor_rx) = bounded::<()>(1);
    let s = shared.clone();
    let monitor = spawn("telestore-monitor", move || {
        super::regions::monitor(s, monitor_rx)
    })?;
    let commit = spawn("telestore-commit", move || committer.run())?;
    let apply = spawn_niced("telestore-apply", nice, move || applier.run())?;
    let mut compactors = Vec::new();
    for i in 0..shared.opts.compaction_threads {
        let (s, rx) = (shared.clone(), compact_rx.clone());
        compactors.push(spawn_niced(
            &format!("telestore-compact-{i}"),
            nice,
            move || super::compact::worker(s, rx),
        )?);
    }
    drop(compact_rx);
    let s = shared.clone();
    let flusher = spawn_niced("telestore-flush", nice, move || flusher(s, flush_rx))?;
    let threads = super::threads::Threads {
        monitor,
        commit,
        apply,
        compactors,
        flusher,
    };
    Ok((monitor_tx, threads))
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<std::thread::JoinHandle<()>> {
    spawn_niced(name, 0, f)
}

/// Spawn a thread that first lowers its own priority to `nice` (0: as
/// is). A refusal is logged and the thread runs at normal priority.
fn spawn_niced(
    name: &str,
    nice: i32,
    f: impl FnOnce() + Send + 'static,
) -> Result<std::thread::JoinHandle<()>> {
    let label = name.to_string();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            if nice > 0 {
                let tid = rustix::thread::gettid();
                if let Err(e) = rustix::process::setpriority_process(Some(tid), nice) {
                    tracing::warn!("{label}: could not lower priority to nice {nice}: {e}");
                }
            }
            f()
        })
        .map_err(|e| Error::io(name, e))
}

fn flusher(shared: Arc<Shared>, rx: crossbeam_channel::Receiver<Option<TableId>>) {
    let _io = shared.enter_background_io();
    while let Ok(Some(id)) = rx.recv() {
        let Some(t) = shared.catalog.tables().into_iter().find(|t| t.id == id) else {
            continue;
        };
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            flush::flush_frozen(&shared, &t)
        }));
        let err = match res {
            Ok(Ok(_)) => continue,
            Ok(Err(e)) => e,
            Err(_) => Error::invalid("flush", "the flush thread panicked (a bug)"),
        };
        // Writers waiting for flush room wake up on the poison.
        shared.poison.stop(&err);
        shared.background.notify_flush_progress();
    }
}

/// `Err` naming `<dir>/MANIFEST` when `dir` holds no store (what a
/// read-only open or `verify` must not create).
pub(crate) fn require_store(dir: &Path) -> Result<()> {
    let m = dir.join(crate::manifest::MANIFEST_NAME);
    if m.exists() {
        return Ok(());
    }
    let e = std::io::Error::new(std::io::ErrorKind::NotFound, "no telestore store here");
    Err(Error::io(m, e))
}

/// The store's WAL directory: `wal/` under it unless the manifest records
/// another (`Options::wal_dir` at creation). Asking for a directory other
/// than the one the store uses is refused; a new store (no table, no WAL
/// segment yet) takes the one asked for, with the record to append.
fn wal_dir_of(
    dir: &Path,
    asked: Option<&Path>,
    manifest: &Manifest,
    read_only: bool,
) -> Result<(std::path::PathBuf, Option<crate::manifest::Record>)> {
    let default = dir.join("wal");
    let recorded = manifest
        .state()
        .wal_dir
        .clone()
        .map(std::path::PathBuf::from);
    let using = recorded.clone().unwrap_or_else(|| default.clone());
    let Some(asked) = asked else {
        return Ok((create_wal_dir(using, read_only)?, None));
    };
    let same = |a: &Path, b: &Path| {
        a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
    };
    if same(asked, &using) {
        return Ok((create_wal_dir(using, read_only)?, None));
    }
    let fresh = recorded.is_none()
        && manifest.state().tables.is_empty()
        && wal::segment::list(&default).map_or(true, |s| s.is_empty());
    if !fresh || read_only {
        return Err(Error::invalid(
            "wal_dir",
            format!(
                "{} keeps its WAL in {}; it was opened with WAL directory {}. \
                 The WAL directory is chosen when a store is created and recorded \
                 in its manifest: open it with its own (or without the option)",
                dir.display(),
                using.display(),
                asked.display()
            ),
        ));
    }
    let path = asked
        .to_str()
        .ok_or_else(|| Error::invalid("wal_dir", format!("{} is not UTF-8", asked.display())))?;
    crate::manifest::check_wal_dir(path).map_err(|m| Error::invalid("wal_dir", m))?;
    let record = crate::manifest::Record::WalDir {
        path: path.to_string(),
    };
    Ok((create_wal_dir(asked.to_path_buf(), false)?, Some(record)))
}

fn create_wal_dir(d: std::path::PathBuf, read_only: bool) -> Result<std::path::PathBuf> {
    if !read_only {
        std::fs::create_dir_all(&d).map_err(|e| Error::io(&d, e))?;
    }
    Ok(d)
}

/// A WAL directory outside the store gets a lock of its own, so no two
/// stores ever write one (a read-only open shares it where it exists).
fn lock_wal_dir(dir: &Path, wal_dir: &Path, read_only: bool) -> Result<Option<std::fs::File>> {
    if wal_dir == dir.join("wal") || (read_only && !wal_dir.join("LOCK").exists()) {
        return Ok(None);
    }
    match lock_dir(wal_dir, read_only) {
        Err(Error::Locked { .. }) => Err(Error::invalid(
            "wal_dir",
            format!(
                "WAL directory {} is in use by another store",
                wal_dir.display()
            ),
        )),
        other => other.map(Some),
    }
}

/// Lock the directory: exclusively to write, shared to read (several
/// read-only opens at once, none while a writer has it). A read-only open
/// of a store without a `LOCK` file (never opened to write here) creates
/// none: it locks the manifest file instead (a later writer creates
/// `LOCK` and does not see that lock: documented in `formats/README.md`).
pub(crate) fn lock_dir(dir: &Path, shared: bool) -> Result<std::fs::File> {
    let p = dir.join("LOCK");
    let mut o = std::fs::OpenOptions::new();
    if shared {
        o.read(true);
    } else {
        o.create(true).truncate(false).write(true);
    }
    let f = match o.open(&p) {
        Err(e) if shared && e.kind() == std::io::ErrorKind::NotFound => {
            let m = dir.join(crate::manifest::MANIFEST_NAME);
            std::fs::File::open(&m).map_err(|e| Error::io(&m, e))?
        }
        other => other.map_err(|e| Error::io(&p, e))?,
    };
    let got = if shared {
        f.try_lock_shared()
    } else {
        f.try_lock()
    };
    match got {
        Ok(()) => Ok(f),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::Locked {
            dir: dir.to_path_buf(),
        }),
        Err(std::fs::TryLockError::Error(e)) => Err(Error::io(&p, e)),
    }
}

/// Open a table's live files (each once, shared by the regions listing
/// it); delete temporaries and files the manifest does not list (a crash
/// between publishing a file and recording it).
fn load_files(
    dir: &Path,
    id: u32,
    entry: &TableEntry,
    cache: &Arc<BlockCache>,
    backend: &dyn io::Backend,
    read_only: bool,
) -> Result<HashMap<u64, Arc<HFileReader>>> {
    let tdir = dir.join("tables").join(id.to_string());
    let all = entry.all_files();
    let live: HashSet<String> = all.keys().map(|f| file_name(*f)).collect();
    let mut removed = false;
    let listing = if read_only {
        Vec::new()
    } else {
        std::fs::create_dir_all(&tdir).map_err(|e| Error::io(&tdir, e))?;
        std::fs::read_dir(&tdir)
            .map_err(|e| Error::io(&tdir, e))?
            .collect()
    };
    for ent in listing {
        let ent = ent.map_err(|e| Error::io(&tdir, e))?;
        let name = ent.file_name().to_string_lossy().to_string();
        if !live.contains(&name) {
            tracing::warn!("removing orphaned file {}", ent.path().display());
            backend.remove_file(&ent.path())?;
            removed = true;
        }
    }
    if removed {
        backend.sync_dir(&tdir)?;
    }
    all.keys()
        .map(|f| {
            let p = table_dir_of(dir, id).join(file_name(*f));
            let r = HFileReader::open_for_table(&p, *f, &entry.schema, cache.clone())?;
            Ok((*f, Arc::new(r)))
        })
        .collect()
}

fn table_dir_of(dir: &Path, id: u32) -> std::path::PathBuf {
    dir.join("tables").join(id.to_string())
}

/// Apply one WAL entry; each region skips what its files already hold.
fn replay_entry(
    tables: &HashMap<u32, Arc<Table>>,
    e: &Entry<'_>,
    now_ms: i64,
) -> Result<Vec<Arc<Region>>> {
    let t = tables
        .get(&e.table_id)
        .ok_or_else(|| Error::decode("wal entry", format!("unknown table id {}", e.table_id)))?;
    let op = match e.kind {
        EntryKind::Put => {
            let w = t.schema.row_width();
            if e.payload.len() != e.count as usize * w {
                return Err(Error::decode(
                    "wal entry",
                    format!(
                        "{} rows in {} bytes, table row width {w}",
                        e.count,
                        e.payload.len()
                    ),
                ));
            }
            Op::Put(e.payload.to_vec())
        }
        EntryKind::DeletePoints => Op::DeletePoints(
            e.payload
                .chunks_exact(16)
                .map(|c| {
                    (
                        DeviceId(crate::util::bin::le_u64(c, 0)),
                        crate::util::bin::le_u64(c, 8) as i64,
                    )
                })
                .collect(),
        ),
        EntryKind::DeleteRange => Op::DeleteRange {
            device: DeviceId(crate::util::bin::le_u64(e.payload, 0)),
            from: crate::util::bin::le_u64(e.payload, 8) as i64,
            to: crate::util::bin::le_u64(e.payload, 16) as i64,
        },
    };
    Ok(apply(t, e.first_seq, &op, now_ms))
}
