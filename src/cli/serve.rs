//! `telestore serve`: the ingest daemon — binary TCP protocol and HTTP
//! (line protocol, metrics, health, tables).

use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::sync::Arc;
use telestore::daemon::start;
use telestore::settings::{DaemonConfig, Override};
use telestore::{Options, Store};

/// Every setting can come from its flag, its environment variable, the
/// `--config` file, `--set`, or its default (docs/configuration.md); the
/// settings themselves are declared once, in `telestore::settings`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// TOML file of settings: the keys are the flags' names with `_` for
    /// `-` (flush_threshold_mib = "128MiB"), plus an [mqtt] and a [tls]
    /// table; docs/configuration.md lists them all. Flags, environment
    /// variables and --set override it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Set any setting, a key of the file's tables included
    /// (`--set flush_threshold_mib=128MiB`, `--set mqtt.client_id=t2`);
    /// repeatable, applied last.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Subscribe to this MQTT broker (mqtt://host:port, or mqtts:// for
    /// TLS) and write what devices publish there, at least once: QoS 1, a
    /// persistent session, each message acknowledged only once its rows
    /// are fsynced. Default subscriptions: telestore/+/+ with JSON objects
    /// (topic telestore/TABLE/DEVICE) and telestore/+ with line protocol.
    /// The config file's [mqtt] table sets the rest: see docs/ingest.md,
    /// "MQTT ingest" [default: none].
    #[arg(long, env = "TELESTORE_MQTT", value_name = "URL")]
    mqtt: Option<String>,
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
    #[arg(long, value_name = "PEM")]
    tls_client_ca: Option<PathBuf>,
    #[command(flatten)]
    settings: super::settings::SettingFlags<false>,
}

impl ServeArgs {
    /// The settings: defaults, the file, then environment variables and
    /// flags, then `--set`.
    fn config(&self) -> Result<DaemonConfig> {
        let mut given = self.settings.given.clone();
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        for (key, value, flag) in [
            ("mqtt.url", self.mqtt.clone(), "--mqtt"),
            ("tls.cert", path(&self.tls_cert), "--tls-cert"),
            ("tls.key", path(&self.tls_key), "--tls-key"),
            (
                "tls.client_ca",
                path(&self.tls_client_ca),
                "--tls-client-ca",
            ),
        ] {
            if let Some(value) = value {
                given.push(Override {
                    key: key.into(),
                    value,
                    source: flag.into(),
                });
            }
        }
        for s in &self.set {
            given.push(Override::parse_set(s)?);
        }
        Ok(DaemonConfig::load(self.config.as_deref(), &given)?)
    }
}

pub fn run(a: ServeArgs) -> Result<()> {
    // Listen before anything is served, so an early SIGTERM stops cleanly.
    let mut signals = Signals::new()?;
    let settings = a.config()?;
    let cfg = settings.server_config().context("server settings")?;
    let tls = cfg.tls.clone();
    let (dir, listen, http) = (&settings.dir, settings.listen, settings.http_listen);
    for addr in [listen, http].into_iter().chain(cfg.flight_listen) {
        if cfg.tokens.is_open() && !addr.ip().is_loopback() {
            tracing::warn!(
                "{addr} is not a loopback address and no token is set: anyone who reaches it \
                 can write, query and create tables (set --token-file)"
            );
        }
    }
    let store = Arc::new(open_store(dir, settings.engine_options()?)?);
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
    if settings.shutdown_flush {
        flush_before_exit(&store, &mut signals)?;
    }
    Arc::try_unwrap(store)
        .map_err(|_| anyhow::anyhow!("store still in use at shutdown"))?
        .close()?;
    tracing::info!("stopped cleanly");
    Ok(())
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
