//! `telestore table create|alter|list`.

use super::DirArg;
use anyhow::Result;
use clap::Subcommand;
use telestore::schema::{
    parse_duration_ms, BlockEncoding, Compression, Field, TableOptions, TableSchema,
};
use telestore::{Options, Store};

#[derive(Subcommand, Debug)]
pub enum TableCmd {
    /// Create a table (idempotent when the schema is identical).
    Create {
        /// Table name: [a-z0-9_]{1,64}.
        name: String,
        /// A field as name:type (f64, f32, i64, i32, u64, u32, bool); repeat.
        #[arg(long = "field", required = true)]
        fields: Vec<String>,
        /// Retention by each reading's own timestamp, e.g. 30d, 12h (default: keep forever).
        #[arg(long)]
        ttl: Option<String>,
        /// Versions kept per (device, ts).
        #[arg(long, default_value_t = 1)]
        max_versions: u32,
        /// Block compression: none, snappy, zstd or zstd:LEVEL.
        #[arg(long, default_value = "zstd")]
        compression: String,
        /// Target uncompressed HFile block size in bytes.
        #[arg(long, default_value_t = 65536)]
        block_size: u32,
        /// Do not write bloom filters.
        #[arg(long)]
        no_bloom: bool,
        /// Regions the table is pre-split into: equal slices of the 2-byte hash
        /// prefix (1..=65536).
        #[arg(long, default_value_t = 16)]
        regions: u32,
        /// Data block layout of compacted files: `columnar` (keys as runs,
        /// each field its own column, decimals bit-packed, other numbers
        /// pco-coded: about 6× smaller for telemetry, faster scans and
        /// exports, compactions take about 1.7× the CPU) or `rows` (whole
        /// cells, then the compression).
        /// Flushes always write rows.
        #[arg(long, default_value_t = TableOptions::default().encoding.name().to_string())]
        encoding: String,
        #[command(flatten)]
        dir: DirArg,
    },
    /// Change a table's block encoding. Compactions from now on write
    /// it; existing files move over as they compact (`telestore compact
    /// --table NAME --major` converts them all now).
    Alter {
        name: String,
        /// rows or columnar.
        #[arg(long)]
        encoding: String,
        #[command(flatten)]
        dir: DirArg,
    },
    /// List tables with their fields and options.
    List {
        #[command(flatten)]
        dir: DirArg,
    },
}

#[expect(clippy::too_many_lines, reason = "one match arm per table subcommand")]
pub fn run(cmd: TableCmd) -> Result<()> {
    match cmd {
        TableCmd::Create {
            name,
            fields,
            ttl,
            max_versions,
            compression,
            block_size,
            no_bloom,
            regions,
            encoding,
            dir,
        } => {
            let fields = fields
                .iter()
                .map(|f| Field::parse(f))
                .collect::<Result<Vec<_>, _>>()?;
            let options = TableOptions {
                ttl_ms: ttl.as_deref().map(parse_duration_ms).transpose()?,
                max_versions,
                compression: Compression::parse(&compression)?,
                block_size_bytes: block_size,
                bloom: !no_bloom,
                regions,
                encoding: BlockEncoding::parse(&encoding)?,
            };
            let schema = TableSchema::new(&name, fields, options)?;
            let store = Store::open(&dir.dir, Options::default())?;
            let id = store.create_table(schema)?;
            println!("table {name} (id {id}) ready in {}", dir.dir.display());
            store.close()?;
            Ok(())
        }
        TableCmd::Alter {
            name,
            encoding,
            dir,
        } => {
            let encoding = BlockEncoding::parse(&encoding)?;
            let store = Store::open(&dir.dir, Options::default())?;
            store.set_table_encoding(&name, encoding)?;
            println!("table {name}: compactions now write {encoding} blocks");
            store.close()?;
            Ok(())
        }
        TableCmd::List { dir } => {
            let store = super::query::open_store(&dir.dir, Options::default())?;
            for name in store.table_names() {
                let s = store.schema(&name)?;
                let fields: Vec<String> = s
                    .fields
                    .iter()
                    .map(|f| format!("{}:{}", f.name, f.ty.name()))
                    .collect();
                let o = &s.options;
                println!(
                    "{name}\trow {} bytes\tfields {}\tttl {}\tversions {}\t{}\tblock {}\tbloom {}\tregions {}\tencoding {}",
                    s.row_width(),
                    fields.join(","),
                    o.ttl_ms.map_or("none".to_string(), |t| format!("{t}ms")),
                    o.max_versions,
                    o.compression,
                    o.block_size_bytes,
                    o.bloom,
                    o.regions,
                    o.encoding
                );
            }
            store.close()?;
            Ok(())
        }
    }
}
