//! A rate limiter for background writes (flushes and compactions): a
//! token bucket in bytes per second, as RocksDB's `GenericRateLimiter`.
//!
//! - A **low-priority** request (compaction) waits until the bucket holds
//!   its bytes; a **high-priority** one (flush: writers wait for it when
//!   memstores fill up) takes its bytes at once, driving the bucket below
//!   zero if it must, so compactions wait longer after it.
//! - The bucket holds at most a tenth of a second of the rate (at least
//!   [`BURST_MIN_BYTES`]), so an idle spell does not bank a burst.
//! - **Auto-tuned**: the engine sets the rate every second from how far
//!   behind compaction is ([`auto_rate`]): a tenth of the ceiling with no
//!   compaction debt, rising linearly to the ceiling at the debt where
//!   writes start to slow down. Background I/O stays low and smooth while
//!   compaction keeps up and gets the whole ceiling when it does not.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Smallest bucket: one write chunk of the HFile writer and then some.
pub const BURST_MIN_BYTES: u64 = 2 << 20;
/// Share of the ceiling the auto-tuned rate never goes below.
pub const AUTO_FLOOR_PER_MILLE: u64 = 100;

/// Who is asking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priority {
    /// Never waits (flushes).
    High,
    /// Waits for tokens (compactions).
    Low,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

/// A token bucket shared by every background writer of a store.
#[derive(Debug)]
pub struct RateLimiter {
    rate_bytes_per_sec: AtomicU64,
    bucket: Mutex<Bucket>,
    waited_ns: AtomicU64,
    bytes_through: AtomicU64,
}

impl RateLimiter {
    /// A limiter at `rate_bytes_per_sec` (> 0).
    pub fn new(rate_bytes_per_sec: u64) -> Self {
        RateLimiter {
            rate_bytes_per_sec: AtomicU64::new(rate_bytes_per_sec.max(1)),
            bucket: Mutex::new(Bucket {
                tokens: 0.0,
                last: Instant::now(),
            }),
            waited_ns: AtomicU64::new(0),
            bytes_through: AtomicU64::new(0),
        }
    }

    /// The rate now.
    pub fn rate(&self) -> u64 {
        self.rate_bytes_per_sec.load(Ordering::Relaxed)
    }

    /// Change the rate (auto-tuning).
    pub fn set_rate(&self, bytes_per_sec: u64) {
        self.rate_bytes_per_sec
            .store(bytes_per_sec.max(1), Ordering::Relaxed);
    }

    /// Time low-priority requests spent waiting, in total.
    pub fn waited(&self) -> Duration {
        Duration::from_nanos(self.waited_ns.load(Ordering::Relaxed))
    }

    /// Bytes granted, in total.
    pub fn bytes_through(&self) -> u64 {
        self.bytes_through.load(Ordering::Relaxed)
    }

    /// Take `bytes` from the bucket, waiting first if `p` is low and the
    /// bucket is short. Returns the time waited.
    pub fn request(&self, bytes: u64, p: Priority) -> Duration {
        let t0 = Instant::now();
        loop {
            let wait = self.try_take(bytes, p);
            if wait.is_zero() {
                break;
            }
            // Woken at least every 100 ms to see a raised rate.
            std::thread::sleep(wait.min(Duration::from_millis(100)));
        }
        self.bytes_through.fetch_add(bytes, Ordering::Relaxed);
        let waited = t0.elapsed();
        if p == Priority::Low {
            self.waited_ns
                .fetch_add(waited.as_nanos() as u64, Ordering::Relaxed);
        }
        waited
    }

    /// Refill, then take `bytes` (zero returned) or say how long until the
    /// bucket would hold them.
    fn try_take(&self, bytes: u64, p: Priority) -> Duration {
        let rate = self.rate() as f64;
        let burst = (rate / 10.0).max(BURST_MIN_BYTES as f64);
        let mut b = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let dt = now.duration_since(b.last).as_secs_f64();
        b.last = now;
        b.tokens = (b.tokens + dt * rate).min(burst);
        // A request bigger than the bucket could never be served whole:
        // it may take the bucket when full.
        let need = (bytes as f64).min(burst);
        if p == Priority::High || b.tokens >= need {
            b.tokens -= bytes as f64;
            return Duration::ZERO;
        }
        Duration::from_secs_f64((need - b.tokens) / rate)
    }
}

/// The auto-tuned rate for a ceiling of `max_bytes_per_sec` when
/// compaction owes `debt_bytes` and writes slow down from
/// `slowdown_debt_bytes` (0: no slowdown configured, the rate is the
/// ceiling).
pub fn auto_rate(max_bytes_per_sec: u64, debt_bytes: u64, slowdown_debt_bytes: u64) -> u64 {
    if slowdown_debt_bytes == 0 {
        return max_bytes_per_sec;
    }
    let floor = max_bytes_per_sec / 1000 * AUTO_FLOOR_PER_MILLE;
    let share = (debt_bytes.min(slowdown_debt_bytes) as f64) / slowdown_debt_bytes as f64;
    floor + ((max_bytes_per_sec - floor) as f64 * share) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    // Rates slow enough that a test thread descheduled for a while
    // still sees the same outcome.

    #[test]
    fn low_priority_waits_for_tokens_and_high_priority_does_not() {
        let l = RateLimiter::new(1 << 20); // 1 MiB/s, bucket 2 MiB
                                           // Empty bucket: 1 MiB at 1 MiB/s is up to a second away.
        let w = l.try_take(1 << 20, Priority::Low);
        assert!(
            w > Duration::from_millis(500) && w <= Duration::from_secs(1),
            "{w:?}"
        );
        assert_eq!(l.try_take(50 << 20, Priority::High), Duration::ZERO);
        // Now about 50 MiB in debt: about 50 s.
        let w = l.try_take(1 << 20, Priority::Low);
        assert!(w > Duration::from_secs(40), "{w:?}");
        assert_eq!(l.bytes_through(), 0, "try_take counts nothing");
    }

    #[test]
    fn the_bucket_holds_a_tenth_of_a_second_or_the_minimum() {
        let l = RateLimiter::new(1 << 20);
        std::thread::sleep(Duration::from_millis(2500));
        // 2.5 MiB accrued, BURST_MIN_BYTES kept: a request of exactly that
        // passes, and then the bucket is empty.
        assert_eq!(l.try_take(BURST_MIN_BYTES, Priority::Low), Duration::ZERO);
        assert!(l.try_take(BURST_MIN_BYTES, Priority::Low) > Duration::from_secs(1));
        // A request bigger than the bucket passes once the bucket is full.
        l.set_rate(100 << 30);
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(l.try_take(100 << 30, Priority::Low), Duration::ZERO);
    }

    #[test]
    fn auto_rate_rises_with_debt_from_a_tenth_to_the_ceiling() {
        assert_eq!(auto_rate(1_000_000, 0, 0), 1_000_000);
        assert_eq!(auto_rate(1_000_000, 0, 100), 100_000);
        assert_eq!(auto_rate(1_000_000, 50, 100), 550_000);
        assert_eq!(auto_rate(1_000_000, 500, 100), 1_000_000);
    }
}
