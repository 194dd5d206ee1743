//! `telestore serve`: the ingest daemon — binary TCP protocol and HTTP
//! (line protocol, metrics, health, tables).

use anyhow::{Context, Result};
use clap::Args;
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use telestore::daemon::{start, ServerConfig};
use telestore::server::auth::{Access, Tokens};
use telestore::sql::QueryLimits;
use telestore::{Options, Store};

/// Every option can come from a flag, from `--config FILE` (TOML, same
/// names with underscores), or the default — in that order of precedence.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// TOML file with any of: dir, listen, http_listen, flight_listen,
    /// a [mqtt] table,
    /// token, token_file,
    /// metrics_public, max_inflight_mib, device_tag, background_nice,
    /// wal_syncs_in_flight, direct_hfile_writes, flush_threshold_mib,
    /// memstore_global_mib, shutdown_flush, cache_flushed_blocks,
    /// readahead_new_files_mib, wal_dir, compaction_threads,
    /// subcompactions, background_io_priority, background_write_mib_s,
    /// background_write_auto, compaction_debt_slowdown_mib,
    /// compaction_debt_stop_mib, slowdown_file_count,
    /// columnar_min_compaction_mib, latest_cache_devices,
    /// query_timeout_s, queries_max, query_queue_s, query_memory_mib,
    /// query_spill_mib, connections_max, header_timeout_s, a [tls] table
    /// (cert, key, client_ca).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Data directory [default: telestore-data].
    #[arg(long, env = "TELESTORE_DIR")]
    dir: Option<PathBuf>,
    /// Address of the binary ingest protocol (formats/ingest.md)
    /// [default: 127.0.0.1:7070]. Loopback by default: expose it
    /// deliberately (e.g. 0.0.0.0:7070) and set --token when you do.
    #[arg(long, env = "TELESTORE_LISTEN")]
    listen: Option<SocketAddr>,
    /// Address of the HTTP endpoints: InfluxDB line protocol
    /// (/api/v2/write, /write), queries and exports (/api/v1/query,
    /// /api/v1/export), /api/v1/tables, /api/v1/flush, /metrics, /health
    /// [default: 127.0.0.1:7071].
    #[arg(long, env = "TELESTORE_HTTP_LISTEN")]
    http_listen: Option<SocketAddr>,
    /// Address of the Arrow Flight service (tables as flights with one
    /// endpoint per region, DoPut bulk loads, SQL; formats/flight.md), or
    /// `off` [default: 127.0.0.1:7072].
    #[arg(long, env = "TELESTORE_FLIGHT_LISTEN", value_name = "ADDR|off")]
    flight_listen: Option<String>,
    /// Subscribe to this MQTT broker (mqtt://host:port, or mqtts:// for
    /// TLS) and write what
    /// devices publish there, at least once: QoS 1, a persistent session,
    /// each message acknowledged only once its rows are fsynced. Default
    /// subscriptions: telestore/+/+ with JSON objects (topic
    /// telestore/TABLE/DEVICE) and telestore/+ with line protocol. The
    /// config file's [mqtt] table sets url, client_id, username, password,
    /// ca_file, dead_letter and [[mqtt.subscriptions]] (topic, format =
    /// line|json|row, qos, map = "PREFIX/{table}/{device}", table): see
    /// docs/ingest.md, "MQTT ingest" [default: none].
    #[arg(long, env = "TELESTORE_MQTT", value_name = "URL")]
    mqtt: Option<String>,
    /// A read-write token every client must present: binary-protocol
    /// handshakes, Flight calls (`authorization: Bearer T`), and every
    /// HTTP route but /health (and /metrics, see --metrics-public), sent
    /// as `Authorization: Token T`, `Bearer T`,
    /// basic auth with T as the password, or v1's `?u=…&p=T`. Prefer
    /// --token-file: a flag shows in `ps` [default: none required].
    #[arg(long, env = "TELESTORE_TOKEN")]
    token: Option<String>,
    /// File of tokens, one per line: `rw TOKEN` (writes and reads) or
    /// `ro TOKEN` (queries, exports, listings only); `#` starts a comment.
    /// Adds to --token.
    #[arg(long, env = "TELESTORE_TOKEN_FILE")]
    token_file: Option<PathBuf>,
    /// Serve /metrics without a token even when tokens are configured
    /// [default: true].
    #[arg(long, value_name = "BOOL")]
    metrics_public: Option<bool>,
    /// Payload MiB one binary connection may have read but not yet
    /// acknowledged; past it the server stops reading from that client
    /// [default: 32].
    #[arg(long)]
    max_inflight_mib: Option<usize>,
    /// The line-protocol tag whose value names the device; other tags go
    /// to the device registry [default: device].
    #[arg(long)]
    device_tag: Option<String>,
    /// Nice value (0..=19) of the memstore-apply, flush and compaction
    /// threads, so they yield the CPU to the threads an ack waits for
    /// [default: 19]. Set 0 when the daemon shares its cores with
    /// CPU-heavy work: busy normal-priority neighbours can starve flushes
    /// and compactions until writes are refused as busy.
    #[arg(long, value_parser = clap::value_parser!(i32).range(0..=19))]
    background_nice: Option<i32>,
    /// WAL fdatasyncs in flight at once (1..=8): a group commit need not
    /// wait for the sync of the group before it [default: 2]. 1 syncs
    /// one group at a time.
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=8))]
    wal_syncs_in_flight: Option<u8>,
    /// Write HFiles (flushes, compactions) with O_DIRECT, past the page
    /// cache, so they reach the disk a chunk at a time instead of in
    /// writeback bursts that WAL fdatasyncs queue behind [default: true].
    /// With false, freshly written files stay in the page cache for reads.
    #[arg(long, value_name = "BOOL")]
    direct_hfile_writes: Option<bool>,
    /// Put the blocks a flush writes into the block cache as they are
    /// written, so the newest data is warm from the start; compaction
    /// output is never cached this way [default: true].
    #[arg(long, value_name = "BOOL")]
    cache_flushed_blocks: Option<bool>,
    /// A new HFile not cached as it was written (compaction output) and at
    /// most this big is read into the page cache by the kernel in the
    /// background once published, so its first reads do not wait for the
    /// disk; 0 turns it off [default: 256].
    #[arg(long, value_name = "MIB")]
    readahead_new_files_mib: Option<u64>,
    /// Devices per table whose newest row stays in memory once `latest`
    /// has read it, so that reading it again touches no file however cold
    /// the files are after a flush or compaction (about 100 bytes plus the
    /// row per device); 0 turns it off [default: 1048576].
    #[arg(long, value_name = "N")]
    latest_cache_devices: Option<usize>,
    /// Keep the WAL in this directory (e.g. on another disk, so its fsyncs
    /// do not queue behind flush and compaction writes). Chosen when the
    /// store is created and recorded in its manifest; a store is refused
    /// with any other [default: wal/ under --dir].
    #[arg(long, value_name = "DIR")]
    wal_dir: Option<PathBuf>,
    /// Background compaction workers, 0..=16 [default: one per two cores,
    /// at least 2, at most 4; they run at --background-nice].
    #[arg(long, value_name = "N")]
    compaction_threads: Option<usize>,
    /// A region's memstore is flushed to an HFile at this size
    /// [default: 64].
    #[arg(long, value_name = "MIB")]
    flush_threshold_mib: Option<usize>,
    /// Memory for all memstores together: from three quarters of it the
    /// largest is flushed; above all of it writers wait [default: 512].
    #[arg(long, value_name = "MIB")]
    memstore_global_mib: Option<usize>,
    /// Flush every memstore on a clean stop (SIGINT/SIGTERM), so the next
    /// start replays no WAL. It takes about as long as writing the
    /// memstores out (at most --memstore-global-mib; seconds at typical
    /// sizes); a second Ctrl-C skips it (nothing is lost: the WAL holds
    /// every acknowledged write) [default: true].
    #[arg(long, value_name = "BOOL")]
    shutdown_flush: Option<bool>,
    /// A query (HTTP query or export, SQL over HTTP or Flight) running
    /// longer than this is stopped with a timeout error (HTTP 504, Flight
    /// DEADLINE_EXCEEDED); 0: no limit [default: 300].
    #[arg(long, value_name = "SECONDS")]
    query_timeout_s: Option<u64>,
    /// Queries running at once; more wait up to --query-queue-s for a
    /// slot, then are refused as busy (HTTP 503, Flight UNAVAILABLE)
    /// [default: 8].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1024))]
    queries_max: Option<u64>,
    /// How long a query waits for a slot [default: 10].
    #[arg(long, value_name = "SECONDS")]
    query_queue_s: Option<u64>,
    /// Memory all running queries' operators (joins, sorts, groupings)
    /// share; past it they spill to <dir>/tmp/sql or fail with a memory
    /// error (HTTP 422) [default: 1024].
    #[arg(long, value_name = "MIB")]
    query_memory_mib: Option<usize>,
    /// Disk all queries' spill files may take in <dir>/tmp/sql (emptied
    /// at every start) [default: 8192].
    #[arg(long, value_name = "MIB")]
    query_spill_mib: Option<u64>,
    /// Connections open at once over every listener (HTTP, binary,
    /// Flight); past it new clients wait in the kernel's backlog. At
    /// start the open-file limit is raised to its hard limit and 512
    /// descriptors are kept for the store, so the cap may come out lower
    /// (logged) [default: 4096].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    connections_max: Option<u64>,
    /// How long an HTTP or Flight client may take to send its first bytes
    /// and each request's headers; an idle kept-alive HTTP connection is
    /// closed after it too [default: 30].
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=3600))]
    header_timeout_s: Option<u64>,
    /// TLS on every port (HTTP, binary protocol, Flight): the server's
    /// certificate chain (PEM). Needs --tls-key. Both are read again on
    /// SIGHUP (new connections get the new certificate).
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// With TLS: clients must present a certificate signed by one of
    /// these CAs (PEM); what they may do is still their token's.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,
    #[command(flatten)]
    background: super::background::BackgroundArgs,
}

#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
struct ServeFile {
    dir: Option<PathBuf>,
    listen: Option<SocketAddr>,
    http_listen: Option<SocketAddr>,
    flight_listen: Option<String>,
    mqtt: Option<telestore::mqtt::MqttConfig>,
    token: Option<String>,
    token_file: Option<PathBuf>,
    metrics_public: Option<bool>,
    max_inflight_mib: Option<usize>,
    device_tag: Option<String>,
    background_nice: Option<i32>,
    wal_syncs_in_flight: Option<usize>,
    direct_hfile_writes: Option<bool>,
    flush_threshold_mib: Option<usize>,
    memstore_global_mib: Option<usize>,
    shutdown_flush: Option<bool>,
    cache_flushed_blocks: Option<bool>,
    readahead_new_files_mib: Option<u64>,
    latest_cache_devices: Option<usize>,
    wal_dir: Option<PathBuf>,
    compaction_threads: Option<usize>,
    subcompactions: Option<usize>,
    background_io_priority: Option<String>,
    background_write_mib_s: Option<u64>,
    background_write_auto: Option<bool>,
    compaction_debt_slowdown_mib: Option<u64>,
    compaction_debt_stop_mib: Option<u64>,
    slowdown_file_count: Option<usize>,
    columnar_min_compaction_mib: Option<u64>,
    query_timeout_s: Option<u64>,
    queries_max: Option<u64>,
    query_queue_s: Option<u64>,
    query_memory_mib: Option<usize>,
    query_spill_mib: Option<u64>,
    connections_max: Option<u64>,
    header_timeout_s: Option<u64>,
    tls: Option<TlsFile>,
}

/// The configuration file's `[tls]` table.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    cert: PathBuf,
    key: PathBuf,
    client_ca: Option<PathBuf>,
}

/// TLS from the flags, else the file's `[tls]`; `None`: plain TCP.
fn tls_of(a: &ServeArgs, f: &ServeFile) -> Result<Option<Arc<telestore::frontend::tls::Tls>>> {
    use telestore::frontend::tls::{Tls, TlsFiles};
    let files = match (&a.tls_cert, &a.tls_key, &f.tls) {
        (Some(cert), Some(key), _) => TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: a.tls_client_ca.clone(),
        },
        (None, None, Some(t)) => TlsFiles {
            cert: t.cert.clone(),
            key: t.key.clone(),
            client_ca: a.tls_client_ca.clone().or(t.client_ca.clone()),
        },
        (None, None, None) => return Ok(None),
        _ => anyhow::bail!("--tls-cert and --tls-key go together"),
    };
    Ok(Some(Tls::load(files).context("TLS")?))
}

fn load_file(path: &Option<PathBuf>) -> Result<ServeFile> {
    let Some(p) = path else {
        return Ok(ServeFile::default());
    };
    let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
    toml::from_str(&text).with_context(|| format!("{}", p.display()))
}

#[expect(
    clippy::too_many_lines,
    reason = "merges flags and the configuration file field by field; goes away with the one configuration struct"
)]
pub fn run(a: ServeArgs) -> Result<()> {
    // Listen before anything is served, so an early SIGTERM stops cleanly.
    let mut signals = Signals::new()?;
    let f = load_file(&a.config)?;
    let queries = query_limits(&a, &f);
    let tls = tls_of(&a, &f)?;
    let dir = a
        .dir
        .or(f.dir)
        .unwrap_or_else(|| PathBuf::from(super::DEFAULT_DIR));
    let listen = a
        .listen
        .or(f.listen)
        .unwrap_or(([127, 0, 0, 1], 7070).into());
    let http = a
        .http_listen
        .or(f.http_listen)
        .unwrap_or(([127, 0, 0, 1], 7071).into());
    let flight = flight_addr(a.flight_listen.or(f.flight_listen))?;
    let tokens = tokens_of(a.token.or(f.token), a.token_file.or(f.token_file))?;
    for addr in [listen, http].into_iter().chain(flight) {
        if tokens.is_open() && !addr.ip().is_loopback() {
            tracing::warn!(
                "{addr} is not a loopback address and no token is set: anyone who reaches it \
                 can write, query and create tables (set --token-file)"
            );
        }
    }
    let cfg = ServerConfig {
        tls: tls.clone(),
        tokens,
        metrics_public: a.metrics_public.or(f.metrics_public).unwrap_or(true),
        max_inflight_bytes: a.max_inflight_mib.or(f.max_inflight_mib).unwrap_or(32) << 20,
        http_listen: Some(http),
        flight_listen: flight,
        mqtt: match (a.mqtt, f.mqtt) {
            (Some(url), Some(file)) => Some(telestore::mqtt::MqttConfig { url, ..file }),
            (Some(url), None) => Some(telestore::mqtt::MqttConfig::new(&url)),
            (None, file) => file,
        },
        device_tag: a
            .device_tag
            .or(f.device_tag)
            .unwrap_or_else(|| "device".into()),
        queries,
        connections_max: a
            .connections_max
            .or(f.connections_max)
            .map_or(4096, |n| n as usize),
        header_timeout: Duration::from_secs(
            a.header_timeout_s.or(f.header_timeout_s).unwrap_or(30),
        ),
        ..ServerConfig::default()
    };
    let mut opts = Options::default();
    if let Some(n) = a.background_nice.or(f.background_nice) {
        opts.background_nice = n;
    }
    if let Some(n) = a
        .wal_syncs_in_flight
        .map(usize::from)
        .or(f.wal_syncs_in_flight)
    {
        opts.wal_syncs_in_flight = n;
    }
    if let Some(d) = a.direct_hfile_writes.or(f.direct_hfile_writes) {
        opts.direct_hfile_writes = d;
    }
    if let Some(c) = a.cache_flushed_blocks.or(f.cache_flushed_blocks) {
        opts.cache_flushed_blocks = c;
    }
    if let Some(m) = a.readahead_new_files_mib.or(f.readahead_new_files_mib) {
        opts.readahead_new_files_bytes = m.saturating_mul(1 << 20);
    }
    if let Some(n) = a.latest_cache_devices.or(f.latest_cache_devices) {
        opts.latest_cache_devices = n;
    }
    if let Some(n) = a.compaction_threads.or(f.compaction_threads) {
        opts.compaction_threads = n;
    }
    let from_file = super::background::BackgroundArgs {
        subcompactions: f.subcompactions,
        background_io_priority: f.background_io_priority.clone(),
        background_write_mib_s: f.background_write_mib_s,
        background_write_auto: f.background_write_auto,
        compaction_debt_slowdown_mib: f.compaction_debt_slowdown_mib,
        compaction_debt_stop_mib: f.compaction_debt_stop_mib,
        slowdown_file_count: f.slowdown_file_count,
        columnar_min_compaction_mib: f.columnar_min_compaction_mib,
    };
    a.background.clone().or(from_file).apply(&mut opts)?;
    if let Some(w) = a.wal_dir.clone().or(f.wal_dir.clone()) {
        opts.wal_dir =
            Some(std::path::absolute(&w).with_context(|| format!("--wal-dir {}", w.display()))?);
    }
    if let Some(m) = a.flush_threshold_mib.or(f.flush_threshold_mib) {
        opts.flush_threshold_bytes = m.saturating_mul(1 << 20);
    }
    if let Some(m) = a.memstore_global_mib.or(f.memstore_global_mib) {
        opts.memstore_global_bytes = m.saturating_mul(1 << 20);
    }
    opts.validate().context("memstore and flush settings")?;
    let shutdown_flush = a.shutdown_flush.or(f.shutdown_flush).unwrap_or(true);
    let store = Arc::new(open_store(&dir, opts)?);
    let server = start(store.clone(), listen, cfg)
        .with_context(|| format!("listening on {listen} / {http}"))?;
    tracing::info!(
        "ingest (binary protocol) listening on {} (data {}, tables: {})",
        server.addr,
        dir.display(),
        store.table_names().join(", ")
    );
    if let Some(h) = server.http_addr {
        tracing::info!("http (line protocol /api/v2/write, /metrics, /health, /api/v1/tables) listening on {h}");
        tracing::info!("console: http://{h}/ (telestore top --server http://{h})");
    }
    if let Some(f) = server.flight_addr {
        let scheme = if tls.is_some() {
            "grpc+tls"
        } else {
            "grpc+tcp"
        };
        tracing::info!("arrow flight listening on {scheme}://{f}");
    }
    if tls.is_some() {
        tracing::info!("TLS on every port (SIGHUP reads the certificate and key again)");
    }
    signals.wait(tls.as_deref());
    tracing::info!("shutting down: finishing in-flight batches");
    server.stop();
    store.sync()?;
    if shutdown_flush {
        flush_before_exit(&store, &mut signals)?;
    }
    Arc::try_unwrap(store)
        .map_err(|_| anyhow::anyhow!("store still in use at shutdown"))?
        .close()?;
    tracing::info!("stopped cleanly");
    Ok(())
}

/// The limits queries run under: flags, then the file, then defaults.
fn query_limits(a: &ServeArgs, f: &ServeFile) -> QueryLimits {
    let d = QueryLimits::default();
    let secs = Duration::from_secs;
    QueryLimits {
        timeout: match a.query_timeout_s.or(f.query_timeout_s) {
            Some(0) => None,
            Some(s) => Some(secs(s)),
            None => d.timeout,
        },
        concurrent_max: a
            .queries_max
            .or(f.queries_max)
            .map_or(d.concurrent_max, |n| n.clamp(1, 1024) as usize),
        queue_wait: a
            .query_queue_s
            .or(f.query_queue_s)
            .map_or(d.queue_wait, secs),
        memory_bytes: a
            .query_memory_mib
            .or(f.query_memory_mib)
            .map_or(d.memory_bytes, |m| m.saturating_mul(1 << 20)),
        spill_bytes: a
            .query_spill_mib
            .or(f.query_spill_mib)
            .map_or(d.spill_bytes, |m| m.saturating_mul(1 << 20)),
        ..d
    }
}

/// The Flight address: given, `off`, or the default 127.0.0.1:7072.
fn flight_addr(given: Option<String>) -> Result<Option<SocketAddr>> {
    match given.as_deref().map(str::trim) {
        None => Ok(Some(([127, 0, 0, 1], 7072).into())),
        Some("off") | Some("none") => Ok(None),
        Some(a) => a.parse().map(Some).map_err(|_| {
            super::UsageError(format!(
                "--flight-listen {a:?}: an address (127.0.0.1:7072) or off"
            ))
            .into()
        }),
    }
}

fn tokens_of(token: Option<String>, file: Option<PathBuf>) -> Result<Tokens> {
    let mut t = Tokens::default();
    if let Some(tok) = token {
        t = t.with(&tok, Access::Write).context("--token")?;
    }
    if let Some(p) = file {
        t = t.with_file(&p)?;
    }
    Ok(t)
}

/// Flush every memstore, unless a second signal comes first: then exit
/// at once (the WAL, synced already, holds every acknowledged write and
/// the next start replays it).
fn flush_before_exit(store: &Arc<Store>, signals: &mut Signals) -> Result<()> {
    let bytes = store.stats().memstore_bytes;
    if bytes == 0 {
        return Ok(());
    }
    tracing::info!(
        "flushing {:.1} MiB of memstores so the next start replays no WAL (Ctrl-C again to skip)",
        bytes as f64 / (1 << 20) as f64
    );
    let s = store.clone();
    let flush = std::thread::spawn(move || s.flush_tables(None));
    loop {
        if flush.is_finished() {
            flush
                .join()
                .map_err(|_| anyhow::anyhow!("the shutdown flush panicked"))??;
            tracing::info!("memstores flushed");
            return Ok(());
        }
        if signals.wait_for(std::time::Duration::from_millis(50)) {
            tracing::warn!("second signal: exiting without the flush (the WAL will be replayed)");
            std::process::exit(130);
        }
    }
}

/// SIGINT and SIGTERM, listened to from creation on (a signal between
/// two waits is not lost), and SIGHUP (reload TLS).
struct Signals {
    rt: tokio::runtime::Runtime,
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (int, term, hup) = {
            let _in_rt = rt.enter();
            (
                signal(SignalKind::interrupt())?,
                signal(SignalKind::terminate())?,
                signal(SignalKind::hangup())?,
            )
        };
        Ok(Signals { rt, int, term, hup })
    }

    /// Block until SIGINT or SIGTERM; on SIGHUP read `tls`'s files again.
    fn wait(&mut self, tls: Option<&telestore::frontend::tls::Tls>) {
        let (int, term, hup) = (&mut self.int, &mut self.term, &mut self.hup);
        self.rt.block_on(async {
            loop {
                tokio::select! {
                    _ = int.recv() => return,
                    _ = term.recv() => return,
                    _ = hup.recv() => match tls.map(|t| t.reload()) {
                        Some(Ok(())) => tracing::info!("SIGHUP: TLS certificate and key read again"),
                        Some(Err(e)) => tracing::error!("SIGHUP: TLS not reloaded, the old certificate stays: {e}"),
                        None => tracing::info!("SIGHUP: nothing to reload (no TLS)"),
                    },
                }
            }
        });
    }

    /// Whether SIGINT or SIGTERM came within `d`.
    fn wait_for(&mut self, d: std::time::Duration) -> bool {
        let (int, term) = (&mut self.int, &mut self.term);
        self.rt.block_on(async {
            tokio::select! {
                _ = int.recv() => true,
                _ = term.recv() => true,
                _ = tokio::time::sleep(d) => false,
            }
        })
    }
}

/// Open the store for writing; on a disk still full (a restart after the
/// write path stopped for it), open it read-only instead: reads are
/// served, writes refused (`503`, `unavailable`) and `/health` says why,
/// until space is freed and the daemon restarted.
fn open_store(dir: &std::path::Path, opts: Options) -> anyhow::Result<Store> {
    let ro = Options {
        read_only: true,
        ..opts.clone()
    };
    match Store::open(dir, opts) {
        Ok(s) => Ok(s),
        Err(e) if e.is_disk_full() => {
            tracing::error!(
                "opening {} for writes failed, the disk is full ({e}): serving reads only; free space and restart to write",
                dir.display()
            );
            let store = Store::open(dir, ro)
                .with_context(|| format!("opening {} read-only", dir.display()))?;
            let why = std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                "the disk was full when the daemon started: reads are served, writes refused; free space and restart",
            );
            store.stop_writes(&telestore::Error::io(dir, why));
            Ok(store)
        }
        Err(e) => Err(anyhow::Error::new(e).context(format!("opening {}", dir.display()))),
    }
}
