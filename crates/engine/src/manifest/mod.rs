//! The manifest: the catalog of tables, each table's live HFiles and its
//! flushed sequence number. An append-only log of CRC-framed edits,
//! rewritten atomically (temp → fsync → rename → fsync dir) when it grows.
//! Spec: `formats/manifest.md`.

pub mod record;

pub use record::{FileMeta, Record, RegionDef};

use crate::error::{Error, Result};
use crate::io::{BackendRef, IoFile, OpenMode};
use crate::key::RowKey;
use crate::region::KEY_MIN;
use crate::schema::TableSchema;
use record::{decode_framed_v, Framed, MANIFEST_HEADER_LEN};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const MANIFEST_NAME: &str = "MANIFEST";
/// Files listed per record in a snapshot (a `FileMeta` is 56 bytes).
pub const SNAPSHOT_FILES_PER_RECORD: usize = 10_000;
/// Rewrite the log as a snapshot once it exceeds this many bytes.
pub const REWRITE_BYTES: u64 = 4 << 20;

/// One region as the manifest knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionEntry {
    pub id: u32,
    /// Every cell of the region with a sequence number up to this one is
    /// in its files.
    pub flushed_seq: u64,
    /// The region's files. After a split both daughters list the parent's
    /// files (each reads only its own key range of them).
    pub files: BTreeMap<u64, FileMeta>,
}

/// One table as the manifest knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableEntry {
    pub schema: TableSchema,
    /// Regions by start key; each ends where the next one starts.
    pub regions: BTreeMap<RowKey, RegionEntry>,
    pub next_region_id: u32,
}

impl TableEntry {
    /// Start key and entry of region `id`.
    pub fn region(&self, id: u32) -> Option<(RowKey, &RegionEntry)> {
        self.regions
            .iter()
            .find(|(_, r)| r.id == id)
            .map(|(k, r)| (*k, r))
    }

    /// End (exclusive) of the region starting at `start`.
    pub fn end_of(&self, start: &RowKey) -> Option<RowKey> {
        use std::ops::Bound::{Excluded, Unbounded};
        self.regions
            .range((Excluded(*start), Unbounded))
            .next()
            .map(|(k, _)| *k)
    }

    /// Every file listed by any region, once.
    pub fn all_files(&self) -> BTreeMap<u64, FileMeta> {
        self.regions
            .values()
            .flat_map(|r| r.files.iter().map(|(id, f)| (*id, *f)))
            .collect()
    }

    /// Claim new region ids: each must be at least `next_region_id`.
    fn claim_ids(&mut self, ids: &[u32]) -> std::result::Result<(), String> {
        match ids.iter().find(|id| **id < self.next_region_id) {
            Some(id) => Err(format!("region id {id} reused")),
            None => {
                let top = ids.iter().max().copied().unwrap_or(0);
                let next = top.checked_add(1).ok_or("region ids exhausted")?;
                self.next_region_id = self.next_region_id.max(next);
                Ok(())
            }
        }
    }
}

/// The state the log describes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct State {
    pub tables: BTreeMap<u32, TableEntry>,
    pub max_file_id: u64,
    /// The device registry: id → (name, tags).
    pub devices: BTreeMap<u64, DeviceEntry>,
    /// Name → id of the registry (kept with `devices`).
    pub device_names: BTreeMap<String, u64>,
    /// Where the WAL is, when not `wal/` under the store (absolute).
    pub wal_dir: Option<String>,
}

/// A registered device.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceEntry {
    pub name: String,
    pub tags: Vec<(String, String)>,
}

/// A recorded WAL directory: an absolute path of 1..=`WAL_DIR_MAX` bytes.
pub fn check_wal_dir(path: &str) -> std::result::Result<(), String> {
    if path.is_empty() || path.len() > record::WAL_DIR_MAX {
        return Err(format!(
            "WAL directory of {} bytes (1..={})",
            path.len(),
            record::WAL_DIR_MAX
        ));
    }
    if !Path::new(path).is_absolute() {
        return Err(format!("WAL directory {path:?} is not an absolute path"));
    }
    Ok(())
}

fn check_device(id: u64, name: &str, tags: &[(String, String)]) -> std::result::Result<(), String> {
    use record::{DEVICE_TAGS_MAX, DEVICE_TEXT_MAX};
    let text_ok = |t: &str| !t.is_empty() && t.len() <= DEVICE_TEXT_MAX;
    if !text_ok(name) {
        return Err(format!(
            "device {id}: name of {} bytes (1..={DEVICE_TEXT_MAX})",
            name.len()
        ));
    }
    if tags.len() > DEVICE_TAGS_MAX || tags.iter().any(|(k, v)| !text_ok(k) || !text_ok(v)) {
        return Err(format!(
            "device {id}: tags beyond {DEVICE_TAGS_MAX} or empty/over-long"
        ));
    }
    Ok(())
}

fn check_region_map(regions: &[RegionDef], next: u32) -> std::result::Result<(), String> {
    if regions.len() > record::REGIONS_PER_RECORD_MAX {
        return Err(format!(
            "{} regions (limit {})",
            regions.len(),
            record::REGIONS_PER_RECORD_MAX
        ));
    }
    if regions.first().map(|r| r.start) != Some(KEY_MIN) {
        return Err("region map does not start at the zero key".into());
    }
    if regions.windows(2).any(|w| w[0].start >= w[1].start) {
        return Err("region starts not strictly increasing".into());
    }
    let ids: std::collections::BTreeSet<u32> = regions.iter().map(|r| r.id).collect();
    if ids.len() != regions.len() || ids.iter().any(|id| *id >= next) {
        return Err("region ids repeated or not below next_region_id".into());
    }
    Ok(())
}

impl State {
    #[expect(
        clippy::too_many_lines,
        reason = "one match arm per manifest record kind, each a few lines (formats/manifest.md lists them in this order)"
    )]
    pub(crate) fn apply(&mut self, r: &Record) -> std::result::Result<(), String> {
        match r {
            Record::CreateTable {
                table_id,
                schema,
                regions,
                next_region_id,
            } => {
                if self.tables.contains_key(table_id) {
                    return Err(format!("table id {table_id} created twice"));
                }
                if self.table_id(&schema.name).is_some() {
                    return Err(format!("table name {:?} created twice", schema.name));
                }
                check_region_map(regions, *next_region_id)?;
                let regions = regions
                    .iter()
                    .map(|d| {
                        let e = RegionEntry {
                            id: d.id,
                            flushed_seq: 0,
                            files: BTreeMap::new(),
                        };
                        (d.start, e)
                    })
                    .collect();
                self.tables.insert(
                    *table_id,
                    TableEntry {
                        schema: schema.clone(),
                        regions,
                        next_region_id: *next_region_id,
                    },
                );
            }
            Record::Files {
                table_id,
                region_id,
                added,
                removed,
                flushed_seq,
            } => {
                let t = self.table_mut(*table_id)?;
                let r = t
                    .regions
                    .values_mut()
                    .find(|r| r.id == *region_id)
                    .ok_or_else(|| format!("edit for unknown region {region_id}"))?;
                for id in removed {
                    r.files.remove(id);
                }
                for f in added {
                    r.files.insert(f.file_id, *f);
                }
                if let Some(s) = flushed_seq {
                    r.flushed_seq = r.flushed_seq.max(*s);
                }
                let top = added.iter().map(|f| f.file_id).max().unwrap_or(0);
                self.max_file_id = self.max_file_id.max(top);
            }
            Record::FileIdFloor { max_file_id } => {
                self.max_file_id = self.max_file_id.max(*max_file_id);
            }
            Record::WalDir { path } => {
                check_wal_dir(path)?;
                self.wal_dir = Some(path.clone());
            }
            Record::Device { id, name, tags } => {
                check_device(*id, name, tags)?;
                let taken = self.device_names.get(name).is_some_and(|i| i != id);
                if taken {
                    return Err(format!("device name {name:?} already names another id"));
                }
                let e = self.devices.entry(*id).or_default();
                if !e.name.is_empty() && e.name != *name {
                    return Err(format!("device {id} renamed from {:?} to {name:?}", e.name));
                }
                *e = DeviceEntry {
                    name: name.clone(),
                    tags: tags.clone(),
                };
                self.device_names.insert(name.clone(), *id);
            }
            Record::Split {
                table_id,
                parent,
                at,
                left,
                right,
            } => {
                let t = self.table_mut(*table_id)?;
                let (start, p) = t
                    .region(*parent)
                    .map(|(k, r)| (k, r.clone()))
                    .ok_or_else(|| format!("split of unknown region {parent}"))?;
                let inside = *at > start && t.end_of(&start).is_none_or(|e| *at < e);
                if !inside || left == right {
                    return Err(format!("bad split of region {parent}"));
                }
                if t.regions.len() >= record::REGIONS_PER_RECORD_MAX {
                    return Err(format!(
                        "table has {} regions, the most a snapshot can list",
                        t.regions.len()
                    ));
                }
                t.claim_ids(&[*left, *right])?;
                let daughter = |id: u32| RegionEntry { id, ..p.clone() };
                t.regions.insert(start, daughter(*left));
                t.regions.insert(*at, daughter(*right));
            }
            Record::Merge {
                table_id,
                left,
                right,
                merged,
            } => {
                let t = self.table_mut(*table_id)?;
                let (start, l) = t
                    .region(*left)
                    .map(|(k, r)| (k, r.clone()))
                    .ok_or_else(|| format!("merge of unknown region {left}"))?;
                let end = t.end_of(&start).ok_or("merge of the last region")?;
                if t.regions[&end].id != *right {
                    return Err(format!("regions {left} and {right} are not adjacent"));
                }
                t.claim_ids(&[*merged])?;
                let r = t.regions.remove(&end).ok_or("right region vanished")?;
                let mut files = l.files;
                files.extend(r.files);
                let m = RegionEntry {
                    id: *merged,
                    flushed_seq: l.flushed_seq.max(r.flushed_seq),
                    files,
                };
                t.regions.insert(start, m);
            }
            Record::TableEncoding { table_id, encoding } => {
                self.table_mut(*table_id)?.schema.options.encoding = *encoding;
            }
        }
        Ok(())
    }

    fn table_mut(&mut self, id: u32) -> std::result::Result<&mut TableEntry, String> {
        self.tables
            .get_mut(&id)
            .ok_or_else(|| format!("edit for unknown table id {id}"))
    }

    /// Table id by name.
    pub fn table_id(&self, name: &str) -> Option<u32> {
        self.tables
            .iter()
            .find(|(_, t)| t.schema.name == name)
            .map(|(id, _)| *id)
    }

    fn snapshot_records(&self) -> Vec<Record> {
        let mut out = vec![Record::FileIdFloor {
            max_file_id: self.max_file_id,
        }];
        if let Some(path) = &self.wal_dir {
            out.push(Record::WalDir { path: path.clone() });
        }
        for (id, d) in &self.devices {
            out.push(Record::Device {
                id: *id,
                name: d.name.clone(),
                tags: d.tags.clone(),
            });
        }
        for (id, t) in &self.tables {
            out.push(Record::CreateTable {
                table_id: *id,
                schema: t.schema.clone(),
                regions: t
                    .regions
                    .iter()
                    .map(|(start, r)| RegionDef {
                        id: r.id,
                        start: *start,
                    })
                    .collect(),
                next_region_id: t.next_region_id,
            });
            for r in t.regions.values() {
                let files: Vec<FileMeta> = r.files.values().copied().collect();
                // Chunks keep every record far below RECORD_LEN_MAX.
                for chunk in files.chunks(SNAPSHOT_FILES_PER_RECORD) {
                    out.push(Record::Files {
                        table_id: *id,
                        region_id: r.id,
                        added: chunk.to_vec(),
                        removed: vec![],
                        flushed_seq: None,
                    });
                }
                out.push(Record::Files {
                    table_id: *id,
                    region_id: r.id,
                    added: vec![],
                    removed: vec![],
                    flushed_seq: Some(r.flushed_seq),
                });
            }
        }
        out
    }
}

/// The open manifest log.
pub struct Manifest {
    dir: PathBuf,
    backend: BackendRef,
    file: Box<dyn IoFile>,
    offset: u64,
    state: State,
    rewrite_bytes: u64,
    /// Set when an append failed: the file's tail is unknown (the page
    /// cache after a failed fsync cannot be trusted), so no more appends
    /// until the store is reopened.
    failed: Option<String>,
}

impl Manifest {
    /// Open (or create) the manifest in `dir`, replaying its log.
    pub fn open(dir: &Path, backend: BackendRef) -> Result<Self> {
        Self::open_with(dir, backend, REWRITE_BYTES)
    }

    /// [`Manifest::open`] with a custom rewrite threshold (tests).
    pub fn open_with(dir: &Path, backend: BackendRef, rewrite_bytes: u64) -> Result<Self> {
        let path = dir.join(MANIFEST_NAME);
        let tmp = dir.join(format!("{MANIFEST_NAME}.tmp"));
        if tmp.exists() {
            tracing::warn!("removing orphaned {}", tmp.display());
            backend.remove_file(&tmp)?;
        }
        if !path.exists() {
            let state = State::default();
            write_snapshot(dir, &*backend, &state)?;
        }
        let (state, pos, len, version) = Self::load_versioned(&path)?;
        let file = backend.open(&path, OpenMode::ReadWrite)?;
        if pos < len {
            tracing::warn!("manifest: truncating {} torn bytes at {pos}", len - pos);
            file.set_len(pos as u64)?;
            file.sync_all()?;
        }
        let mut m = Manifest {
            dir: dir.to_path_buf(),
            backend,
            file,
            offset: pos as u64,
            state,
            rewrite_bytes,
            failed: None,
        };
        if version < record::MANIFEST_VERSION {
            // Records are appended in the current version's form: first
            // rewrite the log as a snapshot of that version.
            tracing::info!(
                "manifest: upgrading version {version} to {}",
                record::MANIFEST_VERSION
            );
            m.rewrite()?;
        }
        Ok(m)
    }

    /// Open for reading only: replay the log, change nothing (a torn
    /// last record is skipped, not cut off; a leftover temporary stays).
    /// Every append is refused.
    pub fn open_read_only(dir: &Path, backend: BackendRef) -> Result<Self> {
        let path = dir.join(MANIFEST_NAME);
        let (state, pos, _) = Self::load(&path)?;
        let file = backend.open(&path, OpenMode::ReadOnly)?;
        Ok(Manifest {
            dir: dir.to_path_buf(),
            backend,
            file,
            offset: pos as u64,
            state,
            rewrite_bytes: u64::MAX,
            failed: Some(format!("{} is open read-only", dir.display())),
        })
    }

    /// Replay the log at `path`, verifying every record's checksum: the
    /// state, where the valid records end (a torn last record is not
    /// counted), and the file's length. Changes nothing.
    pub fn load(path: &Path) -> Result<(State, usize, usize)> {
        Self::load_versioned(path).map(|(s, pos, len, _)| (s, pos, len))
    }

    /// [`Manifest::load`], also giving the file's format version.
    pub fn load_versioned(path: &Path) -> Result<(State, usize, usize, u32)> {
        let data = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        let path = path.to_path_buf();
        let version = record::decode_header(&data).map_err(|e| e.at(&path, 0))?;
        let mut state = State::default();
        let mut pos = MANIFEST_HEADER_LEN;
        while pos < data.len() {
            match decode_framed_v(&data[pos..], version) {
                Framed::Record(r, used) => {
                    state.apply(&r).map_err(|m| {
                        Error::corrupt(format!("manifest edit: {m}"), &path, pos as u64)
                    })?;
                    pos += used;
                }
                bad if is_torn_append(&bad, &data[pos..]) => {
                    tracing::warn!("manifest: torn last record at {pos} ({bad:?}) dropped");
                    break;
                }
                Framed::BadHeader { expected, actual }
                | Framed::BadPayload {
                    expected, actual, ..
                } => {
                    return Err(Error::ChecksumMismatch {
                        file: path,
                        offset: pos as u64,
                        expected,
                        actual,
                    })
                }
                Framed::Invalid(why) => {
                    return Err(Error::corrupt(
                        why,
                        &path,
                        pos as u64,
                    ))
                }
                Framed::Incomplete => {
                    return Err(Error::corrupt("manifest record cut short", &path, pos as u64))
                }
            }
        }
        Ok((state, pos, data.len(), version))
    }

    pub fn state(&self) -> &State {
        &self.state
    }

    /// Durably append `records` (one write, one fsync), then apply them.
    ///
    /// `Ok` means the edit is durable. After a failed write or fsync the
    /// manifest refuses every later append (`Error::Poisoned`) until the
    /// store is reopened, and the in-memory state stays as before the
    /// edit. A failed rewrite into a snapshot after a durable append is
    /// only logged: the log itself is intact and the rewrite is retried on
    /// the next append.
    pub fn append(&mut self, records: &[Record]) -> Result<()> {
        if let Some(cause) = &self.failed {
            return Err(Error::Poisoned {
                cause: cause.clone(),
            });
        }
        let mut probe = self.state.clone();
        for r in records {
            probe
                .apply(r)
                .map_err(|m| Error::invalid("manifest edit", m))?;
        }
        let mut buf = Vec::new();
        for r in records {
            r.encode(&mut buf);
        }
        let n = buf.len() as u64;
        let res = self
            .file
            .write_at(buf, self.offset)
            .and_then(|_| self.file.sync_data());
        if let Err(e) = res {
            self.failed = Some(format!("manifest append failed: {e}"));
            return Err(e);
        }
        self.offset += n;
        self.state = probe;
        if self.offset > self.rewrite_bytes {
            if let Err(e) = self.rewrite() {
                tracing::warn!("manifest rewrite failed (the log is intact; retried later): {e}");
            }
        }
        Ok(())
    }

    /// Replace the log by a snapshot of the current state. On failure the
    /// old log stays in place (the rename is the commit point).
    pub fn rewrite(&mut self) -> Result<()> {
        let len = write_snapshot_tmp(&self.dir, &*self.backend, &self.state)?;
        let path = self.dir.join(MANIFEST_NAME);
        self.backend.rename(&snapshot_tmp(&self.dir), &path)?;
        // The old log is replaced: from here on, failing to reach the new
        // file means later appends would go nowhere, so stop appending.
        let reopened = self
            .backend
            .sync_dir(&self.dir)
            .and_then(|()| self.backend.open(&path, OpenMode::ReadWrite));
        match reopened {
            Ok(f) => {
                self.file = f;
                self.offset = len;
                Ok(())
            }
            Err(e) => {
                self.failed = Some(format!("manifest rewrite failed after rename: {e}"));
                Err(e)
            }
        }
    }
}

/// A crash during an append leaves a prefix of the record, or (on file
/// systems that extend the size before the data lands) zeros. Anything
/// else — a complete record whose checksum fails — is corruption, never
/// silently dropped.
fn is_torn_append(bad: &Framed, rest: &[u8]) -> bool {
    let zeros = |b: &[u8]| b.iter().all(|x| *x == 0);
    match bad {
        Framed::Incomplete => true,
        Framed::BadHeader { .. } => zeros(rest),
        Framed::BadPayload { len, .. } => {
            *len == rest.len() && zeros(&rest[record::RECORD_HEADER_LEN..])
        }
        _ => false,
    }
}

/// Write `state` as a fresh manifest: temp → fsync → rename → fsync dir.
fn write_snapshot(dir: &Path, backend: &dyn crate::io::Backend, state: &State) -> Result<u64> {
    let len = write_snapshot_tmp(dir, backend, state)?;
    backend.rename(&snapshot_tmp(dir), &dir.join(MANIFEST_NAME))?;
    backend.sync_dir(dir)?;
    Ok(len)
}

fn snapshot_tmp(dir: &Path) -> std::path::PathBuf {
    dir.join(format!("{MANIFEST_NAME}.tmp"))
}

/// Write and fsync the snapshot under the temporary name; returns its length.
fn write_snapshot_tmp(dir: &Path, backend: &dyn crate::io::Backend, state: &State) -> Result<u64> {
    let tmp = snapshot_tmp(dir);
    if tmp.exists() {
        backend.remove_file(&tmp)?;
    }
    let mut buf = record::encode_header();
    for r in state.snapshot_records() {
        r.encode(&mut buf);
    }
    let len = buf.len() as u64;
    let f = backend.open(&tmp, OpenMode::CreateNew)?;
    f.write_at(buf, 0)?;
    f.sync_all()?;
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::StdBackend;
    use crate::schema::{Field, FieldType, TableOptions};
    use std::sync::Arc;

    fn schema() -> TableSchema {
        TableSchema::new(
            "t",
            vec![Field::new("v", FieldType::U64)],
            TableOptions::default(),
        )
        .unwrap()
    }

    /// A one-region table.
    fn create_one(table_id: u32, schema: TableSchema) -> Record {
        Record::CreateTable {
            table_id,
            schema,
            regions: vec![RegionDef {
                id: 0,
                start: KEY_MIN,
            }],
            next_region_id: 1,
        }
    }

    fn flushed(m: &Manifest) -> u64 {
        m.state().tables[&1].regions[&KEY_MIN].flushed_seq
    }

    fn flush(table_id: u32, file_id: u64, seq: u64) -> Record {
        Record::Files {
            table_id,
            region_id: 0,
            added: vec![FileMeta {
                file_id,
                len_bytes: 100,
                cells: 1,
                min_seq: seq,
                max_seq: seq,
                min_ts: 0,
                max_ts: 0,
            }],
            removed: if file_id > 1 {
                vec![file_id - 1]
            } else {
                vec![]
            },
            flushed_seq: Some(seq),
        }
    }

    #[test]
    fn grows_then_rewrites_atomically_and_reopens_equal() {
        let dir = tempfile::tempdir().unwrap();
        let b: BackendRef = Arc::new(StdBackend);
        let mut m = Manifest::open_with(dir.path(), b.clone(), 2048).unwrap();
        m.append(&[create_one(1, schema())]).unwrap();
        for i in 1..200u64 {
            m.append(&[flush(1, i, i * 10)]).unwrap();
        }
        let len = std::fs::metadata(dir.path().join(MANIFEST_NAME))
            .unwrap()
            .len();
        assert!(len < 4096, "log was never rewritten ({len} bytes)");
        let want = m.state().clone();
        assert_eq!(want.tables[&1].all_files().len(), 1);
        assert_eq!(flushed(&m), 1990);
        drop(m);
        let m = Manifest::open(dir.path(), b).unwrap();
        assert_eq!(m.state(), &want);
    }

    #[test]
    fn torn_last_record_is_dropped_and_earlier_corruption_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let b: BackendRef = Arc::new(StdBackend);
        let mut m = Manifest::open(dir.path(), b.clone()).unwrap();
        m.append(&[create_one(1, schema())]).unwrap();
        m.append(&[flush(1, 1, 5)]).unwrap();
        m.append(&[flush(1, 2, 9)]).unwrap();
        drop(m);
        let path = dir.path().join(MANIFEST_NAME);
        let full = std::fs::read(&path).unwrap();
        let mut rec = Vec::new();
        flush(1, 2, 9).encode(&mut rec);
        let last = full.len() - rec.len();
        for cut in last..full.len() {
            std::fs::write(&path, &full[..cut]).unwrap();
            let m = Manifest::open(dir.path(), b.clone()).unwrap();
            assert_eq!(flushed(&m), 5, "cut at {cut}");
        }
        let mut bad = full.clone();
        bad[MANIFEST_HEADER_LEN + 15] ^= 1;
        std::fs::write(&path, &bad).unwrap();
        assert!(matches!(
            Manifest::open(dir.path(), b.clone()),
            Err(Error::ChecksumMismatch { offset, .. }) if offset == MANIFEST_HEADER_LEN as u64
        ));
        // Rot in the last, complete record is corruption too, not a torn append.
        let mut bad = full.clone();
        let n = bad.len();
        bad[n - 2] ^= 1;
        std::fs::write(&path, &bad).unwrap();
        assert!(matches!(
            Manifest::open(dir.path(), b.clone()),
            Err(Error::ChecksumMismatch { .. })
        ));
        // A zero-filled tail (size extended, data never written) is torn.
        let mut zeroed = full.clone();
        for x in &mut zeroed[last..] {
            *x = 0;
        }
        std::fs::write(&path, &zeroed).unwrap();
        assert_eq!(flushed(&Manifest::open(dir.path(), b).unwrap()), 5);
    }

    #[test]
    fn splits_and_merges_round_trip_and_bad_ones_are_refused() {
        use crate::region::prefix_start;
        let dir = tempfile::tempdir().unwrap();
        let b: BackendRef = Arc::new(StdBackend);
        let mut m = Manifest::open_with(dir.path(), b.clone(), 1 << 20).unwrap();
        m.append(&[create_one(1, schema())]).unwrap();
        m.append(&[flush(1, 1, 10)]).unwrap();
        let at = prefix_start(0x8000);
        let split = |parent, at, left, right| Record::Split {
            table_id: 1,
            parent,
            at,
            left,
            right,
        };
        m.append(&[split(0, at, 1, 2)]).unwrap();
        let t = &m.state().tables[&1];
        assert_eq!(t.regions.len(), 2);
        assert_eq!(t.regions[&KEY_MIN].id, 1);
        assert_eq!(t.regions[&at].id, 2);
        assert_eq!(
            t.regions[&at].files.len(),
            1,
            "daughters share the parent's file"
        );
        assert_eq!(t.regions[&at].flushed_seq, 10);
        // Unknown parent, reused ids, a point outside the region: refused.
        for bad in [
            split(0, prefix_start(0x100), 3, 4),
            split(1, prefix_start(0x100), 2, 3),
            split(1, prefix_start(0x9000), 3, 4),
            split(1, KEY_MIN, 3, 4),
        ] {
            assert!(m.append(std::slice::from_ref(&bad)).is_err(), "{bad:?}");
        }
        let merge = |left, right, merged| Record::Merge {
            table_id: 1,
            left,
            right,
            merged,
        };
        assert!(
            m.append(&[merge(2, 1, 3)]).is_err(),
            "not adjacent in that order"
        );
        m.append(&[merge(1, 2, 3)]).unwrap();
        let t = &m.state().tables[&1];
        assert_eq!(t.regions.len(), 1);
        assert_eq!(t.regions[&KEY_MIN].id, 3);
        assert_eq!(t.regions[&KEY_MIN].files.len(), 1);
        assert_eq!(t.next_region_id, 4);
        let want = m.state().clone();
        m.rewrite().unwrap();
        drop(m);
        assert_eq!(Manifest::open(dir.path(), b).unwrap().state(), &want);
    }
}

#[cfg(test)]
mod fault_tests {
    use super::*;
    use crate::io::fault::{Faults, FaultyBackend};
    use crate::io::StdBackend;
    use crate::schema::{Field, FieldType, TableOptions};
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    fn create(id: u32, name: &str) -> Record {
        Record::CreateTable {
            table_id: id,
            schema: TableSchema::new(
                name,
                vec![Field::new("v", FieldType::U64)],
                TableOptions::default(),
            )
            .unwrap(),
            regions: vec![RegionDef {
                id: 0,
                start: KEY_MIN,
            }],
            next_region_id: 1,
        }
    }

    fn faulty() -> (Arc<Faults>, BackendRef) {
        let f = Arc::new(Faults::default());
        (
            f.clone(),
            Arc::new(FaultyBackend::new(Arc::new(StdBackend), f)),
        )
    }

    #[test]
    fn failed_append_refuses_later_appends_and_leaves_state_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let (faults, b) = faulty();
        let mut m = Manifest::open(dir.path(), b).unwrap();
        m.append(&[create(1, "a")]).unwrap();
        faults
            .fail_sync_from
            .store(faults.syncs.load(Ordering::SeqCst), Ordering::SeqCst);
        assert!(m.append(&[create(2, "b")]).is_err());
        assert_eq!(
            m.state().tables.len(),
            1,
            "state unchanged by a failed append"
        );
        faults.fail_sync_from.store(u64::MAX, Ordering::SeqCst);
        assert!(matches!(
            m.append(&[create(3, "c")]),
            Err(Error::Poisoned { .. })
        ));
        drop(m);
        let m = Manifest::open(dir.path(), Arc::new(StdBackend)).unwrap();
        assert!(m.state().table_id("a").is_some());
        assert!(m.state().table_id("c").is_none());
    }

    #[test]
    fn failed_rewrite_after_a_durable_append_is_not_an_append_failure() {
        let dir = tempfile::tempdir().unwrap();
        let (faults, b) = faulty();
        let mut m = Manifest::open_with(dir.path(), b, 64).unwrap();
        // The append's own fsync succeeds; the snapshot's fsync fails.
        faults
            .fail_sync_from
            .store(faults.syncs.load(Ordering::SeqCst) + 1, Ordering::SeqCst);
        m.append(&[create(1, "a")]).unwrap();
        faults.fail_sync_from.store(u64::MAX, Ordering::SeqCst);
        m.append(&[create(2, "b")]).unwrap();
        drop(m);
        let m = Manifest::open(dir.path(), Arc::new(StdBackend)).unwrap();
        assert!(m.state().table_id("a").is_some() && m.state().table_id("b").is_some());
    }

    #[test]
    fn duplicate_table_names_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = Manifest::open(dir.path(), Arc::new(StdBackend)).unwrap();
        m.append(&[create(1, "a")]).unwrap();
        assert!(matches!(
            m.append(&[create(2, "a")]),
            Err(Error::InvalidInput { .. })
        ));
    }
}
