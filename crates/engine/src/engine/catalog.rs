//! The catalog: the tables open in memory, the manifest that makes them
//! durable, the device registry's index, and the file-id counter. A
//! change to any of them is a manifest record; [`Catalog::append`] is the
//! one place that writes one, and it stops the write path (`poison.rs`)
//! when the manifest's tail is left unknown by an I/O failure.

use super::devices::DeviceIndex;
use super::poison::Poison;
use super::table::Table;
use crate::error::{Error, Result};
use crate::ids::{FileId, RegionId, TableId};
use crate::manifest::{Manifest, Record};
use crate::util::sync::{LockExt, RwLockExt};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Tables by name, the manifest, devices and file ids.
pub(crate) struct Catalog {
    tables: RwLock<HashMap<String, Arc<Table>>>,
    manifest: Mutex<Manifest>,
    devices: RwLock<DeviceIndex>,
    next_file_id: AtomicU64,
}

impl Catalog {
    /// The catalog of an opened manifest and the tables built from it.
    pub fn new(manifest: Manifest, tables: Vec<Arc<Table>>) -> Self {
        let state = manifest.state();
        let devices = DeviceIndex::build(state.devices.iter());
        let next_file_id = state.max_file_id + 1;
        Catalog {
            tables: RwLock::new(
                tables
                    .into_iter()
                    .map(|t| (t.schema.name.clone(), t))
                    .collect(),
            ),
            manifest: Mutex::new(manifest),
            devices: RwLock::new(devices),
            next_file_id: AtomicU64::new(next_file_id),
        }
    }

    pub fn manifest(&self) -> MutexGuard<'_, Manifest> {
        self.manifest.lock_or_recover()
    }

    /// Append to the manifest. Refused input leaves it as it was; any
    /// other failure leaves its tail unknown, so it stops the write path.
    pub fn append(&self, poison: &Poison, records: &[Record]) -> Result<()> {
        Self::append_to(&mut self.manifest(), poison, records)
    }

    /// [`Catalog::append`] for a caller already holding the manifest.
    pub fn append_to(m: &mut Manifest, poison: &Poison, records: &[Record]) -> Result<()> {
        m.append(records).map_err(|e| match e {
            Error::InvalidInput { .. } => e,
            other => poison.stop(&other),
        })
    }

    /// Every open table.
    pub fn tables(&self) -> Vec<Arc<Table>> {
        self.tables.read_or_recover().values().cloned().collect()
    }

    /// The table map, to add a table (`Store::create_table`).
    pub fn tables_mut(&self) -> RwLockWriteGuard<'_, HashMap<String, Arc<Table>>> {
        self.tables.write_or_recover()
    }

    pub fn table_by_id(&self, id: TableId) -> Option<Arc<Table>> {
        self.tables().into_iter().find(|t| t.id == id)
    }

    /// The table named `name`, or an error naming the tables there are.
    pub fn table(&self, name: &str) -> Result<Arc<Table>> {
        let found = self.tables.read_or_recover().get(name).cloned();
        // The lock is released before the error takes it again.
        found.ok_or_else(|| self.unknown_table(name))
    }

    fn unknown_table(&self, name: &str) -> Error {
        let tables = self.tables.read_or_recover();
        let mut names: Vec<&str> = tables.keys().map(String::as_str).collect();
        names.sort_unstable();
        let shown = match names.len() {
            0 => "none".to_string(),
            n if n > 20 => format!("{}, … ({n} in all)", names[..20].join(", ")),
            _ => names.join(", "),
        };
        Error::UnknownTable(format!("{name:?} (tables: {shown})"))
    }

    pub fn devices(&self) -> RwLockReadGuard<'_, DeviceIndex> {
        self.devices.read_or_recover()
    }

    pub fn devices_mut(&self) -> RwLockWriteGuard<'_, DeviceIndex> {
        self.devices.write_or_recover()
    }

    pub fn next_file_id(&self) -> FileId {
        self.next_file_ids(1)
    }

    /// Reserve `n` consecutive file ids; the first.
    pub fn next_file_ids(&self, n: usize) -> FileId {
        FileId(self.next_file_id.fetch_add(n as u64, Ordering::SeqCst))
    }

    /// The lowest region id table `table` never used (and the one after
    /// it is free too: a split takes two).
    pub fn next_region_id(&self, table: TableId) -> Result<RegionId> {
        let m = self.manifest();
        let t = m
            .state()
            .tables
            .get(&table.0)
            .ok_or_else(|| Error::invalid("table", format!("no table id {table}")))?;
        t.next_region_id
            .checked_add(2)
            .map(|_| RegionId(t.next_region_id))
            .ok_or_else(|| Error::invalid("region", "region ids exhausted"))
    }
}
