//! Every setting of the daemon, declared once ([`DaemonConfig`]): its key,
//! type, default, range and documentation. The configuration file is this
//! struct in TOML; the `serve` flags, their environment variables, the
//! `--set KEY=VALUE` override and `docs/configuration.md` are generated
//! from [`SETTINGS`]; [`DaemonConfig::engine_options`] and
//! [`DaemonConfig::server_config`] hand each layer its part. The defaults
//! are the layers' own (`Options::default()`, `ServerConfig::default()`,
//! `QueryLimits::default()`), so a default is stated in one place.
//!
//! Precedence, lowest first: the default, the file, the environment
//! variable (`TELESTORE_` + the key in capitals), the flag, `--set`.

mod doc;
mod layers;
mod size;
mod values;

pub use doc::markdown;
pub use layers::Override;
pub use size::ByteSize;
pub use values::{Listen, SettingValue};

use crate::frontend::auth::{Access, Tokens};
use crate::frontend::config::ServerConfig;
use crate::frontend::tls::{Tls, TlsFiles};
use crate::mqtt::MqttConfig;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use telestore_engine::error::{Error, Result};
use telestore_engine::io::priority::IoPriority;
use telestore_engine::schema::{parse_duration_ms, BlockEncoding, Compression, TableOptions};
use telestore_engine::Options;
use telestore_query::sql::QueryLimits;

/// The data directory when none is given.
pub const DEFAULT_DIR: &str = "telestore-data";

/// Which part of the daemon a setting belongs to: how its flag is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// Where the daemon keeps its data and listens, and who may talk to
    /// it: the flags `serve -h` shows.
    Top,
    /// The frontends (connections, protocols).
    Server,
    /// The storage engine.
    Engine,
    /// The engine's background work (also taken by `telestore-lab
    /// sustained`).
    Background,
    /// Query limits.
    Query,
    /// A TOML table of its own (`[mqtt]`, `[tls]`): no generated flag;
    /// `--set table.key=value` sets one of its keys.
    Table,
}

/// What is known about one setting, for its flag and its documentation.
#[derive(Debug)]
pub struct Setting {
    /// The key in the file (and, with `-`, the flag).
    pub key: &'static str,
    /// Where it belongs.
    pub group: Group,
    /// Its documentation, one line per doc-comment line.
    pub doc: &'static str,
    /// The placeholder of its value.
    pub value_name: &'static str,
    /// The integers it takes, where limited.
    pub range: Option<(i64, i64)>,
}

impl Setting {
    /// `--flush-threshold-mib`.
    pub fn flag(&self) -> String {
        format!("--{}", self.key.replace('_', "-"))
    }

    /// `TELESTORE_FLUSH_THRESHOLD_MIB`.
    pub fn env(&self) -> String {
        format!("TELESTORE_{}", self.key.to_ascii_uppercase())
    }

    /// The documentation as one paragraph per blank-line-separated block.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for line in self.doc.lines().map(str::trim) {
            if line.is_empty() {
                out.push_str("\n\n");
            } else {
                if !out.is_empty() && !out.ends_with('\n') {
                    out.push(' ');
                }
                out.push_str(line);
            }
        }
        out
    }

    /// The default as the file would spell it (`unset` when none).
    pub fn default_text(&self) -> String {
        DaemonConfig::default().value_text(self.key)
    }
}

/// The setting named `key`.
pub fn setting(key: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.key == key)
}

fn engine() -> Options {
    Options::default()
}

fn server() -> ServerConfig {
    ServerConfig::default()
}

fn query() -> QueryLimits {
    QueryLimits::default()
}

fn size(bytes: impl TryInto<u64>) -> ByteSize {
    ByteSize(bytes.try_into().unwrap_or(u64::MAX))
}

macro_rules! settings {
    ($( $(#[doc = $doc:literal])+ [$group:ident] $key:ident : $ty:ty = $default:expr $(, in $lo:literal ..= $hi:literal)? ; )+) => {
        /// Every setting of `telestore serve` (the configuration file's
        /// keys): see the module documentation and `docs/configuration.md`.
        #[derive(Clone, Debug, serde::Deserialize, serde::Serialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct DaemonConfig {
            $( $(#[doc = $doc])+ pub $key: $ty, )+
        }

        impl Default for DaemonConfig {
            fn default() -> Self {
                DaemonConfig { $( $key: $default, )+ }
            }
        }

        /// Every setting, in the order of the declaration.
        pub static SETTINGS: &[Setting] = &[ $( Setting {
            key: stringify!($key),
            group: Group::$group,
            doc: concat!($($doc, "\n"),+),
            value_name: <$ty as SettingValue>::VALUE_NAME,
            range: settings!(@range $($lo, $hi)?),
        }, )+ ];

        impl DaemonConfig {
            /// The first setting outside its declared range: key, value.
            fn out_of_range(&self) -> Option<(&'static Setting, i64)> {
                for s in SETTINGS {
                    let Some((lo, hi)) = s.range else { continue };
                    let v = match s.key {
                        $( stringify!($key) => SettingValue::as_i64(&self.$key), )+
                        _ => None,
                    };
                    if let Some(v) = v.filter(|v| !(lo..=hi).contains(v)) {
                        return Some((s, v));
                    }
                }
                None
            }

            /// `key`'s value as the file would spell it.
            fn value_text(&self, key: &str) -> String {
                let v = match key {
                    $( stringify!($key) => toml::Value::try_from(&self.$key), )+
                    _ => return String::new(),
                };
                match v {
                    Ok(toml::Value::String(s)) => s,
                    Ok(v) => v.to_string(),
                    Err(_) => "unset".into(),
                }
            }
        }
    };
    (@range) => { None };
    (@range $lo:literal, $hi:literal) => { Some(($lo, $hi)) };
}

settings! {
    /// Data directory: the manifest, the HFiles and (unless wal_dir says
    /// otherwise) the WAL.
    [Top] dir: PathBuf = PathBuf::from(DEFAULT_DIR);
    /// Address of the binary ingest protocol (formats/ingest.md).
    /// Loopback by default: expose it deliberately (e.g. 0.0.0.0:7070) and
    /// set a token when you do.
    [Top] listen: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 7070));
    /// Address of the HTTP endpoints: InfluxDB line protocol
    /// (/api/v2/write, /write), queries and exports (/api/v1/query,
    /// /api/v1/export), /api/v1/tables, /api/v1/flush, /metrics, /health.
    [Top] http_listen: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 7071));
    /// Address of the Arrow Flight service (tables as flights with one
    /// endpoint per region, DoPut bulk loads, SQL; formats/flight.md), or
    /// `off`.
    [Top] flight_listen: Listen = Listen::On(SocketAddr::from(([127, 0, 0, 1], 7072)));
    /// A read-write token every client must present: binary-protocol
    /// handshakes, Flight calls (`authorization: Bearer T`), and every
    /// HTTP route but /health (and /metrics, see metrics_public), sent as
    /// `Authorization: Token T`, `Bearer T`, basic auth with T as the
    /// password, or v1's `?u=…&p=T`. Prefer token_file: a flag shows in
    /// `ps`. Unset: no token required.
    [Top] token: Option<String> = None;
    /// File of tokens, one per line: `rw TOKEN` (writes and reads) or
    /// `ro TOKEN` (queries, exports, listings only); `#` starts a comment.
    /// Adds to token.
    [Top] token_file: Option<PathBuf> = None;
    /// Serve /metrics without a token even when tokens are configured.
    [Server] metrics_public: bool = server().metrics_public;
    /// Payload one binary connection may have read but not yet
    /// acknowledged; past it the server stops reading from that client.
    [Server] max_inflight_mib: ByteSize = size(server().max_inflight_bytes);
    /// The line-protocol tag whose value names the device; other tags go
    /// to the device registry.
    [Server] device_tag: String = server().device_tag;
    /// Create a table on its first write when it does not exist (line
    /// protocol, MQTT JSON and line-protocol payloads, Flight DoPut), its
    /// fields typed by the first values seen and its options from the
    /// auto_create_* settings; `false`: such writes are refused as an
    /// unknown table.
    [Server] auto_create: bool = server().auto_create.is_some();
    /// Retention of tables created on first write (`30d`, `12h`); unset:
    /// kept forever.
    [Server] auto_create_ttl: Option<String> = None;
    /// Regions (key-range shards) a table created on first write starts
    /// with.
    [Server] auto_create_regions: u32 = TableOptions::default().regions, in 1..=65536;
    /// Compression of tables created on first write: `zstd`,
    /// `zstd:LEVEL`, `snappy` or `none`.
    [Server] auto_create_compression: String = TableOptions::default().compression.name();
    /// Layout of the files compactions write for tables created on first
    /// write: `columnar` or `rows`.
    [Server] auto_create_encoding: String = TableOptions::default().encoding.name().into();
    /// Connections open at once over every listener (HTTP, binary,
    /// Flight); past it new clients wait in the kernel's backlog. At start
    /// the open-file limit is raised to its hard limit and 512 descriptors
    /// are kept for the store, so the cap may come out lower (logged).
    [Server] connections_max: usize = server().connections_max, in 1..=1000000;
    /// How long an HTTP or Flight client may take to send its first bytes
    /// and each request's headers, in seconds; an idle kept-alive HTTP
    /// connection is closed after it too.
    [Server] header_timeout_s: u64 = server().header_timeout.as_secs(), in 1..=3600;
    /// Flush every memstore on a clean stop (SIGINT/SIGTERM), so the next
    /// start replays no WAL. It takes about as long as writing the
    /// memstores out (at most memstore_global_mib; seconds at typical
    /// sizes); a second Ctrl-C skips it (nothing is lost: the WAL holds
    /// every acknowledged write).
    [Server] shutdown_flush: bool = true;
    /// Nice value of the memstore-apply, flush and compaction threads, so
    /// they yield the CPU to the threads an ack waits for. Set 0 when the
    /// daemon shares its cores with CPU-heavy work: busy normal-priority
    /// neighbours can starve flushes and compactions until writes are
    /// refused as busy.
    [Engine] background_nice: i32 = engine().background_nice, in 0..=19;
    /// WAL fdatasyncs in flight at once: a group commit need not wait for
    /// the sync of the group before it. 1 syncs one group at a time.
    [Engine] wal_syncs_in_flight: usize = engine().wal_syncs_in_flight, in 1..=8;
    /// Write HFiles (flushes, compactions) with O_DIRECT, past the page
    /// cache, so they reach the disk a chunk at a time instead of in
    /// writeback bursts that WAL fdatasyncs queue behind. With false,
    /// freshly written files stay in the page cache for reads.
    [Engine] direct_hfile_writes: bool = engine().direct_hfile_writes;
    /// Put the blocks a flush writes into the block cache as they are
    /// written, so the newest data is warm from the start; compaction
    /// output is never cached this way.
    [Engine] cache_flushed_blocks: bool = engine().cache_flushed_blocks;
    /// A new HFile not cached as it was written (compaction output) and at
    /// most this big is read into the page cache by the kernel in the
    /// background once published, so its first reads do not wait for the
    /// disk; 0 turns it off.
    [Engine] readahead_new_files_mib: ByteSize = size(engine().readahead_new_files_bytes);
    /// Devices per table whose newest row stays in memory once `latest`
    /// has read it, so that reading it again touches no file however cold
    /// the files are after a flush or compaction (about 100 bytes plus the
    /// row per device); 0 turns it off.
    [Engine] latest_cache_devices: usize = engine().latest_cache_devices;
    /// Keep the WAL in this directory (e.g. on another disk, so its fsyncs
    /// do not queue behind flush and compaction writes). Chosen when the
    /// store is created and recorded in its manifest; a store is refused
    /// with any other. Unset: wal/ under dir.
    [Engine] wal_dir: Option<PathBuf> = None;
    /// Background compaction workers (they run at background_nice).
    /// Unset: one per two cores, at least 2, at most 4.
    [Engine] compaction_threads: Option<usize> = None, in 0..=16;
    /// A region's memstore is flushed to an HFile at this size.
    [Engine] flush_threshold_mib: ByteSize = size(engine().flush_threshold_bytes);
    /// Memory for all memstores together: from three quarters of it the
    /// largest is flushed; above all of it writers wait.
    [Engine] memstore_global_mib: ByteSize = size(engine().memstore_global_bytes);
    /// Most parts a compaction of one region is split into by key range,
    /// merged on threads of their own (subcompactions); 1 never splits.
    /// Unset: one per two cores, at most 4.
    [Background] subcompactions: Option<usize> = None, in 1..=16;
    /// I/O priority of the flush and compaction threads: normal, low
    /// (best-effort, lowest level) or idle (only when the disk is
    /// otherwise idle; can starve compactions under a saturating load).
    /// Honoured by the mq-deadline and bfq schedulers.
    [Background] background_io_priority: String = engine().background_io_priority.name().into();
    /// Ceiling of flush and compaction writes per second; compactions
    /// wait for it, flushes never do; 0 for no limit.
    [Background] background_write_mib_s: ByteSize = size(engine().background_write_bytes_per_sec);
    /// Tune the write limiter from the compaction debt: a tenth of the
    /// ceiling with no debt, all of it from the slowdown threshold.
    [Background] background_write_auto: bool = engine().background_write_auto;
    /// Compaction debt (all regions) from which each write batch is
    /// delayed 1 to 50 ms; 0 never.
    [Background] compaction_debt_slowdown_mib: ByteSize = size(engine().compaction_debt_slowdown_bytes);
    /// Compaction debt from which writes stall (then are refused as busy
    /// after the stall limit); 0 never.
    [Background] compaction_debt_stop_mib: ByteSize = size(engine().compaction_debt_stop_bytes);
    /// Sorted runs in a region from which each write batch is delayed 1 to
    /// 50 ms (rising to the file limit, 16); 0 never.
    [Background] slowdown_file_count: usize = engine().slowdown_file_count;
    /// A minor compaction reading less than this writes rows blocks
    /// (cheaper to encode) whatever the table's encoding; larger ones and
    /// majors write the table's encoding; 0: always the table's.
    [Background] columnar_min_compaction_mib: ByteSize = size(engine().columnar_min_compaction_bytes);
    /// A query (HTTP query or export, SQL over HTTP or Flight) running
    /// longer than this many seconds is stopped with a timeout error (HTTP
    /// 504, Flight DEADLINE_EXCEEDED); 0: no limit.
    [Query] query_timeout_s: u64 = query().timeout.map_or(0, |t| t.as_secs());
    /// Queries running at once; more wait up to query_queue_s for a slot,
    /// then are refused as busy (HTTP 503, Flight UNAVAILABLE).
    [Query] queries_max: usize = query().concurrent_max, in 1..=1024;
    /// How long a query waits for a slot, in seconds.
    [Query] query_queue_s: u64 = query().queue_wait.as_secs();
    /// Memory all running queries' operators (joins, sorts, groupings)
    /// share; past it they spill to <dir>/tmp/sql or fail with a memory
    /// error (HTTP 422).
    [Query] query_memory_mib: ByteSize = size(query().memory_bytes);
    /// Disk all queries' spill files may take in <dir>/tmp/sql (emptied at
    /// every start).
    [Query] query_spill_mib: ByteSize = size(query().spill_bytes);
    /// Subscribe to an MQTT broker and write what devices publish there,
    /// at least once (QoS 1, a persistent session, each message
    /// acknowledged only once its rows are fsynced): url (mqtt://host:port,
    /// or mqtts:// for TLS), client_id, username, password, ca_file,
    /// dead_letter and [[mqtt.subscriptions]] (topic, format =
    /// line|json|row, qos, map = "PREFIX/{table}/{device}", table,
    /// durability); see docs/ingest.md, "MQTT ingest". The flag `--mqtt
    /// URL` ($TELESTORE_MQTT) sets url. Unset: no MQTT.
    [Table] mqtt: Option<MqttConfig> = None;
    /// TLS on every port (HTTP, binary protocol, Flight): cert (the
    /// server's certificate chain, PEM), key (its private key: PKCS#8,
    /// PKCS#1 or SEC1) and client_ca (with it, clients must present a
    /// certificate signed by one of these CAs). Both files are read again
    /// on SIGHUP. The flags `--tls-cert`, `--tls-key` and `--tls-client-ca`
    /// set the three keys. Unset: plain TCP.
    [Table] tls: Option<TlsFiles> = None;
}

impl DaemonConfig {
    /// Check what serde cannot: the declared ranges and what the engine
    /// refuses (`Options::validate`).
    pub fn validate(&self) -> Result<()> {
        if let Some((s, v)) = self.out_of_range() {
            let (lo, hi) = s.range.unwrap_or_default();
            return Err(Error::invalid(s.key, format!("{v} is outside {lo}..={hi}")));
        }
        self.engine_options().map(drop)
    }

    /// The engine's options: its defaults with these settings applied.
    pub fn engine_options(&self) -> Result<Options> {
        let mut o = Options {
            background_nice: self.background_nice,
            wal_syncs_in_flight: self.wal_syncs_in_flight,
            direct_hfile_writes: self.direct_hfile_writes,
            cache_flushed_blocks: self.cache_flushed_blocks,
            readahead_new_files_bytes: self.readahead_new_files_mib.bytes(),
            latest_cache_devices: self.latest_cache_devices,
            flush_threshold_bytes: self.flush_threshold_mib.bytes_usize(),
            memstore_global_bytes: self.memstore_global_mib.bytes_usize(),
            ..engine()
        };
        if let Some(n) = self.compaction_threads {
            o.compaction_threads = n;
        }
        if let Some(w) = &self.wal_dir {
            o.wal_dir = Some(
                std::path::absolute(w)
                    .map_err(|e| Error::invalid("wal_dir", format!("{}: {e}", w.display())))?,
            );
        }
        self.apply_background(&mut o)?;
        o.validate()?;
        Ok(o)
    }

    /// Set the [`Group::Background`] settings on `o` (what
    /// `telestore-lab sustained` takes besides its own flags).
    pub fn apply_background(&self, o: &mut Options) -> Result<()> {
        if let Some(n) = self.subcompactions {
            o.subcompactions = n;
        }
        o.background_io_priority = IoPriority::parse(&self.background_io_priority)?;
        o.background_write_bytes_per_sec = self.background_write_mib_s.bytes();
        o.background_write_auto = self.background_write_auto;
        o.compaction_debt_slowdown_bytes = self.compaction_debt_slowdown_mib.bytes();
        o.compaction_debt_stop_bytes = self.compaction_debt_stop_mib.bytes();
        o.slowdown_file_count = self.slowdown_file_count;
        o.columnar_min_compaction_bytes = self.columnar_min_compaction_mib.bytes();
        Ok(())
    }

    /// The limits every query runs under.
    pub fn query_limits(&self) -> QueryLimits {
        QueryLimits {
            timeout: (self.query_timeout_s > 0).then(|| Duration::from_secs(self.query_timeout_s)),
            concurrent_max: self.queries_max,
            queue_wait: Duration::from_secs(self.query_queue_s),
            memory_bytes: self.query_memory_mib.bytes_usize(),
            spill_bytes: self.query_spill_mib.bytes(),
            ..query()
        }
    }

    /// The options of tables created on first write (`None`: off).
    /// Checked even when off, so that turning it on later cannot fail.
    pub fn auto_create_options(&self) -> Result<Option<TableOptions>> {
        let named = |key: &'static str| move |e: Error| Error::invalid(key, e.to_string());
        let ttl = self.auto_create_ttl.as_deref().map(parse_duration_ms);
        let o = TableOptions {
            ttl_ms: ttl.transpose().map_err(named("auto_create_ttl"))?,
            regions: self.auto_create_regions,
            compression: Compression::parse(&self.auto_create_compression)
                .map_err(named("auto_create_compression"))?,
            encoding: BlockEncoding::parse(&self.auto_create_encoding)
                .map_err(named("auto_create_encoding"))?,
            ..TableOptions::default()
        };
        o.validate()?;
        Ok(self.auto_create.then_some(o))
    }

    /// The tokens: `token` (read-write) and those of `token_file`.
    pub fn tokens(&self) -> Result<Tokens> {
        let mut t = Tokens::default();
        if let Some(tok) = &self.token {
            t = t.with(tok, Access::Write)?;
        }
        if let Some(p) = &self.token_file {
            t = t.with_file(p)?;
        }
        Ok(t)
    }

    /// The frontends' settings (reads the token file and the TLS files).
    pub fn server_config(&self) -> Result<ServerConfig> {
        let tls = match &self.tls {
            Some(files) => Some(Tls::load(files.clone())?),
            None => None,
        };
        Ok(ServerConfig {
            tokens: self.tokens()?,
            metrics_public: self.metrics_public,
            max_inflight_bytes: self.max_inflight_mib.bytes_usize(),
            http_listen: Some(self.http_listen),
            device_tag: self.device_tag.clone(),
            auto_create: self.auto_create_options()?,
            flight_listen: self.flight_listen.addr(),
            mqtt: self.mqtt.clone(),
            queries: self.query_limits(),
            connections_max: self.connections_max,
            header_timeout: Duration::from_secs(self.header_timeout_s),
            tls,
            ..server()
        })
    }
}

#[cfg(test)]
mod tests;
