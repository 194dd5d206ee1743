//! The compaction planner: a pure function from a region's files and a
//! policy to at most one task, so it can be unit-tested and simulated
//! (`telestore bench compaction-sim`).
//!
//! - **Expired files**: a file all of whose cells *and* range tombstones
//!   are older than the TTL cutoff is dropped whole, without rewriting.
//!   Every cell in it is invisible already, and nothing in it can hide a
//!   newer cell (a tombstone only hides cells of its own timestamps).
//! - **Major** (on demand or on schedule): all files into one.
//! - **Minor**, an exploring policy in the spirit of HBase's: among runs of
//!   adjacent files (in flush order) of `min_files..=max_files` files, keep
//!   those where every file is at most `ratio ×` the sum of the others (so
//!   one big old file is not rewritten for a few small new ones), and pick
//!   the run with the most files, then the fewest bytes. When no run
//!   qualifies but the region has `stuck_files` files or more, the
//!   `min_files` adjacent files with the fewest bytes are merged anyway.
//!
//! Minor runs and file limits count **sorted runs**, not files: the parts
//! of one compaction split by key range (subcompactions) are one run, as
//! they cover disjoint keys and a read of a key touches at most one of
//! them. Files are one run when their ids are consecutive, they were
//! created in the same millisecond and their key ranges are pairwise
//! disjoint ([`runs`]). Every other file is a run of its own.

use crate::key::RowKey;

/// What the planner knows of one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStat {
    pub file_id: u64,
    pub bytes: u64,
    pub min_seq: u64,
    pub max_seq: u64,
    /// Newest cell timestamp (`i64::MIN` with no cells).
    pub max_ts: i64,
    /// Newest range-tombstone end (`i64::MIN` with none).
    pub tombstone_max_to: i64,
    /// Smallest and largest key (equal and zero for an empty file).
    pub min_key: RowKey,
    pub max_key: RowKey,
    /// When the file was written (the parts of one compaction share it).
    pub created_ms: i64,
}

impl FileStat {
    /// A file that is a run of its own (the simulator's flushes): the
    /// whole key space, created at a time no other file shares.
    #[cfg(any(test, feature = "testing"))]
    pub fn alone(file_id: u64, bytes: u64, max_seq: u64) -> Self {
        FileStat {
            file_id,
            bytes,
            min_seq: max_seq,
            max_seq,
            max_ts: i64::MAX,
            tombstone_max_to: i64::MIN,
            min_key: [0; crate::key::KEY_LEN],
            max_key: [0xff; crate::key::KEY_LEN],
            created_ms: -(file_id as i64),
        }
    }

    /// Written together by one split compaction, as far as the planner
    /// can tell (see the module doc).
    fn parts_of_one(&self, o: &FileStat) -> bool {
        let keys_disjoint = self.max_key < o.min_key || o.max_key < self.min_key;
        let seqs_overlap = self.min_seq <= o.max_seq && o.min_seq <= self.max_seq;
        self.created_ms == o.created_ms && keys_disjoint && seqs_overlap
    }
}

/// A sorted run: files of disjoint key ranges written together, planned
/// as one unit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    pub file_ids: Vec<u64>,
    pub bytes: u64,
    pub max_seq: u64,
}

/// Group `files` into sorted runs (see the module doc), ordered by their
/// newest sequence number.
pub fn runs(files: &[FileStat]) -> Vec<Run> {
    let mut by_id = files.to_vec();
    by_id.sort_by_key(|f| f.file_id);
    let mut groups: Vec<Vec<FileStat>> = Vec::new();
    for f in by_id {
        let joins = groups
            .last()
            .is_some_and(|g| g.iter().all(|m| m.parts_of_one(&f)));
        match groups.last_mut() {
            Some(g) if joins => g.push(f),
            _ => groups.push(vec![f]),
        }
    }
    let mut out: Vec<Run> = groups
        .into_iter()
        .map(|g| Run {
            file_ids: g.iter().map(|f| f.file_id).collect(),
            bytes: g.iter().map(|f| f.bytes).sum(),
            max_seq: g.iter().map(|f| f.max_seq).max().unwrap_or(0),
        })
        .collect();
    out.sort_by_key(|r| r.max_seq);
    out
}

/// Planner settings.
#[derive(Clone, Copy, Debug)]
pub struct Policy {
    pub min_files: usize,
    pub max_files: usize,
    pub ratio: f64,
    /// Merge the cheapest run even when no run passes the ratio test once
    /// the region has this many files.
    pub stuck_files: usize,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            min_files: 3,
            max_files: 10,
            ratio: 1.2,
            stuck_files: 12,
        }
    }
}

/// What to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Task {
    /// Remove these files whole: every cell in them is past the TTL.
    DropExpired(Vec<u64>),
    /// Merge these files, keeping delete markers and every version.
    Minor(Vec<u64>),
    /// Rewrite all files into one, applying TTL, versions and deletes.
    Major(Vec<u64>),
}

/// Plan one task for a region. `files` in any order; `ttl_cutoff` is
/// `now - ttl` when the table has a TTL; `major` asks for a major
/// compaction.
pub fn plan(
    files: &[FileStat],
    policy: &Policy,
    ttl_cutoff: Option<i64>,
    major: bool,
) -> Option<Task> {
    let mut files = files.to_vec();
    files.sort_by_key(|f| f.max_seq);
    if let Some(cut) = ttl_cutoff {
        let expired: Vec<u64> = files
            .iter()
            .filter(|f| f.max_ts < cut && f.tombstone_max_to < cut)
            .map(|f| f.file_id)
            .collect();
        if !expired.is_empty() {
            return Some(Task::DropExpired(expired));
        }
    }
    if major {
        return (!files.is_empty()).then(|| Task::Major(files.iter().map(|f| f.file_id).collect()));
    }
    let runs = runs(&files);
    minor(&runs, policy).map(|picked| {
        Task::Minor(
            picked
                .iter()
                .flat_map(|r| r.file_ids.iter().copied())
                .collect(),
        )
    })
}

/// Pending compaction debt: the bytes the minor compactions the planner
/// would run one after another, from these files and with nothing new
/// flushed, would read (RocksDB's "estimated pending compaction bytes").
pub fn debt(files: &[FileStat], policy: &Policy) -> u64 {
    let mut runs = runs(files);
    let mut debt = 0;
    // Each step merges at least two runs into one: at most `runs` steps.
    while let Some(picked) = minor(&runs, policy) {
        let ids: Vec<u64> = picked.iter().map(|r| r.file_ids[0]).collect();
        let merged = Run {
            file_ids: vec![ids[0]],
            bytes: picked.iter().map(|r| r.bytes).sum(),
            max_seq: picked.iter().map(|r| r.max_seq).max().unwrap_or(0),
        };
        debt += merged.bytes;
        runs.retain(|r| !ids.contains(&r.file_ids[0]));
        runs.push(merged);
        runs.sort_by_key(|r| r.max_seq);
    }
    debt
}

/// The sorted runs of `files` (what file limits count).
pub fn run_count(files: &[FileStat]) -> usize {
    runs(files).len()
}

/// The adjacent runs (in flush order) a minor compaction merges.
fn minor(files: &[Run], p: &Policy) -> Option<Vec<Run>> {
    let min = p.min_files.max(2);
    let mut best: Option<(usize, u64, &[Run])> = None;
    for start in 0..files.len() {
        for end in (start + min)..=(start + p.max_files).min(files.len()) {
            let run = &files[start..end];
            let total: u64 = run.iter().map(|f| f.bytes).sum();
            let balanced = run
                .iter()
                .all(|f| f.bytes as f64 <= p.ratio * (total - f.bytes) as f64);
            let better = match best {
                None => true,
                Some((n, bytes, _)) => run.len() > n || (run.len() == n && total < bytes),
            };
            if balanced && better {
                best = Some((run.len(), total, run));
            }
        }
    }
    if best.is_none() && files.len() >= p.stuck_files.max(min) {
        best = files
            .windows(min)
            .map(|w| (w.len(), w.iter().map(|f| f.bytes).sum::<u64>(), w))
            .min_by_key(|(_, bytes, _)| *bytes);
    }
    best.map(|(_, _, run)| run.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(id: u64, bytes: u64) -> FileStat {
        FileStat {
            max_ts: 1_000 + id as i64,
            ..FileStat::alone(id, bytes, id * 10)
        }
    }

    /// Part `i` of `n` of one compaction's output: file `id`, a slice of
    /// the key space, created at `ms`.
    fn part(id: u64, i: u8, n: u8, bytes: u64, ms: i64) -> FileStat {
        let mut s = FileStat {
            created_ms: ms,
            min_seq: 1,
            ..f(id, bytes)
        };
        s.min_key = [0; crate::key::KEY_LEN];
        s.max_key = [0xff; crate::key::KEY_LEN];
        s.min_key[0] = i * (255 / n);
        s.max_key[0] = (i + 1) * (255 / n) - 1;
        s
    }

    #[test]
    fn the_parts_of_one_compaction_are_one_run() {
        let files = [
            part(1, 0, 3, 100, 7),
            part(2, 1, 3, 100, 7),
            part(3, 2, 3, 100, 7),
            f(4, 50),
        ];
        let r = runs(&files);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].file_ids, [1, 2, 3]);
        assert_eq!(r[0].bytes, 300);
        // Not written together: another file in between, another time,
        // or overlapping keys.
        let apart = [part(1, 0, 2, 100, 7), f(2, 5), part(3, 1, 2, 100, 7)];
        assert_eq!(run_count(&apart), 3);
        let gap = [part(1, 0, 2, 100, 7), part(3, 1, 2, 100, 7)];
        assert_eq!(run_count(&gap), 1);
        let later = [part(1, 0, 2, 100, 7), part(2, 1, 2, 100, 8)];
        assert_eq!(run_count(&later), 2);
        let overlapping = [part(1, 0, 2, 100, 7), part(2, 0, 2, 100, 7)];
        assert_eq!(run_count(&overlapping), 2);
        // Flushes in the same millisecond of disjoint keys (one device):
        // their sequence numbers do not overlap.
        let mut flushes = [part(1, 0, 2, 100, 7), part(2, 1, 2, 100, 7)];
        flushes[0].min_seq = flushes[0].max_seq;
        flushes[1].min_seq = flushes[1].max_seq;
        assert_eq!(run_count(&flushes), 2);
        // Three runs of five files: a minor merges them all; two are not
        // enough.
        let small = |id, i| part(id, i, 3, 20, 7);
        let two = [small(1, 0), small(2, 1), small(3, 2), f(4, 50)];
        assert_eq!(plan(&two, &Policy::default(), None, false), None);
        let mut three = two.to_vec();
        three.push(f(5, 60));
        assert_eq!(
            plan(&three, &Policy::default(), None, false),
            Some(Task::Minor(vec![1, 2, 3, 4, 5]))
        );
    }

    #[test]
    fn debt_sums_the_minor_compactions_still_to_run() {
        let p = Policy::default();
        assert_eq!(debt(&[f(1, 10), f(2, 10)], &p), 0);
        assert_eq!(debt(&[f(1, 10), f(2, 10), f(3, 10)], &p), 30);
        // 12 equal files: one minor of 10 (100 bytes), then the result and
        // the two left fail the ratio test and stay below stuck_files.
        let many: Vec<_> = (1..=12).map(|i| f(i, 10)).collect();
        assert_eq!(debt(&many, &p), 100);
        let one = plan(&many, &p, None, false);
        assert!(matches!(one, Some(Task::Minor(ids)) if ids.len() == 10));
    }

    #[test]
    fn minor_needs_three_files_and_prefers_the_longest_balanced_run() {
        let p = Policy::default();
        assert_eq!(plan(&[f(1, 10), f(2, 10)], &p, None, false), None);
        let files = [f(1, 1000), f(2, 10), f(3, 11), f(4, 9), f(5, 10)];
        // The big old file fails the ratio test; the four small ones pass.
        assert_eq!(
            plan(&files, &p, None, false),
            Some(Task::Minor(vec![2, 3, 4, 5]))
        );
        let many: Vec<_> = (1..=15).map(|i| f(i, 10)).collect();
        match plan(&many, &p, None, false) {
            Some(Task::Minor(ids)) => assert_eq!(ids.len(), 10),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_stuck_region_still_merges_its_smallest_run() {
        // Sizes growing geometrically never pass a ratio of 1.2.
        let files: Vec<_> = (1..=12).map(|i| f(i, 1 << (i * 2))).collect();
        assert_eq!(plan(&files[..11], &Policy::default(), None, false), None);
        assert_eq!(
            plan(&files, &Policy::default(), None, false),
            Some(Task::Minor(vec![1, 2, 3]))
        );
    }

    #[test]
    fn expired_files_are_dropped_whole_before_anything_else() {
        let mut old = f(1, 10);
        old.max_ts = 50;
        let mut tomb = f(2, 10);
        tomb.max_ts = 50;
        tomb.tombstone_max_to = 5_000;
        let files = [old, tomb, f(3, 10)];
        assert_eq!(
            plan(&files, &Policy::default(), Some(100), true),
            Some(Task::DropExpired(vec![1]))
        );
        assert_eq!(
            plan(&files, &Policy::default(), None, true),
            Some(Task::Major(vec![1, 2, 3]))
        );
        assert_eq!(plan(&[], &Policy::default(), None, true), None);
    }
}
