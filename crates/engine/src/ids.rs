//! Ids that must not be mixed up: a table's id and a sequence number are
//! both plain integers on disk, and the places that hold both side by side
//! (which WAL segment may retire, which sequence number a table's regions
//! have flushed) take these types, so swapping them does not compile.
//! Device ids are [`crate::key::DeviceId`].

/// A table's id (formats/manifest.md: assigned at creation, never reused).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TableId(pub u32);

/// A write's sequence number: every WAL entry has one, increasing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SeqNo(pub u64);

impl std::fmt::Display for TableId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::fmt::Display for SeqNo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}
