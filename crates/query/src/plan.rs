//! Query parameters (the same for the CLI and `GET /api/v1/query`) and
//! their resolution against a store into a checked [`Plan`]. Every
//! refusal is an [`Error::InvalidInput`] naming the argument.

use super::agg::{AggFn, GroupBy};
use super::time::{parse_every, parse_time};
use serde::{Deserialize, Serialize};
use telestore_engine::engine::KeySpan;
use telestore_engine::error::{Error, Result};
use telestore_engine::key::{self, DeviceId};
use telestore_engine::read::Order;
use telestore_engine::schema::TableSchema;
use telestore_engine::Store;

/// What to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// The newest `n` rows of one device.
    Latest,
    /// One device over a window.
    Range,
    /// All (or selected) devices over a window.
    #[default]
    Scan,
    /// Downsampled aggregates per time bucket.
    Agg,
}

/// Query parameters as text, exactly as given on the command line or in
/// a query string. Names match the CLI flags without the dashes.
/// An unknown name is refused (`form=` for `format=` exported the whole
/// table in the requested format's stead).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[serde(default, deny_unknown_fields)]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct Params {
    /// What to run (default `scan`).
    #[cfg_attr(feature = "openapi", param(inline))]
    pub kind: Kind,
    /// The table to read.
    #[cfg_attr(feature = "openapi", param(required = true))]
    pub table: String,
    /// One device, by name or numeric id.
    pub device: Option<String>,
    /// Comma-separated devices, by name or numeric id.
    pub devices: Option<String>,
    /// `tag=value`: the devices carrying that tag.
    #[serde(rename = "where")]
    pub where_: Option<String>,
    /// Start of the window, included (default: the beginning): RFC 3339,
    /// a number with a unit (`1700000000s`, `…ms`, `…us`, `…ns`), or
    /// relative to now (`-1h`, `now`).
    pub from: Option<String>,
    /// End of the window, excluded (default: no end); as `from`.
    pub to: Option<String>,
    /// Comma-separated field names (default: all).
    pub fields: Option<String>,
    /// `asc` or `desc` (range only; default desc, newest first).
    pub order: Option<String>,
    /// The most rows answered.
    pub limit: Option<u64>,
    /// Rows for `latest` (default 1).
    pub n: Option<u64>,
    /// Aggregate function (agg only): avg, min, max, sum, count, first
    /// or last.
    #[serde(rename = "fn")]
    pub func: Option<String>,
    /// Bucket width (agg only), e.g. `10m`.
    pub every: Option<String>,
    /// `device` or a tag key (agg only).
    pub group_by: Option<String>,
    /// Rows per record batch.
    pub batch_rows: Option<usize>,
    /// Response format (HTTP only): arrow, json, jsonl, csv or table.
    pub format: Option<String>,
}

/// Which devices a query reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Devices {
    /// Every device of the table.
    All,
    /// In key order (hash prefix, then id).
    Some(Vec<u64>),
}

/// A checked query.
#[derive(Clone, Debug)]
pub struct Plan {
    /// What to run.
    pub kind: Kind,
    /// The table's schema.
    pub schema: TableSchema,
    /// The devices it reads.
    pub devices: Devices,
    /// Half-open window `[from, to)` in epoch ms.
    pub from: i64,
    /// The end of the window, excluded.
    pub to: i64,
    /// Indexes of the chosen fields.
    pub fields: Vec<usize>,
    /// Newest or oldest first (range).
    pub order: Order,
    /// Rows at most (`None`: all).
    pub limit: Option<u64>,
    /// Rows per device for `latest`.
    pub n: usize,
    /// For `agg`: the function, the bucket width in ms and the grouping.
    pub agg: Option<(AggFn, i64, GroupBy)>,
    /// Rows per Arrow record batch.
    pub batch_rows: usize,
    /// The keys read: the whole table, or one span of it (a Flight
    /// endpoint's or a SQL partition's; scans only).
    pub keys: KeySpan,
}

/// Most rows `latest` returns.
pub const LATEST_MAX: u64 = 1_000_000;

impl Plan {
    /// The most rows a row query can return, when the plan says: `limit`,
    /// or `n` per device for `latest` of listed devices.
    pub fn max_rows(&self) -> Option<u64> {
        let latest = match (&self.kind, &self.devices) {
            (Kind::Latest, Devices::Some(ids)) => Some(self.n as u64 * ids.len() as u64),
            _ => None,
        };
        match (latest, self.limit) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Check `p` against `store` at time `now_ms`.
    #[expect(
        clippy::too_many_lines,
        reason = "resolves every query parameter in the documented order, each a few lines"
    )]
    pub fn resolve(store: &Store, p: &Params, now_ms: i64) -> Result<Plan> {
        let schema = store.schema(&p.table)?;
        let devices = select_devices(store, p)?;
        let needs_one = matches!(p.kind, Kind::Latest | Kind::Range);
        if needs_one && !matches!(&devices, Devices::Some(v) if v.len() == 1) {
            return Err(Error::invalid("--device", "exactly one device is needed"));
        }
        let from = match &p.from {
            Some(s) => parse_time("--from", s, now_ms)?,
            None => i64::MIN,
        };
        let to = match &p.to {
            Some(s) => parse_time("--to", s, now_ms)?,
            None => i64::MAX,
        };
        if from > to {
            return Err(Error::invalid(
                "--from",
                format!(
                    "{} is after --to {}",
                    super::time::format_ms(from),
                    super::time::format_ms(to)
                ),
            ));
        }
        let order = match p.order.as_deref() {
            None | Some("desc") => Order::NewestFirst,
            Some("asc") => Order::OldestFirst,
            Some(o) => return Err(Error::invalid("--order", format!("{o:?}: use asc or desc"))),
        };
        let n = p.n.unwrap_or(1);
        if n == 0 || n > LATEST_MAX {
            return Err(Error::invalid(
                "--n",
                format!("{n} outside 1..={LATEST_MAX}"),
            ));
        }
        let batch_rows = p.batch_rows.unwrap_or(super::columns::BATCH_ROWS_DEFAULT);
        if !(1..=super::columns::BATCH_ROWS_MAX).contains(&batch_rows) {
            return Err(Error::invalid(
                "--batch-rows",
                format!(
                    "{batch_rows} outside 1..={}",
                    super::columns::BATCH_ROWS_MAX
                ),
            ));
        }
        let fields = select_fields(&schema, p.fields.as_deref())?;
        let agg = if p.kind == Kind::Agg {
            Some(resolve_agg(store, &schema, &fields, p)?)
        } else {
            for (v, flag) in [
                (&p.func, "--fn"),
                (&p.every, "--every"),
                (&p.group_by, "--group-by"),
            ] {
                if v.is_some() {
                    return Err(Error::invalid(flag, "only applies to agg"));
                }
            }
            None
        };
        Ok(Plan {
            kind: p.kind,
            schema,
            devices,
            from,
            to,
            fields,
            order,
            limit: p.limit,
            n: n as usize,
            agg,
            batch_rows,
            keys: KeySpan::ALL,
        })
    }

    /// A scan of `schema`'s `fields` over `[from, to)` (epoch ms) of
    /// `devices` in `keys`: what a Flight ticket or a SQL partition runs.
    pub fn scan(
        schema: TableSchema,
        devices: Devices,
        (from, to): (i64, i64),
        fields: Vec<usize>,
        keys: KeySpan,
    ) -> Plan {
        Plan {
            kind: Kind::Scan,
            schema,
            devices,
            from,
            to,
            fields,
            order: Order::NewestFirst,
            limit: None,
            n: 1,
            agg: None,
            batch_rows: super::columns::BATCH_ROWS_DEFAULT,
            keys,
        }
    }

    /// The inclusive engine window, or None when `[from, to)` is empty.
    pub fn inclusive_window(&self) -> Option<(i64, i64)> {
        if self.to == i64::MAX {
            return Some((self.from, i64::MAX));
        }
        (self.from < self.to).then(|| (self.from, self.to - 1))
    }

    /// Schema metadata describing the window.
    pub fn window_meta(&self) -> Vec<(String, String)> {
        let show = |t: i64, unbounded: i64| {
            if t == unbounded {
                "unbounded".to_string()
            } else {
                t.to_string()
            }
        };
        vec![
            ("telestore.from_ms".into(), show(self.from, i64::MIN)),
            ("telestore.to_ms".into(), show(self.to, i64::MAX)),
        ]
    }
}

fn list_or_none(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// A device argument: a registered name, or else a numeric id.
fn device_arg(store: &Store, what: &'static str, s: &str) -> Result<u64> {
    let s = s.trim();
    if let Some(id) = store.device_id(s) {
        return Ok(id);
    }
    s.parse::<u64>().map_err(|_| {
        Error::invalid(
            what,
            format!("unknown device {s:?} (not a registered name nor a numeric id)"),
        )
    })
}

fn select_devices(store: &Store, p: &Params) -> Result<Devices> {
    let given = [p.device.is_some(), p.devices.is_some(), p.where_.is_some()];
    if given.iter().filter(|g| **g).count() > 1 {
        return Err(Error::invalid(
            "--device",
            "give only one of --device, --devices and --where",
        ));
    }
    let mut ids: Vec<u64> = if let Some(d) = &p.device {
        vec![device_arg(store, "--device", d)?]
    } else if let Some(list) = &p.devices {
        let v = list
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|s| device_arg(store, "--devices", s))
            .collect::<Result<Vec<u64>>>()?;
        if v.is_empty() {
            return Err(Error::invalid("--devices", "empty list"));
        }
        v
    } else if let Some(w) = &p.where_ {
        let (k, v) = w
            .split_once('=')
            .filter(|(k, v)| !k.is_empty() && !v.is_empty())
            .ok_or_else(|| Error::invalid("--where", format!("{w:?} is not tag=value")))?;
        let all = store.devices(None);
        if !all
            .iter()
            .any(|(_, e)| e.tags.iter().any(|(tk, _)| tk == k))
        {
            return Err(Error::invalid(
                "--where",
                format!("no registered device has a tag {k:?}"),
            ));
        }
        store
            .devices(Some((k, v)))
            .into_iter()
            .map(|(id, _)| id)
            .collect()
    } else {
        return Ok(Devices::All);
    };
    ids.sort_unstable_by_key(|&d| (key::prefix(DeviceId(d)), d));
    ids.dedup();
    Ok(Devices::Some(ids))
}

fn select_fields(schema: &TableSchema, list: Option<&str>) -> Result<Vec<usize>> {
    let Some(list) = list else {
        return Ok((0..schema.fields.len()).collect());
    };
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let i = schema.field_index(name).ok_or_else(|| {
            let names: Vec<String> = schema.fields.iter().map(|f| f.name.clone()).collect();
            Error::invalid(
                "--fields",
                format!(
                    "table {} has no field {name:?} (fields: {})",
                    schema.name,
                    list_or_none(&names)
                ),
            )
        })?;
        if !out.contains(&i) {
            out.push(i);
        }
    }
    if out.is_empty() {
        return Err(Error::invalid("--fields", "empty list"));
    }
    Ok(out)
}

fn resolve_agg(
    store: &Store,
    schema: &TableSchema,
    fields: &[usize],
    p: &Params,
) -> Result<(AggFn, i64, GroupBy)> {
    let func = AggFn::parse(p.func.as_deref().unwrap_or("avg"))?;
    let every = parse_every("--every", p.every.as_deref().unwrap_or("1h"))?;
    let group = match p.group_by.as_deref() {
        None | Some("") => GroupBy::None,
        Some("device") => GroupBy::Device,
        Some(tag) => {
            if tag == "ts"
                || tag == "device_id"
                || fields.iter().any(|&i| schema.fields[i].name == tag)
            {
                return Err(Error::invalid(
                    "--group-by",
                    format!("{tag:?} clashes with a column name"),
                ));
            }
            let known = store
                .devices(None)
                .iter()
                .any(|(_, e)| e.tags.iter().any(|(k, _)| k == tag));
            if !known {
                return Err(Error::invalid(
                    "--group-by",
                    format!("{tag:?} is neither \"device\" nor a tag of any registered device"),
                ));
            }
            GroupBy::Tag(tag.to_string())
        }
    };
    Ok((func, every, group))
}
