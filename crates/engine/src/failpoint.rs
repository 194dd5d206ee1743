//! Crash-test fail points (tikv/fail-rs's pattern): named places in the
//! split, merge and compaction code where a crash test stops the process
//! and `SIGKILL`s it. They exist only with the `failpoints` feature, which
//! the tests turn on (the root package's dev-dependency); in a build
//! without it [`pause_at`] is an empty inline function and no release
//! binary reads `TELESTORE_PAUSE_AT`.

/// With `failpoints`: when `TELESTORE_PAUSE_AT` names `point`, print
/// `PAUSED <point>` to stderr and stop here for good (the test then kills
/// the process). Costs one load otherwise.
#[cfg(feature = "failpoints")]
pub fn pause_at(point: &str) {
    static AT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let at = AT.get_or_init(|| std::env::var("TELESTORE_PAUSE_AT").ok());
    if at.as_deref() == Some(point) {
        eprintln!("PAUSED {point}");
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
}

/// Without `failpoints`: nothing.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn pause_at(_point: &str) {}
