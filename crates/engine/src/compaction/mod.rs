//! Compaction logic that needs no store: the planner ([`plan`]) and the
//! cell filter of a merge ([`filter`]). The engine runs them
//! (`engine/compact.rs`).

pub mod filter;
pub mod plan;
