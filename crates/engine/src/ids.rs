//! Ids that must not be mixed up. Tables, regions and files are numbered
//! by plain integers on disk, as are sequence numbers; the engine's live
//! state (`Table::id`, `Region::id`, `HFileReader::file_id`) and the places
//! that hold two kinds side by side (which WAL segment may retire, which
//! sequence number a table's regions have flushed) take these types, so
//! swapping them does not compile. The on-disk records (`manifest`,
//! `wal`) keep the integers their formats specify; `.0` is the crossing.
//! Device ids are [`crate::key::DeviceId`].

use std::fmt;

macro_rules! id {
    ($(#[$doc:meta])* $name:ident($int:ty)) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub $int);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

id!(
    /// A table's id (formats/manifest.md: assigned at creation, never reused).
    TableId(u32)
);
id!(
    /// A region's id, unique within its table (formats/manifest.md: a
    /// split's daughters and a merge's result take the next unused ones).
    RegionId(u32)
);
id!(
    /// An HFile's id, unique within the store: its file name
    /// (`tables/<table>/<id:016>.hfile`).
    FileId(u64)
);
id!(
    /// A write's sequence number: every WAL entry has one, increasing.
    SeqNo(u64)
);
