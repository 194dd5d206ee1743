//! Arrow Flight against a live daemon, with arrow-flight's own clients:
//! one endpoint per region holding data whose union is the export, a
//! filtered flight reading one region, DoPut read back exactly, SQL as a
//! JSON command and as Flight SQL, tokens, and bad tickets and
//! descriptors refused while the daemon keeps serving. pyarrow.flight
//! drives the same service when `TELESTORE_PYTHON` is set
//! (`tools/flight_check.py`).

use crate::common;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type, UInt64Type};
use arrow_array::{ArrayRef, RecordBatch, TimestampMillisecondArray, UInt64Array};
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::sql::client::FlightSqlServiceClient;
use arrow_flight::{FlightClient, FlightDescriptor, FlightInfo, Ticket};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use common::mixed::{self, Model, TABLE};
use futures::TryStreamExt;
use std::sync::Arc;
use telestore_engine::{Options, Store};
use telestore_query::{Params, Plan, Prepared};
use telestore_server::daemon::{start, Running, ServerConfig};
use telestore_server::server::auth::Tokens;
use tonic::transport::Channel;

struct Daemon {
    _dir: tempfile::TempDir,
    store: Arc<Store>,
    run: Option<Running>,
    url: String,
    model: Model,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(r) = self.run.take() {
            r.stop();
        }
    }
}

fn daemon(tokens: Tokens) -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path(), Options::default()).unwrap());
    let model = mixed::fill(&store);
    let cfg = ServerConfig {
        tokens,
        http_listen: Some("127.0.0.1:0".parse().unwrap()),
        flight_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..Default::default()
    };
    let run = start(store.clone(), "127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let url = format!("http://{}", run.flight_addr.unwrap());
    Daemon {
        _dir: dir,
        store,
        run: Some(run),
        url,
        model,
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

async fn client(url: &str, token: Option<&str>) -> FlightClient {
    let ch = Channel::from_shared(url.to_string())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut c = FlightClient::new(ch);
    if let Some(t) = token {
        c.add_header("authorization", &format!("Bearer {t}"))
            .unwrap();
    }
    c
}

/// Every endpoint's batches, endpoint by endpoint.
async fn read_all(c: &mut FlightClient, info: &FlightInfo) -> Vec<Vec<RecordBatch>> {
    let mut out = Vec::new();
    for e in &info.endpoint {
        let t = e.ticket.clone().unwrap();
        let batches: Vec<RecordBatch> = c.do_get(t).await.unwrap().try_collect().await.unwrap();
        out.push(batches);
    }
    out
}

/// The export's rows: (device_id, ts ms, f bits).
fn rows_of(batches: &[RecordBatch]) -> Vec<(u64, i64, u64)> {
    let mut v = Vec::new();
    for b in batches {
        let d = b
            .column_by_name("device_id")
            .unwrap()
            .as_primitive::<UInt64Type>();
        let ts = b
            .column_by_name("ts")
            .unwrap()
            .as_any()
            .downcast_ref::<TimestampMillisecondArray>()
            .unwrap();
        let f = b.column_by_name("f").unwrap().as_primitive::<Float64Type>();
        for i in 0..b.num_rows() {
            v.push((d.value(i), ts.value(i), f.value(i).to_bits()));
        }
    }
    v
}

fn export(store: &Store) -> Vec<RecordBatch> {
    let p = Params {
        table: TABLE.into(),
        ..Default::default()
    };
    let plan = Plan::resolve(store, &p, store.now_ms()).unwrap();
    let mut out = Vec::new();
    Prepared::new(store, plan)
        .run(store, &mut |b| {
            out.push(b);
            Ok(())
        })
        .unwrap();
    out
}

/// A counter of the daemon's `/metrics`.
fn metric(d: &Daemon, name: &str) -> u64 {
    let http = d.run.as_ref().unwrap().http_addr.unwrap();
    let text = ureq::get(&format!("http://{http}/metrics"))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("{name} missing"))
        .trim()
        .parse()
        .unwrap()
}

fn regions_with_data(store: &Store) -> usize {
    store
        .regions(TABLE)
        .unwrap()
        .iter()
        .filter(|r| r.size_bytes > 0 || r.memstore_bytes > 0)
        .count()
}

#[test]
fn endpoints_per_region_cover_the_export() {
    let d = daemon(Tokens::default());
    let rt = rt();
    rt.block_on(async {
        let mut c = client(&d.url, None).await;
        let listed: Vec<FlightInfo> = c.list_flights(vec![]).await.unwrap().try_collect().await.unwrap();
        assert_eq!(listed.len(), 1);
        let info = c
            .get_flight_info(FlightDescriptor::new_path(vec![TABLE.into()]))
            .await
            .unwrap();
        let regions = regions_with_data(&d.store);
        assert!(regions > 1, "the fixture spreads over regions");
        assert_eq!(info.endpoint.len(), regions);
        for e in &info.endpoint {
            assert!(e.location[0].uri.starts_with("grpc+tcp://127.0.0.1:"), "{:?}", e.location);
        }
        let schema = info.clone().try_decode_schema().unwrap();
        let want = export(&d.store);
        assert_eq!(&schema, want[0].schema().as_ref());
        let parts = read_all(&mut c, &info).await;
        let got: Vec<RecordBatch> = parts.into_iter().flatten().collect();
        assert_eq!(rows_of(&got), rows_of(&want), "endpoints in order = the export");
        assert_eq!(rows_of(&got).len(), d.model.rows.len());

        // A device filter plans one endpoint; fields and window apply.
        let cmd = serde_json::json!({"table": TABLE, "devices": "dev-2", "fields": "f,b",
            "from": (mixed::T0 + 10_000).to_string() + "ms", "to": (mixed::T0 + 20_000).to_string() + "ms"});
        let info = c
            .get_flight_info(FlightDescriptor::new_cmd(cmd.to_string()))
            .await
            .unwrap();
        assert_eq!(info.endpoint.len(), 1);
        let got: Vec<RecordBatch> = read_all(&mut c, &info).await.into_iter().flatten().collect();
        let names: Vec<String> = got[0].schema().fields().iter().map(|f| f.name().clone()).collect();
        assert_eq!(names, ["device_id", "device", "ts", "f", "b"]);
        assert_eq!(got.iter().map(|b| b.num_rows()).sum::<usize>(), 10);
    });
    let sent = d.model.rows.len() as u64 + 10;
    assert_eq!(metric(&d, "telestore_flight_rows_sent_total"), sent);
    assert_eq!(metric(&d, "telestore_flight_rejected_total"), 0);
    assert!(metric(&d, "telestore_flight_calls_total") >= 4);
}

/// Tickets name key spans: splitting and merging regions between
/// `GetFlightInfo` and `DoGet` changes no row of the answer.
#[test]
fn tickets_survive_splits_and_merges() {
    let d = daemon(Tokens::default());
    let rt = rt();
    let want = rows_of(&export(&d.store));
    rt.block_on(async {
        let mut c = client(&d.url, None).await;
        let info = c
            .get_flight_info(FlightDescriptor::new_path(vec![TABLE.into()]))
            .await
            .unwrap();
        let before = d.store.regions(TABLE).unwrap().len();
        for r in d.store.regions(TABLE).unwrap() {
            if r.size_bytes > 0 {
                d.store.split_region(TABLE, r.id, None).unwrap();
            }
        }
        let first = d.store.regions(TABLE).unwrap()[0].id;
        d.store.merge_regions(TABLE, first).unwrap();
        assert_ne!(d.store.regions(TABLE).unwrap().len(), before);
        let got: Vec<RecordBatch> = read_all(&mut c, &info)
            .await
            .into_iter()
            .flatten()
            .collect();
        assert_eq!(rows_of(&got), want);
    });
}

#[test]
fn do_put_writes_what_is_read_back() {
    let d = daemon(Tokens::default());
    let rt = rt();
    let n = 5000usize;
    let ids: Vec<u64> = (0..n as u64).map(|i| 1000 + i % 50).collect();
    let ts: Vec<i64> = (0..n as i64).map(|i| 1_800_000_000_000 + i * 7).collect();
    let fs: Vec<f64> = (0..n)
        .map(|i| f64::from_bits(0x7ff8_0000_0000_0001 + i as u64))
        .collect();
    let batch = put_batch(&ids, &ts, &fs);
    rt.block_on(async {
        let mut c = client(&d.url, None).await;
        let desc = FlightDescriptor::new_path(vec![TABLE.into()]);
        let data = FlightDataEncoderBuilder::new()
            .with_flight_descriptor(Some(desc))
            .build(futures::stream::iter([Ok(batch.clone())]));
        let acks: Vec<_> = c.do_put(data).await.unwrap().try_collect().await.unwrap();
        assert_eq!(acks.len(), 1);
        assert_eq!(&acks[0].app_metadata[..], br#"{"rows":5000}"#);
    });
    let mut got = Vec::new();
    for id in ids.iter().take(50) {
        let rows = d
            .store
            .scan(
                TABLE,
                *id,
                i64::MIN,
                i64::MAX,
                telestore_engine::Order::OldestFirst,
            )
            .unwrap();
        assert_eq!(rows.len(), n / 50);
        got.extend(
            rows.iter()
                .map(|r| (r.device, r.ts, r.fields[..8].to_vec())),
        );
    }
    got.sort();
    let mut want: Vec<(u64, i64, Vec<u8>)> = (0..n)
        .map(|i| (ids[i], ts[i], fs[i].to_le_bytes().to_vec()))
        .collect();
    want.sort();
    assert_eq!(got, want, "bit for bit, NaN payloads included");

    // A batch missing a field is refused whole; nothing of it is written.
    rt.block_on(async {
        let mut c = client(&d.url, None).await;
        let schema = Arc::new(Schema::new(vec![
            Field::new("device_id", DataType::UInt64, false),
            Field::new(
                "ts",
                DataType::Timestamp(TimeUnit::Millisecond, None),
                false,
            ),
        ]));
        let cols: Vec<ArrayRef> = vec![
            Arc::new(UInt64Array::from(vec![99_999u64])),
            Arc::new(TimestampMillisecondArray::from(vec![1i64])),
        ];
        let bad = RecordBatch::try_new(schema, cols).unwrap();
        let data = FlightDataEncoderBuilder::new()
            .with_flight_descriptor(Some(FlightDescriptor::new_path(vec![TABLE.into()])))
            .build(futures::stream::iter([Ok(bad)]));
        let err = match c.do_put(data).await {
            Ok(s) => s.try_collect::<Vec<_>>().await.unwrap_err(),
            Err(e) => e,
        };
        assert!(err.to_string().contains("is missing"), "{err}");
    });
    assert!(d.store.latest(TABLE, 99_999, 1).unwrap().is_empty());
    assert_eq!(
        metric(
            &d,
            "telestore_ingest_protocol_rows_total{protocol=\"flight\"}"
        ),
        n as u64
    );
    assert_eq!(
        metric(&d, "telestore_flight_rejected_total"),
        0,
        "the refusal came mid-stream"
    );
}

/// The refusal a DoPut of `batch` ends with (`None`: it was taken).
async fn put_error(c: &mut FlightClient, batch: RecordBatch) -> Option<String> {
    put_error_to(c, TABLE, batch).await
}

/// [`put_error`] into `table`.
async fn put_error_to(c: &mut FlightClient, table: &str, batch: RecordBatch) -> Option<String> {
    let data = FlightDataEncoderBuilder::new()
        .with_flight_descriptor(Some(FlightDescriptor::new_path(vec![table.into()])))
        .build(futures::stream::iter([Ok(batch)]));
    let done = match c.do_put(data).await {
        Ok(s) => s.try_collect::<Vec<_>>().await.map(|_| ()),
        Err(e) => Err(e),
    };
    done.err().map(|e| e.to_string())
}

/// `batch` with a `device` column of `names` in front.
fn with_names(batch: &RecordBatch, names: &[&str]) -> RecordBatch {
    let mut fields = vec![Arc::new(Field::new("device", DataType::Utf8, false))];
    fields.extend(batch.schema().fields().iter().cloned());
    let mut cols: Vec<ArrayRef> = vec![Arc::new(arrow_array::StringArray::from(names.to_vec()))];
    cols.extend(batch.columns().iter().cloned());
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap()
}

#[test]
fn do_put_creates_a_missing_table_from_its_first_batch() {
    let d = daemon(Tokens::default());
    let rt = rt();
    let t = 1_800_000_000_000i64;
    let batch = |cols: Vec<(&str, ArrayRef)>| {
        let fields: Vec<Field> = cols
            .iter()
            .map(|(n, a)| Field::new(*n, a.data_type().clone(), false))
            .collect();
        let arrays = cols.into_iter().map(|(_, a)| a).collect();
        RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).unwrap()
    };
    let good = batch(vec![
        (
            "device",
            Arc::new(arrow_array::StringArray::from(vec!["gen-1", "gen-2"])),
        ),
        (
            "ts",
            Arc::new(TimestampMillisecondArray::from(vec![t, t + 1])),
        ),
        (
            "kw",
            Arc::new(arrow_array::Float64Array::from(vec![1.5, -2.0])),
        ),
        (
            "on",
            Arc::new(arrow_array::BooleanArray::from(vec![true, false])),
        ),
        (
            "hours",
            Arc::new(arrow_array::UInt32Array::from(vec![7u32, 9])),
        ),
    ]);
    let strings = batch(vec![
        (
            "device",
            Arc::new(arrow_array::StringArray::from(vec!["gen-1"])),
        ),
        ("ts", Arc::new(TimestampMillisecondArray::from(vec![t]))),
        (
            "fw",
            Arc::new(arrow_array::StringArray::from(vec!["1.2.3"])),
        ),
    ]);
    let no_ts = batch(vec![
        (
            "device",
            Arc::new(arrow_array::StringArray::from(vec!["gen-1"])),
        ),
        ("kw", Arc::new(arrow_array::Float64Array::from(vec![1.0]))),
    ]);
    let no_fields = batch(vec![
        (
            "device",
            Arc::new(arrow_array::StringArray::from(vec!["gen-1"])),
        ),
        ("ts", Arc::new(TimestampMillisecondArray::from(vec![t]))),
    ]);
    rt.block_on(async {
        let mut c = client(&d.url, None).await;
        // A column no field type holds, a batch its rows cannot be taken
        // from, one without fields: refused, nothing created.
        let e = put_error_to(&mut c, "strings", strings)
            .await
            .expect("taken");
        assert!(e.contains("fw") && e.contains("no field type"), "{e}");
        let e = put_error_to(&mut c, "no_ts", no_ts).await.expect("taken");
        assert!(e.contains("ts"), "{e}");
        let e = put_error_to(&mut c, "no_fields", no_fields)
            .await
            .expect("taken");
        assert!(e.contains("no field columns"), "{e}");
        assert_eq!(put_error_to(&mut c, "generators", good.clone()).await, None);
        // The table exists now: the same batch again is one more version.
        assert_eq!(put_error_to(&mut c, "generators", good).await, None);
    });
    for t in ["strings", "no_ts", "no_fields"] {
        assert!(d.store.schema(t).is_err(), "{t} was created");
    }
    let s = d.store.schema("generators").unwrap();
    let fields: Vec<_> = s.fields.iter().map(|f| (f.name.as_str(), f.ty)).collect();
    use telestore_engine::FieldType as F;
    assert_eq!(fields, [("kw", F::F64), ("on", F::Bool), ("hours", F::U32)]);
    let id = d.store.device_id("gen-2").unwrap();
    let row = &d.store.latest("generators", id, 1).unwrap()[0];
    assert_eq!(row.ts, t + 1);
    let mut want = (-2.0f64).to_le_bytes().to_vec();
    want.push(0);
    want.extend(9u32.to_le_bytes());
    assert_eq!(row.fields, want);
}

#[test]
fn do_put_never_hands_rows_to_a_future_device_nor_takes_time_outside_1970_to_9999() {
    let d = daemon(Tokens::default());
    let rt = rt();
    let base = telestore_engine::engine::REGISTRY_ID_BASE;
    let t = 1_800_000_000_000i64;
    rt.block_on(async {
        let mut c = client(&d.url, None).await;
        // An id from the registry's range that no device has: refused.
        let e = put_error(&mut c, put_batch(&[base + 999_999], &[t], &[1.0])).await;
        let e = e.expect("an unassigned registry id was taken");
        assert!(e.contains("no device has it"), "{e}");
        assert!(
            e.contains("InvalidArgument") || e.contains("invalid"),
            "{e}"
        );
        // Ids and names both (an export read back): the names decide.
        let batch = with_names(
            &put_batch(&[base + 999_999, 123_457], &[t, t], &[1.0, 2.0]),
            &["new-a", "new-a"],
        );
        assert_eq!(put_error(&mut c, batch).await, None);
        // A record batch whose body is shorter than its header says (a
        // forged header): INVALID_ARGUMENT, nothing written, not OK or
        // INTERNAL.
        let encoded: Vec<_> = FlightDataEncoderBuilder::new()
            .with_flight_descriptor(Some(FlightDescriptor::new_path(vec![TABLE.into()])))
            .build(futures::stream::iter([Ok(put_batch(
                &[123_459],
                &[t],
                &[1.0],
            ))]))
            .try_collect()
            .await
            .unwrap();
        let mut forged = encoded.clone();
        let last = forged.last_mut().unwrap();
        last.data_body = last.data_body.slice(..last.data_body.len() / 2);
        let e = match c
            .do_put(futures::stream::iter(forged.into_iter().map(Ok)))
            .await
        {
            Ok(s) => s.try_collect::<Vec<_>>().await.err(),
            Err(e) => Some(e),
        };
        let Some(arrow_flight::error::FlightError::Tonic(s)) = e else {
            panic!("a forged body was taken: {e:?}")
        };
        assert_eq!(s.code(), tonic::Code::InvalidArgument, "{s}");
        assert!(s.message().contains("runs past"), "{s}");
        // Timestamps before 1970 or past 9999: refused whole.
        for ts in [-5i64, 253_402_300_800_000] {
            let e = put_error(
                &mut c,
                put_batch_ms(&[123_458, 123_458], &[t, ts], &[1.0, 2.0]),
            )
            .await;
            let e = e.unwrap_or_else(|| panic!("ts {ts} was taken"));
            assert!(e.contains("outside 0..=253402300799999"), "{ts}: {e}");
        }
    });
    let a = d.store.device_id("new-a").expect("new-a registered");
    assert_ne!(a, base + 999_999);
    assert_eq!(
        d.store.latest(TABLE, a, 10).unwrap().len(),
        1,
        "same ts: one row"
    );
    // The next new name does not inherit rows.
    let b = d
        .store
        .register_devices(&[("new-b".into(), vec![])])
        .unwrap()[0];
    assert!(d.store.latest(TABLE, b, 10).unwrap().is_empty());
    assert!(d
        .store
        .latest(TABLE, base + 999_999, 10)
        .unwrap()
        .is_empty());
    assert!(d.store.latest(TABLE, 123_457, 10).unwrap().is_empty());
    assert!(
        d.store.latest(TABLE, 123_458, 10).unwrap().is_empty(),
        "nothing partial"
    );
    assert!(
        d.store.latest(TABLE, 123_459, 10).unwrap().is_empty(),
        "nothing forged"
    );
}

/// A batch of the fixture's table: `f` from `fs`, the other fields fixed.
fn put_batch(ids: &[u64], ts: &[i64], fs: &[f64]) -> RecordBatch {
    let ns: Vec<i64> = ts.iter().map(|t| t * 1_000_000).collect();
    let ts = Arc::new(arrow_array::TimestampNanosecondArray::from(ns).with_timezone("UTC"));
    fixture_batch(ids, ts, fs)
}

/// As `put_batch`, the times in milliseconds (past what nanoseconds hold).
fn put_batch_ms(ids: &[u64], ts: &[i64], fs: &[f64]) -> RecordBatch {
    let ts = arrow_array::TimestampMillisecondArray::from(ts.to_vec()).with_timezone("UTC");
    fixture_batch(ids, Arc::new(ts), fs)
}

fn fixture_batch(ids: &[u64], ts: ArrayRef, fs: &[f64]) -> RecordBatch {
    use arrow_array::{
        BooleanArray, Float32Array, Float64Array, Int32Array, Int64Array, UInt32Array,
    };
    let n = ids.len();
    let schema = Arc::new(Schema::new(vec![
        Field::new("device_id", DataType::UInt64, false),
        Field::new("ts", ts.data_type().clone(), false),
        Field::new("f", DataType::Float64, false),
        Field::new("g", DataType::Float32, false),
        Field::new("i", DataType::Int64, false),
        Field::new("j", DataType::Int32, false),
        Field::new("u", DataType::UInt64, false),
        Field::new("w", DataType::UInt32, false),
        Field::new("b", DataType::Boolean, false),
    ]));
    let cols: Vec<ArrayRef> = vec![
        Arc::new(UInt64Array::from(ids.to_vec())),
        ts,
        Arc::new(Float64Array::from(fs.to_vec())),
        Arc::new(Float32Array::from(vec![-0.0f32; n])),
        Arc::new(Int64Array::from(vec![i64::MIN; n])),
        Arc::new(Int32Array::from(vec![i32::MAX; n])),
        Arc::new(UInt64Array::from(vec![u64::MAX; n])),
        Arc::new(UInt32Array::from(vec![7u32; n])),
        Arc::new(BooleanArray::from(vec![true; n])),
    ];
    RecordBatch::try_new(schema, cols).unwrap()
}

#[test]
fn sql_through_flight_and_flight_sql() {
    let d = daemon(Tokens::default());
    let rt = rt();
    rt.block_on(async {
        let mut c = client(&d.url, None).await;
        let cmd = serde_json::json!({"sql": format!("SELECT count(*) AS n FROM {TABLE}")});
        let info = c.get_flight_info(FlightDescriptor::new_cmd(cmd.to_string())).await.unwrap();
        let got: Vec<RecordBatch> = read_all(&mut c, &info).await.into_iter().flatten().collect();
        assert_eq!(got[0].column(0).as_primitive::<Int64Type>().value(0), d.model.rows.len() as i64);

        let ch = Channel::from_shared(d.url.clone()).unwrap().connect().await.unwrap();
        let mut sql = FlightSqlServiceClient::new(ch);
        let info = sql
            .execute(format!("SELECT device, count(*) AS n FROM {TABLE} WHERE fleet = 'West' GROUP BY device ORDER BY device"), None)
            .await
            .unwrap();
        let t = info.endpoint[0].ticket.clone().unwrap();
        let got: Vec<RecordBatch> = sql.do_get(t).await.unwrap().try_collect().await.unwrap();
        let n: Vec<i64> = got.iter().flat_map(|b| b.column(1).as_primitive::<Int64Type>().values().to_vec()).collect();
        assert_eq!(n, vec![400, 400, 400]);
    });
}

#[test]
fn bad_requests_get_clear_errors_and_the_daemon_keeps_serving() {
    let tokens = Tokens::default()
        .with("rw-tok", telestore_server::server::auth::Access::Write)
        .unwrap()
        .with("ro-tok", telestore_server::server::auth::Access::Read)
        .unwrap();
    let d = daemon(tokens);
    let rt = rt();
    rt.block_on(async {
        let mut anon = client(&d.url, None).await;
        let e = anon.list_flights(vec![]).await.err().unwrap();
        assert!(e.to_string().contains("token is needed"), "{e}");
        let mut c = client(&d.url, Some("ro-tok")).await;
        for (ticket, says) in [
            (&b"not json"[..], "not a telestore ticket"),
            (br#"{"kind":"scan","v":9,"table":"m","from":0,"to":1,"fields":[],"devices":null,"where":null,"start":"00","end":null}"#, "version 9"),
            (br#"{"kind":"scan","v":1,"table":"m","from":0,"to":1,"fields":[],"devices":null,"where":null,"start":"zz","end":null}"#, "not a key"),
            (br#"{"kind":"scan","v":1,"table":"nope","from":0,"to":1,"fields":[],"devices":null,"where":null,"start":"000000000000000000000000000000000000","end":null}"#, "nope"),
            (br#"{"kind":"sql","v":1,"sql":"SELEC"}"#, "sql"),
        ] {
            let e = match c.do_get(Ticket::new(ticket.to_vec())).await {
                Ok(s) => s.try_collect::<Vec<_>>().await.err().unwrap(),
                Err(e) => e,
            };
            assert!(e.to_string().contains(says), "{}: {e}", String::from_utf8_lossy(ticket));
        }
        for (cmd, says) in [
            (r#"{"table":"m","form":"-1h"}"#, "unknown field"),
            (r#"{"table":"nope"}"#, "nope"),
            (r#"{"table":"m","from":"yesterday"}"#, "invalid from"),
            (r#"{"sql":"SELECT * FROM nope"}"#, "nope"),
        ] {
            let e = c.get_flight_info(FlightDescriptor::new_cmd(cmd.to_string())).await.unwrap_err();
            assert!(e.to_string().contains(says), "{cmd}: {e}");
            // Parameters by their names, not the CLI's flags.
            assert!(!e.to_string().contains("--"), "{cmd}: {e}");
        }
        // An unknown table is NOT_FOUND (formats/flight.md), naming the tables.
        let e = c
            .get_flight_info(FlightDescriptor::new_cmd(r#"{"table":"nope"}"#.to_string()))
            .await
            .unwrap_err();
        let arrow_flight::error::FlightError::Tonic(s) = e else {
            panic!("{e}")
        };
        assert_eq!(s.code(), tonic::Code::NotFound, "{s}");
        assert!(s.message().contains("tables: m"), "{s}");
        // A read-only token may not write.
        let data = FlightDataEncoderBuilder::new()
            .with_flight_descriptor(Some(FlightDescriptor::new_path(vec![TABLE.into()])))
            .build(futures::stream::iter([Ok(put_batch(&[1], &[1], &[1.0]))]));
        let e = match c.do_put(data).await {
            Ok(s) => s.try_collect::<Vec<_>>().await.unwrap_err(),
            Err(e) => e,
        };
        assert!(e.to_string().contains("read-only"), "{e}");
        // Still serving.
        let info = c
            .get_flight_info(FlightDescriptor::new_path(vec![TABLE.into()]))
            .await
            .unwrap();
        let rows: usize = read_all(&mut c, &info).await.iter().flatten().map(|b| b.num_rows()).sum();
        assert_eq!(rows, d.model.rows.len());
    });
    // The unauthenticated call, 5 bad tickets, 4 bad descriptors; the
    // read-only DoPut is refused once its stream is read.
    assert!(metric(&d, "telestore_flight_rejected_total") >= 10);
    assert_eq!(
        metric(&d, "telestore_sql_failed_total"),
        1,
        "the bad SQL ticket"
    );
    // pyarrow.flight: parallel DoGet of every endpoint equals the export,
    // endpoints = regions with data, DoPut read back, auth by handshake.
    let Ok(python) = std::env::var("TELESTORE_PYTHON") else {
        eprintln!(
            "skipped pyarrow.flight: TELESTORE_PYTHON is not set (tools/test-all.sh sets it)"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let exported = dir.path().join("m.arrow");
    {
        let batches = export(&d.store);
        let f = std::fs::File::create(&exported).unwrap();
        let mut w = arrow_ipc::writer::FileWriter::try_new(f, &batches[0].schema()).unwrap();
        for b in &batches {
            w.write(b).unwrap();
        }
        w.finish().unwrap();
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tools/flight_check.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .arg(d.url.replace("http://", "grpc+tcp://"))
        .arg(&exported)
        .arg(TABLE)
        .arg(regions_with_data(&d.store).to_string())
        .env("FLIGHT_TOKEN", "rw-tok")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
