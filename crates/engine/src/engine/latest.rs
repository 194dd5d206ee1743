//! The latest-row cache: per table, the newest visible row of the
//! devices whose `latest` was read, so that "what did device D report
//! last" is answered from memory however cold the HFiles holding it are
//! (a flush or a compaction replaces warm files with new ones).
//!
//! Reads fill it and the apply thread keeps it true:
//! - A read that misses takes a *fill ticket* for the device before it
//!   takes its snapshot, reads the slow way, and stores what it found only
//!   if its ticket is still there. The apply thread marks a pending ticket
//!   stale whenever it applies an edit of that device, so a fill that may
//!   have missed a write never lands.
//! - The apply thread replaces a cached row with a newer put of the same
//!   device (a later timestamp, or the same timestamp with a higher
//!   sequence number) and drops the entry when a point or range delete
//!   covers the cached row's timestamp (the next newest row is not known
//!   without a read). Puts of older timestamps change nothing.
//! - TTL is applied when read: an expired cached row means every older row
//!   has expired too, so the device has no visible row.
//!
//! Flushes, compactions, splits and merges never change what is visible,
//! so they leave the cache alone. It is bounded: at
//! `Options::latest_cache_devices` entries a table takes no new ones
//! (reads of other devices go to the files, as without the cache).

use crate::key::DeviceId;
use crate::read::Row;
use crate::util::sync::LockExt;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};
use xxhash_rust::xxh3::Xxh3DefaultBuilder;

const SHARDS: usize = 64;

enum Slot {
    /// A read is filling this entry (its ticket).
    Filling(u64),
    /// An edit of the device was applied while a read was filling it.
    Stale,
    Row(Row),
}

type Shard = HashMap<u64, Slot, Xxh3DefaultBuilder>;

/// Counters of the cache, for `/metrics`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LatestCacheStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that read the memstores and files.
    pub misses: u64,
    /// Devices cached now.
    pub entries: u64,
}

pub struct LatestCache {
    shards: Box<[Mutex<Shard>]>,
    /// Entries (of any kind) over all shards.
    len: AtomicUsize,
    cap: usize,
    tickets: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl LatestCache {
    /// A cache of at most `cap` devices (0: off).
    pub fn new(cap: usize) -> Self {
        LatestCache {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            len: AtomicUsize::new(0),
            cap,
            tickets: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    fn shard(&self, device: u64) -> MutexGuard<'_, Shard> {
        let i = (xxhash_rust::xxh3::xxh3_64(&device.to_le_bytes()) as usize) % SHARDS;
        self.shards[i].lock_or_recover()
    }

    /// The cached newest row of `device`, if there is one.
    pub fn get(&self, device: u64) -> Option<Row> {
        if self.cap == 0 {
            return None;
        }
        let hit = match self.shard(device).get(&device) {
            Some(Slot::Row(r)) => Some(r.clone()),
            _ => None,
        };
        let counter = if hit.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Relaxed);
        hit
    }

    /// Take a fill ticket for `device`, unless another read holds one, the
    /// entry exists, or the cache is full. Call before the read's snapshot.
    pub fn begin_fill(&self, device: u64) -> Option<Fill<'_>> {
        if self.cap == 0 || self.len.load(Relaxed) >= self.cap {
            return None;
        }
        let mut s = self.shard(device);
        if s.contains_key(&device) {
            return None;
        }
        let ticket = self.tickets.fetch_add(1, Relaxed);
        s.insert(device, Slot::Filling(ticket));
        self.len.fetch_add(1, Relaxed);
        Some(Fill {
            cache: self,
            device,
            ticket,
            found: None,
        })
    }

    /// The apply thread: `device`'s put at `(ts, seq)` was applied.
    pub fn on_put(&self, device: u64, ts: i64, seq: u64, fields: &[u8]) {
        if self.len.load(Relaxed) == 0 {
            return;
        }
        let mut s = self.shard(device);
        match s.get_mut(&device) {
            Some(slot @ Slot::Filling(_)) => *slot = Slot::Stale,
            Some(Slot::Row(r)) if (ts, seq) > (r.ts, r.seq) => {
                r.ts = ts;
                r.seq = seq;
                r.fields.clear();
                r.fields.extend_from_slice(fields);
            }
            _ => {}
        }
    }

    /// The apply thread: a delete of `device`'s rows in `[from, to]` was
    /// applied.
    pub fn on_delete(&self, device: DeviceId, from: i64, to: i64) {
        if self.len.load(Relaxed) == 0 {
            return;
        }
        let mut s = self.shard(device.0);
        let drop = match s.get_mut(&device.0) {
            Some(slot @ Slot::Filling(_)) => {
                *slot = Slot::Stale;
                false
            }
            Some(Slot::Row(r)) => (from..=to).contains(&r.ts),
            _ => false,
        };
        if drop {
            s.remove(&device.0);
            self.len.fetch_sub(1, Relaxed);
        }
    }

    pub fn stats(&self) -> LatestCacheStats {
        LatestCacheStats {
            hits: self.hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
            entries: self.len.load(Relaxed) as u64,
        }
    }
}

/// A read's claim on filling one entry. Dropped, it settles the entry:
/// the row [`Fill::finish`] gave lands if the ticket is still there;
/// otherwise (an edit came between, or the read failed or found nothing)
/// the entry goes.
pub struct Fill<'a> {
    cache: &'a LatestCache,
    device: u64,
    ticket: u64,
    found: Option<Row>,
}

impl Fill<'_> {
    /// The read found `row` (`None`: the device has no visible row, which
    /// is not cached).
    pub fn finish(mut self, row: Option<&Row>) {
        self.found = row.cloned();
    }
}

impl Drop for Fill<'_> {
    fn drop(&mut self) {
        let mut s = self.cache.shard(self.device);
        let ours = match s.get(&self.device) {
            Some(Slot::Filling(t)) if *t == self.ticket => true,
            // Only one fill per device at a time: a stale mark is ours.
            Some(Slot::Stale) => false,
            _ => return,
        };
        match self.found.take() {
            Some(r) if ours => {
                s.insert(self.device, Slot::Row(r));
            }
            _ => {
                s.remove(&self.device);
                self.cache.len.fetch_sub(1, Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(device: u64, ts: i64, seq: u64) -> Row {
        Row {
            device,
            ts,
            seq,
            fields: vec![ts as u8],
        }
    }

    #[test]
    fn a_fill_lands_only_if_no_edit_came_between() {
        let c = LatestCache::new(10);
        let f = c.begin_fill(1).unwrap();
        assert!(c.begin_fill(1).is_none(), "one fill per device at a time");
        f.finish(Some(&row(1, 5, 1)));
        assert_eq!(c.get(1), Some(row(1, 5, 1)));

        let f = c.begin_fill(2).unwrap();
        c.on_put(2, 9, 3, &[9]);
        f.finish(Some(&row(2, 5, 1)));
        assert_eq!(c.get(2), None, "a stale fill is dropped");
        assert_eq!(c.stats().entries, 1);
        assert!(c.begin_fill(2).is_some(), "and the next read may fill");
    }

    #[test]
    fn puts_replace_only_newer_and_deletes_drop_what_they_cover() {
        let c = LatestCache::new(10);
        c.begin_fill(1).unwrap().finish(Some(&row(1, 5, 10)));
        c.on_put(1, 4, 11, &[4]);
        assert_eq!(
            c.get(1).unwrap().ts,
            5,
            "an older timestamp changes nothing"
        );
        c.on_put(1, 5, 12, &[7]);
        assert_eq!(
            c.get(1).unwrap().fields,
            vec![7],
            "same ts, higher seq wins"
        );
        c.on_delete(DeviceId(1), 0, 4);
        assert!(c.get(1).is_some(), "a delete below the row leaves it");
        c.on_delete(DeviceId(1), 5, 5);
        assert_eq!(c.get(1), None);
        assert_eq!(c.stats().entries, 0);
    }

    #[test]
    fn full_or_off_caches_take_nothing_and_dropped_fills_clean_up() {
        let c = LatestCache::new(1);
        drop(c.begin_fill(1).unwrap());
        assert_eq!(c.stats().entries, 0);
        c.begin_fill(1).unwrap().finish(Some(&row(1, 1, 1)));
        assert!(c.begin_fill(2).is_none(), "full");
        assert!(c.begin_fill(1).is_none(), "cached already");
        let off = LatestCache::new(0);
        assert!(off.begin_fill(1).is_none());
        assert_eq!(off.get(1), None);
        let s = c.stats();
        assert_eq!((s.hits, s.entries), (0, 1));
    }
}
