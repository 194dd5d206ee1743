//! A telestore table as a DataFusion `TableProvider`: the row columns of
//! `formats/arrow.md` (`device_id`, `device`, `ts`, the fields) plus one
//! column per device tag key, filled from the device registry. Scans
//! read only the projected fields, apply device, tag and time filters
//! themselves (`filter.rs`), and run one partition per region that may
//! hold matching rows, each reading its key span.

use super::filter::{analyze, Columns, Pushed, Target, Value};
use crate::columns::{arrow_type, device_type, ts_type};
use crate::plan::Devices;
use crate::{Plan, Prepared};
use arrow_array::types::UInt32Type;
use arrow_array::{
    Array, ArrayRef, DictionaryArray, RecordBatch, StringArray, UInt32Array, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchReceiverStream;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;
use telestore_engine::engine::KeySpan;
use telestore_engine::key::{self, DeviceId};
use telestore_engine::schema::TableSchema;
use telestore_engine::Store;

/// The device registry as SQL sees it: names and tags by device id.
#[derive(Debug, Default)]
pub struct Registry {
    /// Tag keys shown as columns, sorted.
    pub tag_keys: Vec<String>,
    /// For each tag key: its values, and each device's index into them.
    tags: Vec<(ArrayRef, HashMap<u64, u32>)>,
    names: HashMap<String, u64>,
    /// `(key, value)` -> devices.
    by_tag: HashMap<(String, String), Vec<u64>>,
}

impl Registry {
    /// Read the device registry of `store` (names, ids, tags).
    pub fn load(store: &Store) -> Registry {
        let mut keys: BTreeMap<String, (Vec<String>, HashMap<u64, u32>)> = BTreeMap::new();
        let mut names = HashMap::new();
        let mut by_tag: HashMap<(String, String), Vec<u64>> = HashMap::new();
        for (id, e) in store.devices(None) {
            names.insert(e.name.clone(), id);
            for (k, v) in e.tags {
                let (values, ix) = keys.entry(k.clone()).or_default();
                let at = match values.iter().position(|x| *x == v) {
                    Some(i) => i,
                    None => {
                        values.push(v.clone());
                        values.len() - 1
                    }
                };
                ix.insert(id, at as u32);
                by_tag.entry((k, v)).or_default().push(id);
            }
        }
        let tag_keys = keys.keys().cloned().collect();
        let tags = keys
            .into_values()
            .map(|(values, ix)| (Arc::new(StringArray::from(values)) as ArrayRef, ix))
            .collect();
        Registry {
            tag_keys,
            tags,
            names,
            by_tag,
        }
    }

    /// The devices `v` names in column `t`.
    fn devices_of(&self, t: &Target, v: &Value) -> Vec<u64> {
        match (t, v) {
            (_, Value::Nothing) => Vec::new(),
            (Target::DeviceId, Value::Id(id)) => vec![*id],
            (Target::DeviceName, Value::Text(n)) => {
                self.names.get(n).copied().into_iter().collect()
            }
            (Target::Tag(k), Value::Text(val)) => self
                .by_tag
                .get(&(k.clone(), val.clone()))
                .cloned()
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }
}

/// One telestore table.
pub struct SqlTable {
    store: Arc<Store>,
    /// The query pool's count of blocking work (the scans).
    work: Arc<super::pool::Work>,
    table: TableSchema,
    schema: SchemaRef,
    registry: Arc<Registry>,
    /// Tag keys that became columns (a key named like a column is left out).
    tag_columns: Vec<usize>,
}

impl SqlTable {
    /// The SQL table over `table` of `store`; its scans count as `work`.
    pub fn new(
        store: Arc<Store>,
        work: Arc<super::pool::Work>,
        table: TableSchema,
        registry: Arc<Registry>,
    ) -> SqlTable {
        let mut cols = vec![
            Field::new("device_id", DataType::UInt64, false),
            Field::new("device", device_type(), true),
            Field::new("ts", ts_type(), false),
        ];
        for f in &table.fields {
            cols.push(Field::new(&f.name, arrow_type(f.ty), false));
        }
        let mut tag_columns = Vec::new();
        for (i, k) in registry.tag_keys.iter().enumerate() {
            if cols.iter().all(|c| c.name() != k) {
                cols.push(Field::new(k, device_type(), true));
                tag_columns.push(i);
            }
        }
        SqlTable {
            store,
            work,
            table,
            schema: Arc::new(Schema::new(cols)),
            registry,
            tag_columns,
        }
    }
}

impl Columns for SqlTable {
    fn target(&self, column: &str) -> Option<Target> {
        match column {
            "device" => Some(Target::DeviceName),
            "device_id" => Some(Target::DeviceId),
            c => {
                let i = self.schema.index_of(c).ok()?;
                (i >= 3 + self.table.fields.len()).then(|| Target::Tag(c.to_string()))
            }
        }
    }
}

#[allow(
    clippy::too_many_lines,
    reason = "the TableProvider scan turns filters, projection and limit into one plan; splitting it would pass all of them around"
)]
#[async_trait]
impl TableProvider for SqlTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| match analyze(f, self) {
                Some(_) => TableProviderFilterPushDown::Exact,
                None => TableProviderFilterPushDown::Unsupported,
            })
            .collect())
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let mut devices: Option<HashSet<u64>> = None;
        let (mut from, mut to) = (i64::MIN, i64::MAX);
        for f in filters {
            match analyze(f, self) {
                Some(Pushed::Window(a, b)) => {
                    from = from.max(a);
                    to = to.min(b);
                }
                Some(Pushed::OneOf(t, values)) => {
                    let ids: HashSet<u64> = values
                        .iter()
                        .flat_map(|v| self.registry.devices_of(&t, v))
                        .collect();
                    devices = Some(match devices {
                        None => ids,
                        Some(d) => d.intersection(&ids).copied().collect(),
                    });
                }
                None => {
                    return Err(DataFusionError::Internal(format!(
                        "filter {f} was not accepted for pushdown"
                    )))
                }
            }
        }
        let projection: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.schema.fields().len()).collect(),
        };
        let n_fields = self.table.fields.len();
        let fields: Vec<usize> = projection
            .iter()
            .filter(|&&i| (3..3 + n_fields).contains(&i))
            .map(|&i| i - 3)
            .collect();
        let devices = match devices {
            None => Devices::All,
            Some(set) => {
                let mut ids: Vec<u64> = set.into_iter().collect();
                ids.sort_unstable_by_key(|&d| (key::prefix(DeviceId(d)), d));
                Devices::Some(ids)
            }
        };
        let empty = from >= to || matches!(&devices, Devices::Some(v) if v.is_empty());
        let spans = if empty {
            Vec::new()
        } else {
            let ids = match &devices {
                Devices::Some(v) => Some(v.as_slice()),
                Devices::All => None,
            };
            let to_incl = if to == i64::MAX { i64::MAX } else { to - 1 };
            self.store
                .spans_with_data(&self.table.name, from, to_incl, ids)
                .map_err(|e| DataFusionError::External(Box::new(e)))?
        };
        let out_schema = Arc::new(
            self.schema
                .project(&projection)
                .map_err(|e| DataFusionError::ArrowError(Box::new(e), None))?,
        );
        let props = PlanProperties::new(
            EquivalenceProperties::new(out_schema.clone()),
            Partitioning::UnknownPartitioning(spans.len().max(1)),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        let out = Arc::new(Projector {
            table: self.table.clone(),
            registry: self.registry.clone(),
            tag_columns: self.tag_columns.clone(),
            projection,
            schema: out_schema,
        });
        Ok(Arc::new(ScanExec {
            store: self.store.clone(),
            work: self.work.clone(),
            out,
            fields,
            devices,
            window: (from, to),
            spans,
            limit,
            props: Arc::new(props),
        }))
    }
}

impl fmt::Debug for SqlTable {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "SqlTable({})", self.table.name)
    }
}

impl fmt::Debug for ScanExec {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.fmt_as(DisplayFormatType::Default, f)
    }
}

/// The scan of one table: one partition per key span.
pub struct ScanExec {
    store: Arc<Store>,
    work: Arc<super::pool::Work>,
    /// What turns read batches into output batches (shared with the
    /// partitions' threads).
    out: Arc<Projector>,
    /// Table fields read.
    fields: Vec<usize>,
    devices: Devices,
    window: (i64, i64),
    spans: Vec<KeySpan>,
    limit: Option<usize>,
    props: Arc<PlanProperties>,
}

/// The output columns of a scan.
struct Projector {
    table: TableSchema,
    registry: Arc<Registry>,
    tag_columns: Vec<usize>,
    /// Columns of the table's SQL schema, in output order.
    projection: Vec<usize>,
    schema: SchemaRef,
}

impl Projector {
    /// The output columns of one batch of the plan's rows.
    fn project(&self, b: &RecordBatch) -> DfResult<RecordBatch> {
        let n = b.num_rows();
        let n_fields = self.table.fields.len();
        let ids = b
            .column_by_name("device_id")
            .and_then(|c| c.as_any().downcast_ref::<UInt64Array>())
            .ok_or_else(|| DataFusionError::Internal("device_id missing".into()))?;
        let mut cols: Vec<ArrayRef> = Vec::with_capacity(self.projection.len());
        for &i in &self.projection {
            let col = match i {
                0 => b.column_by_name("device_id").cloned(),
                1 => Some(
                    b.column_by_name("device")
                        .cloned()
                        .unwrap_or_else(|| arrow_array::new_null_array(&device_type(), n)),
                ),
                2 => b.column_by_name("ts").cloned(),
                i if i < 3 + n_fields => b.column_by_name(&self.table.fields[i - 3].name).cloned(),
                i => {
                    let (values, ix) = &self.registry.tags[self.tag_columns[i - 3 - n_fields]];
                    let keys: UInt32Array =
                        ids.values().iter().map(|d| ix.get(d).copied()).collect();
                    let dict = DictionaryArray::<UInt32Type>::try_new(keys, values.clone())?;
                    Some(Arc::new(dict) as ArrayRef)
                }
            };
            cols.push(col.ok_or_else(|| DataFusionError::Internal(format!("column {i} missing")))?);
        }
        Ok(RecordBatch::try_new_with_options(
            self.schema.clone(),
            cols,
            &arrow_array::RecordBatchOptions::new().with_row_count(Some(n)),
        )?)
    }
}

impl DisplayAs for ScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let devices = match &self.devices {
            Devices::All => "all".to_string(),
            Devices::Some(v) => v.len().to_string(),
        };
        let show = |t: i64, none: i64| {
            if t == none {
                "unbounded".to_string()
            } else {
                t.to_string()
            }
        };
        let names: Vec<&str> = self
            .out
            .projection
            .iter()
            .map(|&i| self.out.schema_name(i))
            .collect();
        write!(
            f,
            "TelestoreScan: table={}, regions={}, devices={}, window=[{}, {}), columns=[{}]",
            self.out.table.name,
            self.spans.len(),
            devices,
            show(self.window.0, i64::MIN),
            show(self.window.1, i64::MAX),
            names.join(", ")
        )?;
        if let Some(l) = self.limit {
            write!(f, ", limit={l}")?;
        }
        Ok(())
    }
}

impl Projector {
    fn schema_name(&self, i: usize) -> &str {
        let n_fields = self.table.fields.len();
        match i {
            0 => "device_id",
            1 => "device",
            2 => "ts",
            i if i < 3 + n_fields => &self.table.fields[i - 3].name,
            i => &self.registry.tag_keys[self.tag_columns[i - 3 - n_fields]],
        }
    }
}

impl ExecutionPlan for ScanExec {
    fn name(&self) -> &str {
        "TelestoreScan"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.props
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let mut builder = RecordBatchReceiverStream::builder(self.out.schema.clone(), 2);
        let Some(span) = self.spans.get(partition).copied() else {
            return Ok(builder.build());
        };
        let mut plan = Plan::scan(
            self.out.table.clone(),
            self.devices.clone(),
            self.window,
            self.fields.clone(),
            span,
        );
        plan.limit = self.limit.map(|l| l as u64);
        let (store, out, tx) = (self.store.clone(), self.out.clone(), builder.tx());
        let busy = self.work.begin();
        let scan = move || {
            Prepared::new(&store, plan)
                .run(&store, &mut |b| {
                    let b = out
                        .project(&b)
                        .map_err(|e| telestore_engine::Error::invalid("sql", e.to_string()))?;
                    tx.blocking_send(Ok(b)).map_err(|_| {
                        telestore_engine::Error::invalid("sql", "the query was cancelled")
                    })
                })
                .map(|_| ())
                .map_err(|e| DataFusionError::External(Box::new(e)))
        };
        // `scan` and what it captured (the store) are dropped before
        // `busy`: a stop that waits for the pool's work waits for them.
        builder.spawn_blocking(move || {
            let done = scan();
            drop(busy);
            done
        });
        Ok(builder.build())
    }
}
