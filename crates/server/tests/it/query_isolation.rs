//! One query must never stop the other clients: SQL runs on the query
//! pool, not on the threads of ingest, the network and `/health`; a query
//! stops when its client goes away (HTTP connection closed, Flight stream
//! dropped) or when it runs past its deadline; queries wait for a slot
//! and are refused as busy past the queue wait; strings a function would
//! make past the value limit (`repeat('x', 1500000000)`) are refused; the
//! queries' memory comes from one pool and spills under the data
//! directory.

use crate::common;

use common::{http_daemon, http_request};
use futures::StreamExt;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};
use telestore_engine::{Error, Options, TableOptions};
use telestore_query::sql::{QueryLimits, QueryPool};
use telestore_server::daemon::{Running, ServerConfig};

/// A query that would run for hours: only a cancel or a deadline ends it.
const ENDLESS: &str = "SELECT count(*) FROM generate_series(1, 100000000000)";

/// Wait (at most a minute: a hang is the failure, not slowness) for `ok`.
fn eventually(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < Duration::from_secs(60), "never: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A SQL request sent on a connection left open, the answer not read.
fn start_sql(http: SocketAddr, sql: &str) -> TcpStream {
    let mut s = TcpStream::connect(http).unwrap();
    let head = format!(
        "POST /api/v1/sql?format=json HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n\
         Content-Length: {}\r\n\r\n{sql}",
        sql.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s
}

fn pool_of(run: &Running) -> Arc<QueryPool> {
    run.stats.queries.get().unwrap().clone()
}

fn sql_answer(http: SocketAddr, sql: &str) -> common::HttpAnswer {
    http_request(
        http,
        "POST",
        "/api/v1/sql?format=json",
        "Content-Type: text/plain\r\n",
        sql.as_bytes(),
    )
}

#[test]
fn endless_queries_leave_writes_and_health_alone_and_stop_when_their_clients_leave() {
    let (_dir, store, run, http) = http_daemon(Options::default(), ServerConfig::default());
    store
        .create_table(common::small_schema("t", TableOptions::default()))
        .unwrap();
    let pool = pool_of(&run);
    // As many endless queries as the query runtime has threads.
    let threads = pool.limits().threads;
    let clients: Vec<TcpStream> = (0..threads).map(|_| start_sql(http, ENDLESS)).collect();
    eventually("every query running", || pool.running() == threads);
    // Every other client is served meanwhile: health, writes, metrics.
    for i in 0..20u64 {
        let h = http_request(http, "GET", "/health", "", b"");
        assert_eq!(h.status, 200, "{}", h.body);
        let line = format!(
            "t,device=d{i} v={i}u,x=1,ok=true {}\n",
            1_700_000_000_000u64 + i
        );
        let w = http_request(
            http,
            "POST",
            "/api/v2/write?precision=ms",
            "",
            line.as_bytes(),
        );
        assert_eq!(w.status, 204, "{}", w.body);
    }
    assert_eq!(common::row_count(&store, "t"), 20);
    assert_eq!(pool.running(), threads, "the queries are still running");
    // The clients leave: their queries stop and free their slots.
    drop(clients);
    eventually("the queries cancelled", || {
        pool.running() == 0 && pool.stats.cancelled.load(Relaxed) == threads as u64
    });
    let m = http_request(http, "GET", "/metrics", "", b"");
    assert!(
        m.body.contains(&format!(
            "telestore_queries_total{{outcome=\"cancelled\"}} {threads}"
        )),
        "{}",
        m.body
    );
}

#[test]
fn a_query_past_its_deadline_is_stopped_with_a_timeout() {
    let cfg = ServerConfig {
        queries: QueryLimits {
            timeout: Some(Duration::from_millis(500)),
            ..QueryLimits::default()
        },
        ..ServerConfig::default()
    };
    let (_dir, _store, run, http) = http_daemon(Options::default(), cfg);
    let a = sql_answer(http, ENDLESS);
    assert_eq!(a.status, 504, "{}", a.body);
    assert!(a.body.contains("timeout"), "{}", a.body);
    assert!(a.body.contains("--query-timeout-s"), "{}", a.body);
    let pool = pool_of(&run);
    assert_eq!(pool.stats.timed_out.load(Relaxed), 1);
    eventually("the slot freed", || pool.running() == 0);
    // A query within its deadline is answered.
    let ok = sql_answer(http, "SELECT 1 + 1 AS two");
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert!(ok.body.contains("\"two\":2"), "{}", ok.body);
}

#[test]
fn queries_past_the_concurrency_cap_wait_then_are_refused_busy() {
    let cfg = ServerConfig {
        queries: QueryLimits {
            concurrent_max: 1,
            queue_wait: Duration::from_millis(200),
            ..QueryLimits::default()
        },
        ..ServerConfig::default()
    };
    let (_dir, _store, run, http) = http_daemon(Options::default(), cfg);
    let pool = pool_of(&run);
    let endless = start_sql(http, ENDLESS);
    eventually("the endless query running", || pool.running() == 1);
    let busy = sql_answer(http, "SELECT 1");
    assert_eq!(busy.status, 503, "{}", busy.body);
    assert!(busy.body.contains("busy"), "{}", busy.body);
    let q = http_request(http, "GET", "/api/v1/query?table=nope&kind=scan", "", b"");
    assert_eq!(q.status, 503, "exports take a slot too: {}", q.body);
    assert_eq!(pool.stats.refused_busy.load(Relaxed), 2);
    drop(endless);
    eventually("the slot freed", || pool.running() == 0);
    assert_eq!(sql_answer(http, "SELECT 1").status, 200);
}

#[test]
fn strings_past_the_value_limit_are_refused_before_they_are_made() {
    let (_dir, _store, _run, http) = http_daemon(Options::default(), ServerConfig::default());
    for sql in [
        "SELECT length(repeat('x', 1500000000))",
        "SELECT length(repeat('x', 100000 + v % 2)) FROM generate_series(1, 10000) t(v)",
        "SELECT length(lpad('x', 1500000000))",
        "SELECT length(rpad('x', 1500000000, 'y'))",
    ] {
        let a = sql_answer(http, sql);
        assert_eq!(a.status, 422, "{sql}: {}", a.body);
        assert!(a.body.contains("value size"), "{sql}: {}", a.body);
    }
    // Within the limit they are what they always were.
    let a = sql_answer(
        http,
        "SELECT repeat('ab', 3) AS r, lpad('7', 3, '0') AS l, rpad('7', 3) AS p",
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(
        a.body.contains(r#""r":"ababab","l":"007","p":"7  ""#),
        "{}",
        a.body
    );
}

/// A grouping of a million keys, whose hash table does not fit in 8 MiB.
const MANY_GROUPS: &str = "SELECT count(*) AS groups FROM \
     (SELECT v % 1000000 AS k, count(*) AS n FROM generate_series(1, 3000000) t(v) GROUP BY k)";

fn run_sql(
    pool: &Arc<QueryPool>,
    sql: &str,
) -> telestore_engine::Result<Vec<arrow_array::RecordBatch>> {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(common::open(dir.path(), Options::default()));
    pool.handle().block_on(async {
        let (_, mut s) = telestore_query::sql::execute(&store, pool, sql).await?;
        let mut out = Vec::new();
        while let Some(b) = s.next().await {
            out.push(b?);
        }
        Ok(out)
    })
}

#[test]
fn the_shared_memory_pool_bounds_a_query_which_spills_under_the_data_directory() {
    let small = QueryLimits {
        memory_bytes: 8 << 20,
        ..QueryLimits::default()
    };
    let no_spill = QueryPool::new(None, small.clone()).unwrap();
    let e = run_sql(&no_spill, MANY_GROUPS).unwrap_err();
    assert!(
        matches!(&e, Error::QueryLimit { what: "memory", .. }),
        "{e}"
    );
    assert!(e.to_string().contains("--query-memory-mib"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let spill = telestore_query::sql::pool::spill_dir_of(dir.path());
    let spilling = QueryPool::new(Some(spill.clone()), small).unwrap();
    let got = run_sql(&spilling, MANY_GROUPS).unwrap();
    let groups = got[0]
        .column(0)
        .as_any()
        .downcast_ref::<arrow_array::Int64Array>()
        .unwrap()
        .value(0);
    assert_eq!(groups, 1_000_000);
    assert_eq!(spilling.memory_used_bytes(), 0, "memory returned");
    assert!(spill.starts_with(dir.path()));
}

#[test]
fn a_flight_sql_stream_dropped_by_its_client_stops_its_query() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(common::open(dir.path(), Options::default()));
    let cfg = ServerConfig {
        flight_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..ServerConfig::default()
    };
    let run = telestore_server::daemon::start(store, "127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let pool = pool_of(&run);
    let url = format!("http://{}", run.flight_addr.unwrap());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let ch = tonic::transport::Channel::from_shared(url)
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut c = arrow_flight::FlightClient::new(ch);
        let cmd = serde_json::json!({ "sql": ENDLESS }).to_string();
        let info = c
            .get_flight_info(arrow_flight::FlightDescriptor::new_cmd(cmd))
            .await
            .unwrap();
        let ticket = info.endpoint[0].ticket.clone().unwrap();
        let stream = c.do_get(ticket).await.unwrap();
        let p = pool.clone();
        tokio::task::spawn_blocking(move || eventually("the query running", || p.running() == 1))
            .await
            .unwrap();
        drop(stream);
        // The runtime goes on, so the client's cancel reaches the server.
        let p = pool.clone();
        tokio::task::spawn_blocking(move || {
            eventually("the query cancelled", || {
                p.running() == 0 && p.stats.cancelled.load(Relaxed) == 1
            })
        })
        .await
        .unwrap();
        drop(c);
    });
}
