//! The systems under test, behind one small trait: each stores the same
//! readings with the same durability (every batch fsynced before the
//! write returns) and answers the same reads.

use crate::data::{Reading, FIELDS, VALUE_LEN};
use anyhow::{Context, Result};
use arrow_array::cast::AsArray;
use arrow_array::types::Float64Type;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use telestore::key::{encode, DeviceId, RowKey};
use telestore::query::{Kind, Params, Plan, Prepared};
use telestore::schema::BlockEncoding;
use telestore::{Durability, Store};

/// One system under test, open on its own directory.
pub trait System: Send + Sync {
    /// Store a batch; returns once it is durable (fsynced).
    fn write(&self, batch: &[Reading]) -> Result<()>;
    /// Flush everything and compact it as far as the system goes.
    fn settle(&mut self) -> Result<()>;
    /// Bytes of the files that hold data (no logs).
    fn data_bytes(&self) -> Result<u64>;
    /// A device's readings with `from <= ts <= to`: rows and the sum of
    /// their latitude (read from the stored bytes).
    fn range(&self, device: u64, from: i64, to: i64) -> Result<(u64, f64)>;
    /// Timestamp of a device's newest reading.
    fn latest(&self, device: u64) -> Result<Option<i64>>;
    /// Every device's readings with `from <= ts <= to` (a fleet-wide
    /// window): rows read.
    fn window(&self, devices: u64, from: i64, to: i64) -> Result<u64> {
        let mut n = 0;
        for d in 0..devices {
            n += self.range(d, from, to)?.0;
        }
        Ok(n)
    }
}

/// The systems by name, as `--systems` lists them.
pub const NAMES: [&str; 7] = [
    "telestore",
    "telestore-rows",
    "rocksdb",
    "fjall",
    "parquet",
    "telestore-http",
    "influxdb",
];

/// Open system `name` on a new directory `dir` (`bin`: the telestore
/// binary the daemon runs from).
pub fn open(name: &str, dir: &Path, bin: &Path) -> Result<Box<dyn System>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(match name {
        "telestore" => Box::new(Telestore::open(dir, BlockEncoding::Columnar)?),
        "telestore-rows" => Box::new(Telestore::open(dir, BlockEncoding::Rows)?),
        "rocksdb" => Box::new(Rocks::open(dir)?),
        "fjall" => Box::new(Fjall::open(dir)?),
        "parquet" => Box::new(ParquetFile::open(dir)),
        "telestore-http" => Box::new(crate::http::Daemon::open(bin, dir)?),
        "influxdb" => Box::new(crate::http::Influx::open(dir)?),
        other => anyhow::bail!("unknown system {other} (known: {NAMES:?})"),
    })
}

/// Bytes of the files under `dir` whose name satisfies `keep`.
pub fn dir_bytes(dir: &Path, keep: &dyn Fn(&Path) -> bool) -> Result<u64> {
    let mut n = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let p = e.path();
        if e.file_type()?.is_dir() {
            n += dir_bytes(&p, keep)?;
        } else if keep(&p) {
            n += e.metadata()?.len();
        }
    }
    Ok(n)
}

fn latitude(value: &[u8]) -> f64 {
    f64::from_le_bytes(value[..8].try_into().unwrap_or([0; 8]))
}

/// A device's keys for `from <= ts <= to`: newest first, so the lower
/// key holds `to`.
fn device_keys(device: u64, from: i64, to: i64) -> (RowKey, RowKey) {
    (encode(DeviceId(device), to), encode(DeviceId(device), from))
}

// ---- telestore -------------------------------------------------------------

/// telestore through its library API: default table options (columnar
/// blocks), `sync` durability; reads through the query layer (Arrow
/// record batches), `latest` through `Store::latest`.
pub struct Telestore {
    store: Store,
    dir: PathBuf,
}

const TABLE: &str = "readings";

impl Telestore {
    /// `encoding`: `Columnar` is the default table options; `Rows` is
    /// telestore before columnar blocks (`--systems telestore-rows`).
    fn open(dir: &Path, encoding: BlockEncoding) -> Result<Self> {
        let store = Store::open(dir, telestore::Options::default())?;
        let mut schema = telestore::testkit::readings_schema(TABLE);
        schema.options.encoding = encoding;
        store.create_table(schema)?;
        Ok(Telestore {
            store,
            dir: dir.to_path_buf(),
        })
    }

    fn query(&self, p: &Params) -> Result<(u64, f64)> {
        let plan = Plan::resolve(&self.store, p, self.store.now_ms())?;
        let (mut n, mut sum) = (0u64, 0f64);
        Prepared::new(&self.store, plan).run(&self.store, &mut |b| {
            n += b.num_rows() as u64;
            if let Some(c) = b.column_by_name(FIELDS[0]) {
                sum += c.as_primitive::<Float64Type>().values().iter().sum::<f64>();
            }
            Ok(())
        })?;
        Ok((n, sum))
    }
}

impl System for Telestore {
    fn write(&self, batch: &[Reading]) -> Result<()> {
        let mut b = Vec::with_capacity(batch.len() * (16 + VALUE_LEN));
        for r in batch {
            telestore::schema::batch::push_row(&mut b, r.device, r.ts, &r.fields);
        }
        self.store.write(TABLE, &b, Durability::Sync)?;
        Ok(())
    }

    fn settle(&mut self) -> Result<()> {
        self.store.flush()?;
        self.store.compact(TABLE, true)?;
        Ok(())
    }

    fn data_bytes(&self) -> Result<u64> {
        dir_bytes(&self.dir.join("tables"), &|_| true)
    }

    fn range(&self, device: u64, from: i64, to: i64) -> Result<(u64, f64)> {
        self.query(&Params {
            kind: Kind::Range,
            table: TABLE.into(),
            device: Some(device.to_string()),
            from: Some(format!("{from}ms")),
            to: Some(format!("{}ms", to + 1)),
            ..Params::default()
        })
    }

    fn latest(&self, device: u64) -> Result<Option<i64>> {
        Ok(self.store.latest(TABLE, device, 1)?.first().map(|r| r.ts))
    }

    fn window(&self, _devices: u64, from: i64, to: i64) -> Result<u64> {
        let p = Params {
            kind: Kind::Scan,
            table: TABLE.into(),
            from: Some(format!("{from}ms")),
            to: Some(format!("{}ms", to + 1)),
            ..Params::default()
        };
        Ok(self.query(&p)?.0)
    }
}

// ---- RocksDB ---------------------------------------------------------------

/// RocksDB (the `rocksdb` crate): zstd, a 10-bit bloom filter, the WAL on
/// and synced per write batch; the same keys, the fields as the value.
pub struct Rocks {
    db: rocksdb::DB,
}

impl Rocks {
    fn open(dir: &Path) -> Result<Self> {
        let mut opts = rocksdb::Options::default();
        opts.create_if_missing(true);
        opts.set_compression_type(rocksdb::DBCompressionType::Zstd);
        let mut table = rocksdb::BlockBasedOptions::default();
        table.set_bloom_filter(10.0, false);
        opts.set_block_based_table_factory(&table);
        Ok(Rocks {
            db: rocksdb::DB::open(&opts, dir)?,
        })
    }
}

impl System for Rocks {
    fn write(&self, batch: &[Reading]) -> Result<()> {
        let mut wb = rocksdb::WriteBatch::default();
        for r in batch {
            wb.put(r.key(), r.fields);
        }
        let mut wo = rocksdb::WriteOptions::default();
        wo.set_sync(true);
        self.db.write_opt(wb, &wo)?;
        Ok(())
    }

    fn settle(&mut self) -> Result<()> {
        self.db.flush()?;
        self.db.compact_range(None::<&[u8]>, None::<&[u8]>);
        Ok(())
    }

    fn data_bytes(&self) -> Result<u64> {
        let sst = |p: &Path| p.extension().is_some_and(|e| e == "sst");
        dir_bytes(self.db.path(), &sst)
    }

    fn range(&self, device: u64, from: i64, to: i64) -> Result<(u64, f64)> {
        let (lo, hi) = device_keys(device, from, to);
        let mut it = self.db.raw_iterator();
        it.seek(lo);
        let (mut n, mut sum) = (0u64, 0f64);
        while let (Some(k), Some(v)) = (it.key(), it.value()) {
            if k > &hi[..] {
                break;
            }
            n += 1;
            sum += latitude(v);
            it.next();
        }
        it.status()?;
        Ok((n, sum))
    }

    fn latest(&self, device: u64) -> Result<Option<i64>> {
        let (lo, hi) = device_keys(device, i64::MIN, i64::MAX);
        let mut it = self.db.raw_iterator();
        it.seek(lo);
        let ts = it
            .key()
            .filter(|k| *k <= &hi[..])
            .map(|k| telestore::key::ts_of(k.try_into().unwrap_or(&[0; 18])));
        it.status()?;
        Ok(ts)
    }
}

// ---- fjall -----------------------------------------------------------------

/// fjall: one keyspace with its default options (compression included),
/// every write batch persisted with `SyncAll`; the same keys and values.
pub struct Fjall {
    db: fjall::Database,
    ks: fjall::Keyspace,
}

impl Fjall {
    fn open(dir: &Path) -> Result<Self> {
        let db = fjall::Database::builder(dir).open()?;
        let ks = db.keyspace(TABLE, fjall::KeyspaceCreateOptions::default)?;
        Ok(Fjall { db, ks })
    }
}

impl System for Fjall {
    fn write(&self, batch: &[Reading]) -> Result<()> {
        let mut wb = self
            .db
            .batch()
            .durability(Some(fjall::PersistMode::SyncAll));
        for r in batch {
            wb.insert(&self.ks, r.key().to_vec(), r.fields.to_vec());
        }
        wb.commit()?;
        Ok(())
    }

    fn settle(&mut self) -> Result<()> {
        self.ks.rotate_memtable_and_wait()?;
        self.ks.major_compact()?;
        Ok(())
    }

    fn data_bytes(&self) -> Result<u64> {
        Ok(self.ks.disk_space())
    }

    fn range(&self, device: u64, from: i64, to: i64) -> Result<(u64, f64)> {
        let (lo, hi) = device_keys(device, from, to);
        let (mut n, mut sum) = (0u64, 0f64);
        for g in self.ks.range(lo..=hi) {
            let (_, v) = g.into_inner()?;
            n += 1;
            sum += latitude(&v);
        }
        Ok((n, sum))
    }

    fn latest(&self, device: u64) -> Result<Option<i64>> {
        let (lo, hi) = device_keys(device, i64::MIN, i64::MAX);
        match self.ks.range(lo..=hi).next() {
            Some(g) => {
                let (k, _) = g.into_inner()?;
                Ok(Some(telestore::key::ts_of(
                    k.as_ref().try_into().unwrap_or(&[0; 18]),
                )))
            }
            None => Ok(None),
        }
    }
}

// ---- Parquet ---------------------------------------------------------------

/// A zstd Parquet file of every reading in key order, written when the
/// load settles: what an analyst would keep with no database. Storage
/// only: its writes are buffered (not durable per batch) and it answers
/// no reads (`range`/`latest` are not measured for it).
pub struct ParquetFile {
    path: PathBuf,
    rows: std::sync::Mutex<Vec<Reading>>,
}

impl ParquetFile {
    fn open(dir: &Path) -> Self {
        ParquetFile {
            path: dir.join("readings.parquet"),
            rows: std::sync::Mutex::new(Vec::new()),
        }
    }
}

impl System for ParquetFile {
    fn write(&self, batch: &[Reading]) -> Result<()> {
        self.rows
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .extend_from_slice(batch);
        Ok(())
    }

    fn settle(&mut self) -> Result<()> {
        let mut rows =
            std::mem::take(&mut *self.rows.lock().map_err(|_| anyhow::anyhow!("poisoned"))?);
        rows.sort_by_key(|r| r.key());
        write_parquet(&self.path, &rows)
    }

    fn data_bytes(&self) -> Result<u64> {
        Ok(std::fs::metadata(&self.path)?.len())
    }

    fn range(&self, _: u64, _: i64, _: i64) -> Result<(u64, f64)> {
        anyhow::bail!("the Parquet baseline answers no reads")
    }

    fn latest(&self, _: u64) -> Result<Option<i64>> {
        anyhow::bail!("the Parquet baseline answers no reads")
    }
}

/// `device u64 | ts timestamp(ms) | seven f64`, zstd (level 3), row
/// groups of 1 M rows.
fn write_parquet(path: &Path, rows: &[Reading]) -> Result<()> {
    use arrow_array::{
        ArrayRef, Float64Array, RecordBatch, TimestampMillisecondArray, UInt64Array,
    };
    use arrow_schema::{DataType, Field, Schema, TimeUnit};
    let mut cols = vec![
        Field::new("device", DataType::UInt64, false),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            false,
        ),
    ];
    cols.extend(
        FIELDS
            .iter()
            .map(|f| Field::new(*f, DataType::Float64, false)),
    );
    let schema = Arc::new(Schema::new(cols));
    let props = parquet::file::properties::WriterProperties::builder()
        .set_compression(parquet::basic::Compression::ZSTD(
            parquet::basic::ZstdLevel::try_new(3)?,
        ))
        .set_max_row_group_row_count(Some(1 << 20))
        .build();
    let file = std::fs::File::create(path)?;
    let mut w = parquet::arrow::ArrowWriter::try_new(file, schema.clone(), Some(props))?;
    for chunk in rows.chunks(1 << 16) {
        let mut arrays: Vec<ArrayRef> = vec![
            Arc::new(UInt64Array::from_iter_values(
                chunk.iter().map(|r| r.device),
            )),
            Arc::new(TimestampMillisecondArray::from_iter_values(
                chunk.iter().map(|r| r.ts),
            )),
        ];
        for f in 0..FIELDS.len() {
            arrays.push(Arc::new(Float64Array::from_iter_values(chunk.iter().map(
                |r| f64::from_le_bytes(r.fields[f * 8..f * 8 + 8].try_into().unwrap_or([0; 8])),
            ))));
        }
        w.write(&RecordBatch::try_new(schema.clone(), arrays)?)?;
    }
    w.close()?;
    Ok(())
}
