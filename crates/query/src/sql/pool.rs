//! Where queries run, and the limits they all run under.
//!
//! A [`QueryPool`] owns a tokio runtime of its own, its threads at a lower
//! priority (`nice`), so that no query — a cross join, a
//! `generate_series` of 10^11 rows — takes the threads that ingest, the
//! network and `/health` run on. Every query is admitted first (at most
//! [`QueryLimits::concurrent_max`] at once, the others wait up to
//! [`QueryLimits::queue_wait`] and are then refused as busy), runs under
//! a deadline ([`QueryLimits::timeout`]) and a cancel flag that
//! [`cancel::Guard`] raises when its client goes away, and takes its
//! memory from one pool shared by all queries, spilling under the data
//! directory (capped, emptied when the pool starts).

use super::cancel::{Guard, QueryControl};
use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::memory_pool::{FairSpillPool, TrackConsumersPool};
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use telestore_engine::error::{Error, Result};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The limits every query runs under.
#[derive(Clone, Debug)]
pub struct QueryLimits {
    /// Threads of the query runtime.
    pub threads: usize,
    /// Their nice value (0..=19): above the ingest and network threads'
    /// 0, so that those win the CPU when both want it.
    pub nice: i32,
    /// Queries running at once; more wait for a slot.
    pub concurrent_max: usize,
    /// How long a query waits for a slot before it is refused as busy.
    pub queue_wait: Duration,
    /// How long one query may run, from its admission to its last row
    /// (`None`: no limit).
    pub timeout: Option<Duration>,
    /// Memory all queries' operators (hash tables, sorts, joins) share;
    /// past it they spill to disk or fail.
    pub memory_bytes: usize,
    /// Disk all queries' spill files may take together.
    pub spill_bytes: u64,
}

impl Default for QueryLimits {
    fn default() -> Self {
        QueryLimits {
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            nice: 10,
            concurrent_max: 8,
            queue_wait: Duration::from_secs(10),
            timeout: Some(Duration::from_secs(300)),
            memory_bytes: 1 << 30,
            spill_bytes: 8 << 30,
        }
    }
}

/// Queries counted since the pool started.
#[derive(Default, Debug)]
pub struct QueryStats {
    /// Admitted.
    pub started: AtomicU64,
    /// Refused because every slot stayed taken for the queue wait.
    pub refused_busy: AtomicU64,
    /// Stopped by their deadline.
    pub timed_out: AtomicU64,
    /// Stopped because their client went away.
    pub cancelled: AtomicU64,
}

/// The query runtime, the shared memory pool and spill directory, and the
/// admission slots.
pub struct QueryPool {
    rt: Option<tokio::runtime::Runtime>,
    handle: tokio::runtime::Handle,
    env: Arc<RuntimeEnv>,
    slots: Arc<Semaphore>,
    limits: QueryLimits,
    spill_dir: Option<PathBuf>,
    /// The pool's counters (admitted, refused, timed out, cancelled).
    pub stats: Arc<QueryStats>,
    /// Blocking work of queries still running.
    work: Arc<Work>,
}

/// Query work on the runtime's blocking threads (scans, streamed
/// answers), counted until it and everything it captured (the store
/// among them) is dropped, so that a stopping daemon can wait for it:
/// the runtime's own count sees only its async tasks.
#[derive(Debug, Default)]
pub struct Work(AtomicUsize);

/// One piece of [`Work`], counted while it lives.
pub struct Busy(Arc<Work>);

impl Work {
    /// Count one piece of work until the [`Busy`] is dropped.
    pub fn begin(self: &Arc<Self>) -> Busy {
        self.0.fetch_add(1, Relaxed);
        Busy(self.clone())
    }

    /// Pieces of work running now.
    pub fn running(&self) -> usize {
        self.0.load(Relaxed)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, Relaxed);
    }
}

/// Where spill files go under a data directory.
pub fn spill_dir_of(data_dir: &Path) -> PathBuf {
    data_dir.join("tmp").join("sql")
}

impl QueryPool {
    /// A pool spilling to `spill_dir` (emptied first; `None`: operators
    /// that would spill fail instead).
    pub fn new(spill_dir: Option<PathBuf>, limits: QueryLimits) -> Result<Arc<QueryPool>> {
        if limits.threads == 0 || limits.concurrent_max == 0 {
            return Err(Error::invalid(
                "query limits",
                "query threads and concurrent queries must be at least 1",
            ));
        }
        let spill_dir = match spill_dir {
            Some(d) => Some(empty_dir(&d)?),
            None => None,
        };
        let env = runtime_env(spill_dir.as_deref(), &limits)?;
        let nice = limits.nice;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(limits.threads)
            .thread_name("telestore-query")
            .on_thread_start(move || lower_priority(nice))
            .enable_all()
            .build()
            .map_err(|e| Error::io("<query runtime>", e))?;
        Ok(Arc::new(QueryPool {
            handle: rt.handle().clone(),
            rt: Some(rt),
            env,
            slots: Arc::new(Semaphore::new(limits.concurrent_max)),
            limits,
            spill_dir,
            stats: Arc::default(),
            work: Arc::default(),
        }))
    }

    /// The runtime queries run on.
    pub fn handle(&self) -> &tokio::runtime::Handle {
        &self.handle
    }

    /// The pool's count of blocking work (for the scans it runs).
    pub fn work(&self) -> &Arc<Work> {
        &self.work
    }

    /// Run `f` on the pool's blocking threads, counted (see [`Work`]) until
    /// it returns and what it captured is dropped.
    pub fn spawn_blocking(&self, f: impl FnOnce() + Send + 'static) {
        let busy = self.work.begin();
        self.handle.spawn_blocking(move || {
            f();
            drop(busy);
        });
    }

    /// Wait, at most `limit`, until no query runs: no async task on the
    /// runtime and no blocking work. Whether it got there.
    pub fn wait_idle(&self, limit: Duration) -> bool {
        let t0 = Instant::now();
        loop {
            if self.work.running() == 0 && self.handle.metrics().num_alive_tasks() == 0 {
                return true;
            }
            if t0.elapsed() >= limit {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The memory pool and spill directory all queries share.
    pub fn env(&self) -> &Arc<RuntimeEnv> {
        &self.env
    }

    /// The limits every query runs under.
    pub fn limits(&self) -> &QueryLimits {
        &self.limits
    }

    /// Where queries spill, when they may.
    pub fn spill_dir(&self) -> Option<&Path> {
        self.spill_dir.as_deref()
    }

    /// Queries running now.
    pub fn running(&self) -> usize {
        self.limits.concurrent_max - self.slots.available_permits()
    }

    /// Bytes the running queries' operators hold in the shared pool.
    pub fn memory_used_bytes(&self) -> usize {
        self.env.memory_pool.reserved()
    }

    /// Bytes of spill files on disk now.
    pub fn spill_used_bytes(&self) -> u64 {
        self.env.disk_manager.used_disk_space()
    }

    /// Wait for a slot (at most the queue wait): the admission holds it,
    /// and the query's deadline and cancel flag.
    pub async fn admit(&self) -> Result<Admission> {
        let waited =
            tokio::time::timeout(self.limits.queue_wait, self.slots.clone().acquire_owned()).await;
        let Ok(Ok(permit)) = waited else {
            self.stats.refused_busy.fetch_add(1, Relaxed);
            return Err(Error::Busy {
                retry_after_ms: 1000,
            });
        };
        self.stats.started.fetch_add(1, Relaxed);
        let control = QueryControl::new(
            self.limits.timeout.map(|t| Instant::now() + t),
            self.limits.timeout,
            self.stats.clone(),
        );
        Ok(Admission {
            _permit: permit,
            control,
        })
    }

    /// [`QueryPool::admit`] for a caller outside any runtime.
    pub fn admit_blocking(&self) -> Result<Admission> {
        self.handle.block_on(self.admit())
    }
}

impl Drop for QueryPool {
    fn drop(&mut self) {
        // Dropping a runtime blocks; this may run on another runtime's
        // thread, where blocking is refused.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// A running query's slot, deadline and cancel flag. Dropping it frees
/// the slot.
pub struct Admission {
    _permit: OwnedSemaphorePermit,
    /// The query's deadline and cancel flag, shared with its plan.
    pub control: Arc<QueryControl>,
}

impl Admission {
    /// A guard that cancels the query when dropped before
    /// [`Guard::finish`] (its client went away).
    pub fn guard(&self) -> Guard {
        Guard::new(self.control.clone())
    }
}

fn runtime_env(spill_dir: Option<&Path>, limits: &QueryLimits) -> Result<Arc<RuntimeEnv>> {
    let mode = match spill_dir {
        Some(d) => DiskManagerMode::Directories(vec![d.to_path_buf()]),
        None => DiskManagerMode::Disabled,
    };
    let disk = DiskManagerBuilder::default()
        .with_mode(mode)
        .with_max_temp_directory_size(limits.spill_bytes);
    // A fair pool: a spilling operator gets its share however many others
    // run; the tracking wrapper names the biggest consumers when a query
    // is refused memory.
    let pool = TrackConsumersPool::new(
        FairSpillPool::new(limits.memory_bytes),
        NonZeroUsize::new(3).expect("3 > 0"),
    );
    RuntimeEnvBuilder::new()
        .with_memory_pool(Arc::new(pool))
        .with_disk_manager_builder(disk)
        .build_arc()
        .map_err(super::error_of)
}

/// Create `dir` and remove what is in it (spill files a crash left).
fn empty_dir(dir: &Path) -> Result<PathBuf> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    Ok(dir.to_path_buf())
}

/// Lower the calling thread's priority to `nice` (0: as is); a refusal
/// is logged and the thread runs at normal priority.
fn lower_priority(nice: i32) {
    if nice > 0 {
        let tid = rustix::thread::gettid();
        if let Err(e) = rustix::process::setpriority_process(Some(tid), nice) {
            tracing::warn!("query thread: could not lower priority to nice {nice}: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_pool_refuses_as_busy_after_the_queue_wait() {
        let limits = QueryLimits {
            threads: 1,
            concurrent_max: 1,
            queue_wait: Duration::from_millis(20),
            ..QueryLimits::default()
        };
        let pool = QueryPool::new(None, limits).unwrap();
        let first = pool.admit_blocking().unwrap();
        assert_eq!(pool.running(), 1);
        let e = pool.admit_blocking().err().unwrap();
        assert!(matches!(e, Error::Busy { .. }), "{e}");
        assert_eq!(pool.stats.refused_busy.load(Relaxed), 1);
        drop(first);
        assert_eq!(pool.running(), 0);
        assert!(pool.admit_blocking().is_ok());
    }

    #[test]
    fn the_spill_directory_is_emptied_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let spill = spill_dir_of(dir.path());
        std::fs::create_dir_all(spill.join("datafusion-left")).unwrap();
        std::fs::write(spill.join("datafusion-left/spill.arrow"), b"x").unwrap();
        let pool = QueryPool::new(Some(spill.clone()), QueryLimits::default()).unwrap();
        assert_eq!(pool.spill_dir(), Some(spill.as_path()));
        assert!(!spill.join("datafusion-left").exists());
        assert!(spill.is_dir());
    }
}
