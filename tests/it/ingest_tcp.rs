//! The binary ingest protocol over real TCP: pipelined frames, every
//! bad-input case, a client that disconnects mid-frame, a slow client that
//! never reads its acks, and `SIGKILL` of the daemon under load.

use crate::common;

use common::{small_rows, small_schema};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;
use telestore::daemon::{start, Running, ServerConfig};
use telestore::ingest::client::Client;
use telestore::ingest::proto::{
    ErrorCode, FrameHeader, Handshake, Response, FRAME_PAYLOAD_MAX, PROTOCOL_VERSION,
};
use telestore::server::auth::{Access, Tokens};
use telestore::{Durability, Options, Order, Store, TableOptions};

const T0: i64 = 1_700_000_000_000;

fn server(cfg: ServerConfig) -> (tempfile::TempDir, Arc<Store>, Running) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path(), Options::default()).unwrap());
    store
        .create_table(small_schema("t", TableOptions::default()))
        .unwrap();
    let run = start(store.clone(), "127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    (dir, store, run)
}

fn rows(device: u64, n: i64, v: u64) -> Vec<u8> {
    let r: Vec<_> = (0..n).map(|i| (device, T0 + i, v)).collect();
    small_rows(&r)
}

fn count(store: &Store, device: u64) -> usize {
    store
        .scan("t", device, i64::MIN, i64::MAX, Order::NewestFirst)
        .unwrap()
        .len()
}

fn expect_error(r: Response, code: ErrorCode, fatal: bool) {
    match r {
        Response::Error(e) => assert_eq!((e.code, e.fatal), (code, fatal), "{}", e.message),
        other => panic!("expected {code:?}, got {other:?}"),
    }
}

#[test]
fn pipelined_frames_are_acked_in_order_and_applied() {
    let (_d, store, run) = server(ServerConfig::default());
    let mut c = Client::connect(run.addr, "t", Durability::Sync, "").unwrap();
    assert_eq!(c.row_width, 16 + 13);
    assert_eq!(c.fields.len(), 3);
    for b in 0..200u64 {
        c.send(b, &rows(b, 10, b)).unwrap();
    }
    for b in 0..200u64 {
        match c.recv().unwrap() {
            Response::Ack {
                batch_id,
                rows,
                durability,
                ..
            } => {
                assert_eq!((batch_id, rows, durability), (b, 10, Durability::Sync));
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(count(&store, 199), 10);
    assert_eq!(
        run.stats.frames.load(std::sync::atomic::Ordering::Relaxed),
        200
    );
}

#[test]
fn bad_frames_get_errors_and_nothing_of_them_is_applied() {
    let (_d, store, run) = server(ServerConfig::default());
    let mut c = Client::connect(run.addr, "t", Durability::Sync, "").unwrap();
    // Payload checksum mismatch: rejected, the connection stays.
    let good = rows(1, 5, 1);
    let mut h = FrameHeader::for_payload(1, 5, &good).encode();
    h[20] ^= 0xff;
    let c24 = crc32c::crc32c(&h[..24]);
    h[24..28].copy_from_slice(&c24.to_le_bytes());
    c.send_raw(&h).unwrap();
    c.send_raw(&good).unwrap();
    expect_error(c.recv().unwrap(), ErrorCode::BadChecksum, false);
    // Row count not matching the length.
    let h = FrameHeader::for_payload(2, 4, &good).encode();
    c.send_raw(&h).unwrap();
    c.send_raw(&good).unwrap();
    expect_error(c.recv().unwrap(), ErrorCode::RowCountMismatch, false);
    // A timestamp out of range in the middle of the frame: nothing applied.
    let mut r = rows(2, 3, 1);
    let w = c.row_width;
    r.extend(small_rows(&[(2, -1, 1)]));
    r.extend(rows(2, 3, 1)[..w].to_vec());
    match c.write(3, &r).unwrap() {
        Response::Error(e) => {
            assert_eq!(
                (e.code, e.fatal, e.batch_id),
                (ErrorCode::TimestampOutOfRange, false, 3)
            );
            assert!(e.message.contains("row 3"), "{}", e.message);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        count(&store, 1) + count(&store, 2),
        0,
        "a rejected frame was applied"
    );
    // The connection still works.
    assert!(matches!(
        c.write(4, &good).unwrap(),
        Response::Ack { batch_id: 4, .. }
    ));
    // An oversize frame loses the framing: fatal.
    let mut big = FrameHeader::for_payload(5, 1, &good);
    big.payload_len = FRAME_PAYLOAD_MAX as u32 + 1;
    c.send_raw(&big.encode()).unwrap();
    expect_error(c.recv().unwrap(), ErrorCode::FrameTooLarge, true);
    assert!(
        c.recv().is_err(),
        "connection not closed after a fatal error"
    );
    // A broken header checksum loses the framing too.
    let mut c = Client::connect(run.addr, "t", Durability::Sync, "").unwrap();
    let mut h = FrameHeader::for_payload(6, 5, &good).encode();
    h[5] ^= 1;
    c.send_raw(&h).unwrap();
    expect_error(c.recv().unwrap(), ErrorCode::BadChecksum, true);
    assert_eq!(count(&store, 1), 5);
}

#[test]
fn bad_handshakes_are_refused_with_the_reason() {
    let cfg = ServerConfig {
        tokens: Tokens::single("secret")
            .unwrap()
            .with("reader", Access::Read)
            .unwrap(),
        ..ServerConfig::default()
    };
    let (_d, _store, run) = server(cfg);
    let raw = |bytes: &[u8]| -> Response {
        let mut s = TcpStream::connect(run.addr).unwrap();
        s.write_all(bytes).unwrap();
        let mut all = Vec::new();
        std::io::Read::read_to_end(&mut s, &mut all).unwrap();
        Response::decode(&all).unwrap().0
    };
    let hs = |table: &str, token: &str| Handshake {
        version: PROTOCOL_VERSION,
        durability: Durability::Sync,
        table: table.into(),
        token: token.into(),
    };
    expect_error(raw(b"GET / HTTP/1.1\r\n\r\n"), ErrorCode::BadMagic, true);
    let mut v9 = hs("t", "secret").encode();
    v9[4] = 9;
    expect_error(raw(&v9), ErrorCode::UnsupportedVersion, true);
    // A version-1 client is still served (formats/ingest.md, version 2).
    let v1 = Handshake {
        version: 1,
        ..hs("t", "secret")
    };
    let mut s = TcpStream::connect(run.addr).unwrap();
    s.write_all(&v1.encode()).unwrap();
    let mut got = Vec::new();
    let ready = loop {
        let mut buf = [0u8; 4096];
        let n = std::io::Read::read(&mut s, &mut buf).unwrap();
        assert!(n > 0, "the server closed a version-1 connection");
        got.extend_from_slice(&buf[..n]);
        if let Ok((r, _)) = Response::decode(&got) {
            break r;
        }
    };
    assert!(matches!(ready, Response::Ready { .. }), "{ready:?}");
    expect_error(raw(&hs("t", "wrong").encode()), ErrorCode::AuthFailed, true);
    // A read-only token cannot write, and the binary protocol only writes.
    expect_error(
        raw(&hs("t", "reader").encode()),
        ErrorCode::AuthFailed,
        true,
    );
    match raw(&hs("nope", "secret").encode()) {
        Response::Error(e) => {
            assert_eq!(e.code, ErrorCode::UnknownTable);
            assert!(
                e.message.contains("nope") && e.message.contains("t"),
                "{}",
                e.message
            );
        }
        other => panic!("{other:?}"),
    }
    let e = Client::connect(run.addr, "t", Durability::Sync, "wrong")
        .err()
        .unwrap();
    assert!(e.to_string().contains("auth_failed"), "{e}");
    assert!(Client::connect(run.addr, "t", Durability::Sync, "secret").is_ok());
}

#[test]
fn a_client_dying_mid_frame_or_never_reading_acks_does_not_affect_others() {
    let cfg = ServerConfig {
        max_inflight_bytes: 1 << 20,
        shutdown_grace: Duration::from_millis(500),
        ..ServerConfig::default()
    };
    let (_d, store, run) = server(cfg);
    // Mid-frame disconnect: half a payload, then gone.
    let mut dying = Client::connect(run.addr, "t", Durability::Sync, "").unwrap();
    let r = rows(7, 100, 1);
    dying
        .send_raw(&FrameHeader::for_payload(1, 100, &r).encode())
        .unwrap();
    dying.send_raw(&r[..r.len() / 2]).unwrap();
    dying.flush().unwrap();
    drop(dying);
    // A slow client: sends frames and never reads a single ack.
    let addr = run.addr;
    let slow = std::thread::spawn(move || {
        let mut c = Client::connect(addr, "t", Durability::Skip, "").unwrap();
        let r = rows(8, 1, 1);
        for b in 0..20_000u64 {
            if c.send(b, &r).is_err() {
                break;
            }
        }
        let _ = c.flush();
        // Hold the connection open, reading nothing, past the shutdown.
        std::thread::sleep(Duration::from_secs(2));
    });
    std::thread::sleep(Duration::from_millis(100));
    let mut ok = Client::connect(run.addr, "t", Durability::Sync, "").unwrap();
    for b in 0..20u64 {
        assert!(matches!(
            ok.write(b, &rows(9, 10, b)).unwrap(),
            Response::Ack { .. }
        ));
    }
    assert_eq!(count(&store, 7), 0, "half a frame was applied");
    assert_eq!(count(&store, 9), 10);
    // Shutdown does not hang on the slow client (its connection is closed
    // after the grace period).
    run.stop();
    slow.join().unwrap();
}

/// Every batch the daemon acknowledged survives `kill -9` of the daemon.
#[test]
fn sigkill_of_the_daemon_under_load_loses_no_acked_batch() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Store::open(dir.path(), Options::default()).unwrap();
        s.create_table(small_schema("t", TableOptions::default()))
            .unwrap();
        s.close().unwrap();
    }
    let mut acked = Vec::new();
    for run in 0..3u64 {
        let mut child = common::serve_command(dir.path(), "127.0.0.1:0")
            .spawn()
            .unwrap();
        let (addr, err) = listen_addr(&mut child);
        std::thread::spawn(move || for _ in err.lines() {});
        let addr2 = addr.clone();
        let writer = std::thread::spawn(move || {
            let mut acks = Vec::new();
            let Ok(mut c) = Client::connect(addr2.as_str(), "t", Durability::Sync, "") else {
                return acks;
            };
            for b in 0..u64::MAX {
                let id = run * 1_000_000 + b;
                match c.write(id, &rows(id, 5, id)) {
                    Ok(Response::Ack { batch_id, .. }) => acks.push(batch_id),
                    _ => break,
                }
            }
            acks
        });
        std::thread::sleep(Duration::from_millis(300 + run * 100));
        child.kill().unwrap();
        child.wait().unwrap();
        acked.extend(writer.join().unwrap());
    }
    assert!(
        !acked.is_empty(),
        "nothing was acknowledged: the test proved nothing"
    );
    let store = Store::open(dir.path(), Options::default()).unwrap();
    for id in &acked {
        assert_eq!(count(&store, *id), 5, "acknowledged batch {id} lost");
    }
    eprintln!("{} acknowledged batches survived 3 kills", acked.len());
}

#[test]
fn the_load_generator_fills_a_readings_table_through_the_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path(), Options::default()).unwrap());
    store
        .create_table(telestore::testkit::readings_schema("readings"))
        .unwrap();
    let run = start(
        store.clone(),
        "127.0.0.1:0".parse().unwrap(),
        ServerConfig::default(),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_telestore"))
        .args([
            "load",
            "--trucks",
            "50",
            "--duration",
            "10m",
            "--batch",
            "100",
            "--connections",
            "2",
        ])
        .args(["--out-of-order", "0.1", "--addr", &run.addr.to_string()])
        // No HTTP here: the table exists; the generator just notes it
        // could not check it.
        .args(["--http", "http://127.0.0.1:9"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("sent:    3000 rows"), "{text}");
    assert!(text.contains("ack latency: p50"), "{text}");
    let n = common::row_count(&store, "readings");
    // Late readings may land on an earlier reading's timestamp (an
    // overwrite), so at most 3,000 distinct rows, and most of them.
    assert!((2500..=3000).contains(&n), "{n} rows stored");
    // The default values are at sensor precision (TSBS-like).
    use telestore::testkit::{round_to, READINGS_WALKS};
    store
        .scan_all("readings", i64::MIN, i64::MAX, |r| {
            for (c, w) in r.fields.chunks_exact(8).zip(&READINGS_WALKS) {
                let v = f64::from_le_bytes(c.try_into().unwrap());
                assert_eq!(v, round_to(v, w.decimals), "{v} is not at {w:?}");
                assert!((w.lo..=w.hi).contains(&v), "{v} outside {w:?}");
            }
            true
        })
        .unwrap();
    run.stop();
}

/// `serve --config FILE` takes its settings from TOML; SIGTERM stops it
/// cleanly (exit 0) after answering what it read, and the data is there.
#[test]
fn serve_reads_its_config_file_and_sigterm_stops_it_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Store::open(dir.path(), Options::default()).unwrap();
        s.create_table(small_schema("t", TableOptions::default()))
            .unwrap();
        s.close().unwrap();
    }
    let cfg = dir.path().join("telestore.toml");
    std::fs::write(
        &cfg,
        format!(
            "dir = {:?}\nlisten = \"127.0.0.1:0\"\nhttp_listen = \"127.0.0.1:0\"\nflight_listen = \"127.0.0.1:0\"\ntoken = \"tok\"\nbackground_nice = 5\nwal_syncs_in_flight = 3\ndirect_hfile_writes = false\nflush_threshold_mib = 8\nmemstore_global_mib = 256\n",
            dir.path()
        ),
    )
    .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_telestore"))
        .args(["serve", "--config"])
        .arg(&cfg)
        .env("RUST_LOG", "info")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (addr, err) = listen_addr(&mut child);
    let logs = std::thread::spawn(move || err.lines().map_while(|l| l.ok()).collect::<Vec<_>>());
    assert!(
        Client::connect(addr.as_str(), "t", Durability::Sync, "").is_err(),
        "token from the file ignored"
    );
    let mut c = Client::connect(addr.as_str(), "t", Durability::Sync, "tok").unwrap();
    for b in 0..10u64 {
        c.send(b, &rows(b, 3, b)).unwrap();
    }
    for _ in 0..10 {
        assert!(matches!(c.recv().unwrap(), Response::Ack { .. }));
    }
    let st = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let status = child.wait().unwrap();
    assert!(status.success(), "daemon exit status {status}");
    let logs = logs.join().unwrap();
    assert!(
        logs.iter().any(|l| l.contains("stopped cleanly")),
        "{logs:?}"
    );
    let store = Store::open(dir.path(), Options::default()).unwrap();
    for b in 0..10u64 {
        assert_eq!(count(&store, b), 3);
    }
    // The clean stop flushed: everything is in HFiles, nothing replayed.
    let st = store.stats();
    assert!(st.hfiles > 0, "{st:?}");
    assert_eq!(st.memstore_bytes, 0, "the WAL was replayed: {st:?}");
}

/// The binary-protocol address a spawned daemon logs, and its stderr.
fn listen_addr(child: &mut std::process::Child) -> (String, BufReader<std::process::ChildStderr>) {
    let mut err = BufReader::new(child.stderr.take().unwrap());
    loop {
        let mut line = String::new();
        assert!(err.read_line(&mut line).unwrap() > 0, "daemon exited");
        if let Some(rest) = line.split("listening on ").nth(1) {
            return (rest.split_whitespace().next().unwrap().to_string(), err);
        }
    }
}

/// A setting that is wrong, wherever it comes from (flag, environment,
/// `--set`, the file), stops `serve` before it opens anything: exit code
/// 2 and a message naming the setting and its source.
#[test]
fn serve_refuses_a_bad_setting_naming_it_and_where_it_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let bad_file = dir.path().join("bad.toml");
    std::fs::write(&bad_file, "flush_threshold_mib = 8\nqueries_max = 0\n").unwrap();
    type Case<'a> = (&'a [&'a str], Option<(&'a str, &'a str)>, &'a [&'a str]);
    let cases: [Case; 5] = [
        (
            &["--background-nice", "25"],
            None,
            &["background_nice", "0..=19"],
        ),
        (
            &["--flush-threshold-mib", "lots"],
            None,
            &["--flush-threshold-mib", "lots"],
        ),
        (
            &["--set", "flush_treshold_mib=1"],
            None,
            &["flush_treshold_mib", "no such setting"],
        ),
        (
            &[],
            Some(("TELESTORE_MEMSTORE_GLOBAL_MIB", "1x")),
            &["$TELESTORE_MEMSTORE_GLOBAL_MIB"],
        ),
        (
            &["--config", bad_file.to_str().unwrap()],
            None,
            &["queries_max", "1..=1024"],
        ),
    ];
    for (args, env, says) in cases {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_telestore"));
        cmd.arg("serve")
            .args(args)
            .arg("--dir")
            .arg(dir.path().join("data"));
        if let Some((k, v)) = env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        for s in says {
            assert!(err.contains(s), "{args:?}: {s:?} not in {err}");
        }
        assert!(
            !dir.path().join("data").exists(),
            "{args:?} opened the store"
        );
    }
}
