//! The device registry: names ↔ u64 ids with tags, kept in the manifest
//! (the engine's own catalog, as HBase keeps `hbase:meta`), crash-safe
//! (a registration is fsynced before it is used) and indexed by tag in
//! memory. Ids the registry assigns start at [`REGISTRY_ID_BASE`], above
//! the numeric ids binary-protocol clients use for unnamed devices; they
//! are never reused.

use super::{Shared, Store};
use crate::error::{Error, Result};
use crate::manifest::{DeviceEntry, Record};
use std::collections::{BTreeSet, HashMap};

/// First id the registry hands out.
pub const REGISTRY_ID_BASE: u64 = 1 << 40;

/// The in-memory index of the registry.
#[derive(Default)]
pub struct DeviceIndex {
    by_name: HashMap<String, u64>,
    by_tag: HashMap<(String, String), BTreeSet<u64>>,
    entries: HashMap<u64, DeviceEntry>,
    next_id: u64,
}

impl DeviceIndex {
    /// Build from the manifest's devices.
    pub fn build<'a>(devices: impl Iterator<Item = (&'a u64, &'a DeviceEntry)>) -> Self {
        let mut ix = DeviceIndex {
            next_id: REGISTRY_ID_BASE,
            ..Default::default()
        };
        for (id, d) in devices {
            ix.put(*id, d.clone());
        }
        ix
    }

    fn put(&mut self, id: u64, d: DeviceEntry) {
        if let Some(old) = self.entries.get(&id) {
            for t in &old.tags {
                if let Some(s) = self.by_tag.get_mut(t) {
                    s.remove(&id);
                    if s.is_empty() {
                        self.by_tag.remove(t);
                    }
                }
            }
        }
        for t in &d.tags {
            self.by_tag.entry(t.clone()).or_default().insert(id);
        }
        self.by_name.insert(d.name.clone(), id);
        self.next_id = self.next_id.max(id.saturating_add(1)).max(REGISTRY_ID_BASE);
        self.entries.insert(id, d);
    }

    pub fn id(&self, name: &str) -> Option<u64> {
        self.by_name.get(name).copied()
    }
}

impl Shared {
    pub(crate) fn devices(&self) -> std::sync::RwLockReadGuard<'_, DeviceIndex> {
        self.devices.read().unwrap_or_else(|p| p.into_inner())
    }
}

impl Store {
    /// Register devices by name, or update their tags: returns their ids
    /// in order. New names get new ids; a known name keeps its id, and its
    /// tags are replaced only when `tags` differ (tag order is kept as
    /// given). Durable (one manifest fsync for all changes) on return.
    pub fn register_devices(
        &self,
        devices: &[(String, Vec<(String, String)>)],
    ) -> Result<Vec<u64>> {
        self.shared.check_poisoned()?;
        // Fast path: every name known with the same tags.
        {
            let ix = self.shared.devices();
            let known: Option<Vec<u64>> = devices
                .iter()
                .map(|(n, tags)| {
                    let id = ix.id(n)?;
                    (ix.entries.get(&id)?.tags == *tags).then_some(id)
                })
                .collect();
            if let Some(ids) = known {
                return Ok(ids);
            }
        }
        // The manifest lock serializes registrations.
        let mut m = self.shared.manifest();
        let mut ix = self
            .shared
            .devices
            .write()
            .unwrap_or_else(|p| p.into_inner());
        let mut next = ix.next_id;
        let mut records = Vec::new();
        let mut pending: HashMap<&str, u64> = HashMap::new();
        let mut ids = Vec::with_capacity(devices.len());
        for (name, tags) in devices {
            let id = match ix.id(name).or_else(|| pending.get(name.as_str()).copied()) {
                Some(id) => id,
                None => {
                    let id = next;
                    next = next
                        .checked_add(1)
                        .ok_or_else(|| Error::invalid("device", "registry ids exhausted"))?;
                    pending.insert(name, id);
                    id
                }
            };
            let same = ix.entries.get(&id).is_some_and(|e| e.tags == *tags);
            if !same {
                records.retain(|r| !matches!(r, Record::Device { id: i, .. } if *i == id));
                records.push(Record::Device {
                    id,
                    name: name.clone(),
                    tags: tags.clone(),
                });
            }
            ids.push(id);
        }
        if records.is_empty() {
            return Ok(ids);
        }
        if let Err(e) = m.append(&records) {
            return Err(match e {
                Error::InvalidInput { .. } => e,
                other => self.shared.poison(&other),
            });
        }
        for r in records {
            if let Record::Device { id, name, tags } = r {
                ix.put(id, DeviceEntry { name, tags });
            }
        }
        ix.next_id = ix.next_id.max(next);
        Ok(ids)
    }

    /// The id registered for `name`.
    pub fn device_id(&self, name: &str) -> Option<u64> {
        self.shared.devices().id(name)
    }

    /// Name and tags of device `id`, when registered.
    pub fn device(&self, id: u64) -> Option<DeviceEntry> {
        self.shared.devices().entries.get(&id).cloned()
    }

    /// Registered devices, by id; with `tag = Some((key, value))` only
    /// those carrying that tag (answered from the tag index).
    pub fn devices(&self, tag: Option<(&str, &str)>) -> Vec<(u64, DeviceEntry)> {
        let ix = self.shared.devices();
        let ids: Vec<u64> = match tag {
            Some((k, v)) => ix
                .by_tag
                .get(&(k.to_string(), v.to_string()))
                .map(|s| s.iter().copied().collect())
                .unwrap_or_default(),
            None => {
                let mut all: Vec<u64> = ix.entries.keys().copied().collect();
                all.sort_unstable();
                all
            }
        };
        ids.into_iter()
            .filter_map(|id| ix.entries.get(&id).map(|e| (id, e.clone())))
            .collect()
    }
}
