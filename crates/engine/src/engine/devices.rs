//! The device registry: names ↔ u64 ids with tags, kept in the manifest
//! (the engine's own catalog, as HBase keeps `hbase:meta`), crash-safe
//! (a registration is fsynced before it is used) and indexed by tag in
//! memory. Ids the registry assigns start at [`REGISTRY_ID_BASE`], above
//! the numeric ids binary-protocol clients use for unnamed devices; they
//! are never reused.

use super::catalog::Catalog;
use super::Store;
use crate::error::{Error, Result};
use crate::manifest::record::DEVICE_TAGS_MAX;
/// Most bytes of a device name, tag key or tag value.
pub use crate::manifest::record::DEVICE_TEXT_MAX;
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

/// One tag: key and value.
type Tag = (String, String);

/// What a device name, tag key or tag value may hold: 1 to
/// [`DEVICE_TEXT_MAX`] bytes of UTF-8 without control characters (so a
/// writer cannot put terminal escapes or line breaks into what `telestore
/// devices` and the query outputs print); at most [`DEVICE_TAGS_MAX`]
/// tags, each key once. The error says which part broke which rule.
pub fn check_device_text(name: &str, tags: &[(String, String)]) -> std::result::Result<(), String> {
    let check = |what: &str, t: &str| {
        if t.is_empty() || t.len() > DEVICE_TEXT_MAX {
            return Err(format!(
                "{what} {:?} of {} bytes (1..={DEVICE_TEXT_MAX})",
                crate::util::text::escape_control(t),
                t.len()
            ));
        }
        match t.char_indices().find(|(_, c)| c.is_control()) {
            Some((i, c)) => Err(format!(
                "{what} {:?} holds control character U+{:04X} at byte {i} (names and tags may not)",
                crate::util::text::escape_control(t),
                u32::from(c)
            )),
            None => Ok(()),
        }
    };
    check("device name", name)?;
    if tags.len() > DEVICE_TAGS_MAX {
        return Err(format!("{} tags (at most {DEVICE_TAGS_MAX})", tags.len()));
    }
    for (i, (k, v)) in tags.iter().enumerate() {
        check("tag key", k)?;
        check("tag value", v)?;
        if tags[..i].iter().any(|(k2, _)| k2 == k) {
            return Err(format!("tag {k:?} given twice"));
        }
    }
    Ok(())
}

/// Why `tags` cannot be written for a device registered with `registered`:
/// tags are attributes fixed when a device is first registered, so that
/// every row of a device keeps the tags it was written with (a tag
/// filter never moves old rows between groups). A write that names the
/// device without tags is fine; one that gives other tags is refused.
pub fn tag_conflict(
    name: &str,
    registered: &[(String, String)],
    tags: &[(String, String)],
) -> Option<String> {
    if tags.is_empty() || tags == registered {
        return None;
    }
    let show = |t: &[(String, String)]| {
        let v: Vec<String> = t.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if v.is_empty() {
            "no tags".to_string()
        } else {
            v.join(",")
        }
    };
    Some(format!(
        "device {name:?} is registered with {} and cannot change to {}: a device's tags are fixed \
         at its first write (name it without tags, or use a new device name)",
        show(registered),
        show(tags)
    ))
}

impl Store {
    /// Register devices by name: returns their ids in order. New names
    /// get new ids and keep the tags given (in the order given); a known
    /// name keeps its id and its tags, and giving it other (non-empty)
    /// tags is refused ([`tag_conflict`]), as is text that breaks
    /// [`check_device_text`]; then nothing is registered. Durable (one
    /// manifest fsync for all new devices) on return.
    pub fn register_devices(
        &self,
        devices: &[(String, Vec<(String, String)>)],
    ) -> Result<Vec<u64>> {
        self.shared.poison.check()?;
        let writable = self.shared.check_writable("register devices");
        // Fast path: every name known, with its tags or none.
        {
            let ix = self.shared.catalog.devices();
            let known: Option<Vec<u64>> = devices
                .iter()
                .map(|(n, tags)| {
                    let id = ix.id(n)?;
                    let e = ix.entries.get(&id)?;
                    (tags.is_empty() || e.tags == *tags).then_some(id)
                })
                .collect();
            if let Some(ids) = known {
                return Ok(ids);
            }
        }
        writable?;
        // The manifest lock serializes registrations.
        let mut m = self.shared.catalog.manifest();
        let mut ix = self.shared.catalog.devices_mut();
        let mut next = ix.next_id;
        let mut records = Vec::new();
        // Devices first seen in this call: their ids and tags.
        let mut pending: HashMap<&str, (u64, &[Tag])> = HashMap::new();
        let mut ids = Vec::with_capacity(devices.len());
        for (name, tags) in devices {
            check_device_text(name, tags).map_err(|m| Error::invalid("device", m))?;
            let known = ix
                .id(name)
                .and_then(|id| ix.entries.get(&id).map(|e| (id, e.tags.as_slice())))
                .or_else(|| pending.get(name.as_str()).copied());
            let id = match known {
                Some((id, before)) => {
                    if let Some(m) = tag_conflict(name, before, tags) {
                        return Err(Error::invalid("device", m));
                    }
                    id
                }
                None => {
                    let id = next;
                    next = next
                        .checked_add(1)
                        .ok_or_else(|| Error::invalid("device", "registry ids exhausted"))?;
                    pending.insert(name, (id, tags));
                    records.push(Record::Device {
                        id,
                        name: name.clone(),
                        tags: tags.clone(),
                    });
                    id
                }
            };
            ids.push(id);
        }
        if records.is_empty() {
            return Ok(ids);
        }
        Catalog::append_to(&mut m, &self.shared.poison, &records)?;
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
        self.shared.catalog.devices().id(name)
    }

    /// How many devices the registry holds.
    pub fn device_count(&self) -> usize {
        self.shared.catalog.devices().entries.len()
    }

    /// Name and tags of device `id`, when registered.
    pub fn device(&self, id: u64) -> Option<DeviceEntry> {
        self.shared.catalog.devices().entries.get(&id).cloned()
    }

    /// Registered devices, by id; with `tag = Some((key, value))` only
    /// those carrying that tag (answered from the tag index).
    pub fn devices(&self, tag: Option<(&str, &str)>) -> Vec<(u64, DeviceEntry)> {
        let ix = self.shared.catalog.devices();
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
