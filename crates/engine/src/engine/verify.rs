//! `telestore verify`: check every checksum of every live file — the
//! manifest's records, each WAL segment's frames, each HFile's trailer,
//! sections and blocks — and report, changing nothing. It takes the
//! directory's lock shared, as a read-only open does, so it runs beside
//! other readers but not beside a writer (verify a copy, or a stopped
//! store).

use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::hfile::HFileReader;
use crate::manifest::{Manifest, State, MANIFEST_NAME};
use crate::schema::BlockEncoding;
use crate::wal::{scan_segment, segment, Verdict};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What one file's check found.
#[derive(Debug)]
pub enum Finding {
    /// Every checksum matched.
    Ok,
    /// Not damage, but worth saying (a torn WAL tail after a crash, an
    /// orphaned file): the next read-write open repairs it.
    Note(String),
    /// A checksum or structure error: the file is damaged.
    Damaged(Error),
}

/// One checked file.
#[derive(Debug)]
pub struct Checked {
    /// The file checked.
    pub path: PathBuf,
    /// What was checked, e.g. "WAL segment, 120 entries".
    pub what: String,
    /// What the check found.
    pub finding: Finding,
}

/// Every file checked, in the order checked.
#[derive(Debug, Default)]
pub struct Report {
    /// Every file checked.
    pub files: Vec<Checked>,
}

impl Report {
    /// How many files are damaged.
    pub fn damaged(&self) -> usize {
        self.files
            .iter()
            .filter(|c| matches!(c.finding, Finding::Damaged(_)))
            .count()
    }

    fn add(&mut self, path: PathBuf, what: String, finding: Finding) {
        self.files.push(Checked {
            path,
            what,
            finding,
        });
    }
}

/// Verify the store in `dir`. `Err` only when it cannot be checked at all
/// (no store there, locked by a writer); damage is in the report.
pub fn verify(dir: &Path) -> Result<Report> {
    super::open::require_store(dir)?;
    let manifest = dir.join(MANIFEST_NAME);
    let _lock = super::open::lock_dir(dir, true)?;
    let mut report = Report::default();
    let state = check_manifest(&manifest, &mut report);
    // The WAL directory the manifest records (`wal/` when it records none
    // or cannot be read).
    let wal_dir = state
        .as_ref()
        .and_then(|s| s.wal_dir.clone())
        .map_or_else(|| dir.join("wal"), std::path::PathBuf::from);
    check_wal(&wal_dir, &mut report)?;
    match state {
        Some(s) => check_tables(dir, &s, &mut report)?,
        None => report.add(
            dir.join("tables"),
            "HFiles".into(),
            Finding::Note("not checked: the manifest that lists them is damaged".into()),
        ),
    }
    Ok(report)
}

fn check_manifest(path: &Path, report: &mut Report) -> Option<State> {
    match Manifest::load(path) {
        Ok((state, end, len)) => {
            let what = format!(
                "manifest, {} tables, {} devices",
                state.tables.len(),
                state.devices.len()
            );
            let finding = if end < len {
                Finding::Note(format!(
                    "torn last record: {} bytes at offset {end}, dropped by the next read-write open",
                    len - end
                ))
            } else {
                Finding::Ok
            };
            report.add(path.to_path_buf(), what, finding);
            Some(state)
        }
        Err(e) => {
            report.add(path.to_path_buf(), "manifest".into(), Finding::Damaged(e));
            None
        }
    }
}

fn check_wal(dir: &Path, report: &mut Report) -> Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    let segments = segment::list(dir)?;
    let n = segments.len();
    let mut prev_seq = 0;
    for (i, (no, path)) in segments.into_iter().enumerate() {
        let last = i + 1 == n;
        let data = match std::fs::read(&path) {
            Ok(d) => d,
            Err(e) => {
                report.add(
                    path.clone(),
                    "WAL segment".into(),
                    Finding::Damaged(Error::io(&path, e)),
                );
                continue;
            }
        };
        if segment::never_written(&data) && last {
            let note = "cut short at creation (holds nothing acknowledged); removed by the next read-write open";
            report.add(path, "WAL segment".into(), Finding::Note(note.into()));
            continue;
        }
        let (what, finding) = match scan_segment(&data, &path, no, last, prev_seq) {
            Ok(scan) => {
                if let Some((_, e)) = scan.entries.last() {
                    prev_seq = e.last_seq();
                }
                let what = format!("WAL segment, {} entries", scan.entries.len());
                let finding = match scan.verdict {
                    Verdict::Clean => Finding::Ok,
                    Verdict::Torn(pos) => Finding::Note(format!(
                        "{}; truncated by the next read-write open",
                        crate::wal::tail_note(&data, pos, &path)
                    )),
                    Verdict::Corrupt(_, e) => Finding::Damaged(e),
                };
                (what, finding)
            }
            Err(e) => ("WAL segment".to_string(), Finding::Damaged(e)),
        };
        report.add(path, what, finding);
    }
    Ok(())
}

fn check_tables(dir: &Path, state: &State, report: &mut Report) -> Result<()> {
    // Blocks are read past any cache: a small one, never hit.
    let cache = Arc::new(BlockCache::new(1 << 20));
    for (id, entry) in &state.tables {
        let tdir = dir.join("tables").join(id.to_string());
        let fw = entry.schema.fields_width();
        let layout = Some(entry.schema.layout_id());
        let files = entry.all_files();
        let mut live = HashSet::new();
        for f in files.keys() {
            let name = super::flush::file_name(*f);
            let path = tdir.join(&name);
            live.insert(name);
            let (what, finding) = match check_hfile(&path, *f, fw, layout, &cache) {
                Ok((blocks, encoding)) => (
                    format!(
                        "HFile of table {}, {encoding}, {blocks} blocks",
                        entry.schema.name
                    ),
                    Finding::Ok,
                ),
                Err(e) => (
                    format!("HFile of table {}", entry.schema.name),
                    Finding::Damaged(e),
                ),
            };
            report.add(path, what, finding);
        }
        let Ok(listing) = std::fs::read_dir(&tdir) else {
            continue;
        };
        for ent in listing.flatten() {
            let name = ent.file_name().to_string_lossy().to_string();
            if !live.contains(&name) {
                let note = "not in the manifest (written, never recorded, or replaced); removed by the next read-write open";
                report.add(ent.path(), "file".into(), Finding::Note(note.into()));
            }
        }
    }
    Ok(())
}

/// Open `path` (trailer, sections: their checksums) and read every block
/// (each one's checksum; a columnar block is decoded whole). Returns the
/// block count and the file's block encoding.
fn check_hfile(
    path: &Path,
    file_id: u64,
    fields_width: usize,
    layout: Option<u32>,
    cache: &Arc<BlockCache>,
) -> Result<(usize, BlockEncoding)> {
    let r = HFileReader::open_checked(path, file_id, fields_width, layout, cache.clone())?;
    for i in 0..r.block_count() {
        r.block_uncached(i)?;
    }
    Ok((r.block_count(), r.info().encoding))
}
