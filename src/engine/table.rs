//! A table's live state: the active memstore, frozen memstores waiting
//! for their flush, and the HFiles.

use crate::hfile::HFileReader;
use crate::memstore::Memstore;
use crate::schema::TableSchema;
use std::sync::{Arc, Mutex, RwLock};

/// What a reader sees at one moment.
#[derive(Clone)]
pub struct TableState {
    pub active: Arc<Memstore>,
    /// Oldest first.
    pub frozen: Vec<Arc<Memstore>>,
    pub files: Vec<Arc<HFileReader>>,
}

/// One open table.
pub struct Table {
    pub id: u32,
    pub schema: TableSchema,
    pub state: RwLock<TableState>,
    /// Held while flushing, so one flusher handles a table at a time.
    pub flush_lock: Mutex<()>,
}

impl Table {
    pub fn new(id: u32, schema: TableSchema, files: Vec<Arc<HFileReader>>) -> Self {
        let fw = schema.fields_width();
        Table {
            id,
            schema,
            state: RwLock::new(TableState {
                active: Arc::new(Memstore::new(fw)),
                frozen: Vec::new(),
                files,
            }),
            flush_lock: Mutex::new(()),
        }
    }

    /// A consistent copy of the state for a read.
    pub fn snapshot(&self) -> TableState {
        self.state.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn write_state(&self) -> std::sync::RwLockWriteGuard<'_, TableState> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Freeze the active memstore if it holds anything. Returns whether a
    /// memstore was frozen. Only the commit thread calls this, between
    /// groups, so a frozen memstore holds every edit up to its max seq.
    pub fn freeze(&self) -> bool {
        let mut st = self.write_state();
        if st.active.is_empty() {
            return false;
        }
        let fresh = Arc::new(Memstore::new(self.schema.fields_width()));
        let old = std::mem::replace(&mut st.active, fresh);
        st.frozen.push(old);
        true
    }

    pub fn frozen_count(&self) -> usize {
        self.state
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .frozen
            .len()
    }
}

impl Table {
    /// The memstore taking writes now.
    pub fn active(&self) -> Arc<Memstore> {
        self.state
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .active
            .clone()
    }
}
