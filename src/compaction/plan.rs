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

/// What the planner knows of one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStat {
    pub file_id: u64,
    pub bytes: u64,
    pub max_seq: u64,
    /// Newest cell timestamp (`i64::MIN` with no cells).
    pub max_ts: i64,
    /// Newest range-tombstone end (`i64::MIN` with none).
    pub tombstone_max_to: i64,
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
    minor(&files, policy).map(Task::Minor)
}

fn minor(files: &[FileStat], p: &Policy) -> Option<Vec<u64>> {
    let min = p.min_files.max(2);
    let mut best: Option<(usize, u64, &[FileStat])> = None;
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
    best.map(|(_, _, run)| run.iter().map(|f| f.file_id).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(id: u64, bytes: u64) -> FileStat {
        FileStat {
            file_id: id,
            bytes,
            max_seq: id * 10,
            max_ts: 1_000 + id as i64,
            tombstone_max_to: i64::MIN,
        }
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
