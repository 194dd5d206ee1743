//! Rate-limited logging: a warning that a failing condition repeats (a
//! full disk) is printed once per interval, with how many were held back.

use std::time::{Duration, Instant};

/// Says when a repeated message may be logged again.
#[derive(Debug)]
pub struct LogEvery {
    interval: Duration,
    last: Option<Instant>,
    suppressed: u64,
}

impl LogEvery {
    pub const fn new(interval: Duration) -> Self {
        LogEvery {
            interval,
            last: None,
            suppressed: 0,
        }
    }

    /// `Some(n)` when the message should be logged now, `n` being how many
    /// were held back since the last one; `None` to hold this one back.
    pub fn check(&mut self, now: Instant) -> Option<u64> {
        match self.last {
            Some(t) if now.duration_since(t) < self.interval => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_once_per_interval_and_counts_the_rest() {
        let mut l = LogEvery::new(Duration::from_secs(60));
        let t0 = Instant::now();
        assert_eq!(l.check(t0), Some(0));
        for i in 1..=50 {
            assert_eq!(l.check(t0 + Duration::from_millis(200 * i)), None);
        }
        assert_eq!(l.check(t0 + Duration::from_secs(61)), Some(50));
        assert_eq!(l.check(t0 + Duration::from_secs(62)), None);
    }
}
