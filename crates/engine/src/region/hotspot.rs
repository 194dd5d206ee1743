//! The hotspot detector: a region is hot while its write or read rate is
//! more than `k ×` the mean rate of its table's regions (and above a floor,
//! so an idle table is never "hot") for longer than a grace period. Each
//! episode is reported once when it starts and once when it ends.

/// Detector settings.
#[derive(Clone, Copy, Debug)]
pub struct HotspotConfig {
    /// A region is over when its rate exceeds `k ×` the table mean.
    pub k: f64,
    /// ... continuously for this long before it is flagged.
    pub grace_ms: i64,
    /// Rates (rows/s) below this never count as hot.
    pub min_rate: f64,
    /// Seconds of history a rate covers.
    pub window_secs: u64,
}

impl Default for HotspotConfig {
    fn default() -> Self {
        HotspotConfig {
            k: 3.0,
            grace_ms: 30_000,
            min_rate: 100.0,
            window_secs: 10,
        }
    }
}

/// One region's state in the detector.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HotState {
    /// Since when the region has been over the limit.
    pub over_since: Option<i64>,
    /// Flagged hot (over for longer than the grace period).
    pub hot: bool,
}

/// What changed in one evaluation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HotEvent {
    Became,
    Cooled,
}

/// Is `rate` over the limit given its table's region rates?
pub fn is_over(cfg: &HotspotConfig, rate: f64, all: &[f64]) -> bool {
    if all.is_empty() || rate < cfg.min_rate {
        return false;
    }
    let mean = all.iter().sum::<f64>() / all.len() as f64;
    rate > cfg.k * mean
}

/// Advance one region's state to `now_ms` given whether it is over the
/// limit now; returns the event to report, if any.
pub fn step(cfg: &HotspotConfig, st: &mut HotState, now_ms: i64, over: bool) -> Option<HotEvent> {
    if !over {
        st.over_since = None;
        if st.hot {
            st.hot = false;
            return Some(HotEvent::Cooled);
        }
        return None;
    }
    let since = *st.over_since.get_or_insert(now_ms);
    if !st.hot && now_ms - since >= cfg.grace_ms {
        st.hot = true;
        return Some(HotEvent::Became);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_after_the_grace_period_once_per_episode() {
        let cfg = HotspotConfig {
            grace_ms: 5_000,
            ..Default::default()
        };
        let rates = [1000.0, 10.0, 10.0, 10.0, 10.0, 10.0];
        assert!(is_over(&cfg, rates[0], &rates));
        assert!(!is_over(&cfg, rates[1], &rates));
        let mut st = HotState::default();
        assert_eq!(step(&cfg, &mut st, 0, true), None);
        assert_eq!(step(&cfg, &mut st, 4_999, true), None);
        assert_eq!(step(&cfg, &mut st, 5_000, true), Some(HotEvent::Became));
        assert_eq!(step(&cfg, &mut st, 9_000, true), None);
        assert!(st.hot);
        assert_eq!(step(&cfg, &mut st, 10_000, false), Some(HotEvent::Cooled));
        assert_eq!(step(&cfg, &mut st, 11_000, false), None);
        // A blip shorter than the grace period is not an episode.
        assert_eq!(step(&cfg, &mut st, 12_000, true), None);
        assert_eq!(step(&cfg, &mut st, 13_000, false), None);
        assert!(!st.hot);
    }

    #[test]
    fn even_or_idle_load_is_never_over() {
        let cfg = HotspotConfig::default();
        let even = [500.0; 16];
        assert!(even.iter().all(|r| !is_over(&cfg, *r, &even)));
        let idle = [50.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        assert!(!is_over(&cfg, idle[0], &idle));
    }
}
