//! The README's library quick start, compiled by `cargo test --all-targets`
//! so the README cannot drift. Run: `cargo run --example quickstart`.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    reason = "a benchmark or example: a failed unwrap stops it, and it reads top to bottom"
)]

use telestore::schema::batch::push_row;
use telestore::schema::{Field, FieldType, TableOptions, TableSchema};
use telestore::{Durability, Options, Order, Store};

fn main() -> telestore::Result<()> {
    let store = Store::open("telestore-data/quickstart", Options::default())?;
    store.create_table(TableSchema::new(
        "readings",
        vec![Field::new("temp", FieldType::F64)],
        TableOptions::default(),
    )?)?;

    // A batch is fixed-width little-endian rows: device u64 | ts i64 (ms) | fields.
    let mut batch = Vec::new();
    push_row(&mut batch, 42, 1_700_000_000_000, &21.5f64.to_le_bytes());
    store.write("readings", &batch, Durability::Sync)?; // returns after fdatasync

    let newest = store.latest("readings", 42, 10)?;
    let rows = store.scan(
        "readings",
        42,
        1_699_999_000_000,
        1_700_000_000_000,
        Order::OldestFirst,
    )?;
    store.delete_range("readings", 42, 0, 1_600_000_000_000, Durability::Sync)?;
    println!("latest: {newest:?}\nrange: {rows:?}");
    Ok(())
}
