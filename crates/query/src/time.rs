//! Time arguments: RFC 3339, epoch with a unit, or relative to now.
//!
//! The engine stores milliseconds. Every accepted form is converted to
//! milliseconds by rounding *up* (ceiling), which keeps both ends exact
//! for a half-open window `[from, to)`: a row at `t` ms is inside exactly
//! when `ceil(from) <= t < ceil(to)`, whatever unit the user wrote.

use telestore_engine::error::{Error, Result};

/// Parse a time argument into epoch milliseconds.
///
/// Accepted: `2026-12-03T10:00:00Z` (RFC 3339, any offset, fractions
/// down to nanoseconds), `1700000000s` / `…ms` / `…us` / `…ns` (epoch with
/// a unit), `now`, and `now` plus or minus a duration: `-1h`, `now-15m`,
/// `+30s`, `-7d`. `what` names the argument in the error.
pub fn parse_time(what: &'static str, s: &str, now_ms: i64) -> Result<i64> {
    let s = s.trim();
    let bad = |msg: String| Error::invalid(what, format!("{s:?}: {msg}"));
    if s.is_empty() {
        return Err(bad("empty time".into()));
    }
    if s == "now" {
        return Ok(now_ms);
    }
    let rel = s.strip_prefix("now").unwrap_or(s);
    if let Some(sign) = rel.chars().next().filter(|c| *c == '-' || *c == '+') {
        let d = parse_duration_ns(&rel[1..]).map_err(bad)?;
        let d_ms = ceil_div(d, 1_000_000);
        let t = if sign == '-' {
            now_ms.checked_sub(d_ms)
        } else {
            now_ms.checked_add(d_ms)
        };
        return t.ok_or_else(|| bad("out of range".into()));
    }
    if s.contains('T') || s.contains(' ') && s.contains(':') {
        let t = chrono::DateTime::parse_from_rfc3339(s).map_err(|e| {
            bad(format!(
                "not an RFC 3339 time ({e}); e.g. 2026-12-03T10:00:00Z"
            ))
        })?;
        let ns = i128::from(t.timestamp()) * 1_000_000_000 + i128::from(t.timestamp_subsec_nanos());
        return ns_to_ms(ns).ok_or_else(|| bad("out of range".into()));
    }
    let digits = s
        .find(|c: char| !(c.is_ascii_digit() || c == '-'))
        .ok_or_else(|| bad("an epoch needs a unit: s, ms, us or ns (e.g. 1700000000s)".into()))?;
    let (num, unit) = s.split_at(digits);
    let n: i128 = num
        .parse::<i64>()
        .map_err(|_| bad("not a number before the unit".into()))?
        .into();
    let per_ns: i128 = match unit {
        "s" => 1_000_000_000,
        "ms" => 1_000_000,
        "us" | "µs" => 1_000,
        "ns" => 1,
        _ => {
            return Err(bad(format!(
                "unknown unit {unit:?}: use s, ms, us or ns, RFC 3339, or now/-1h"
            )))
        }
    };
    ns_to_ms(n * per_ns).ok_or_else(|| bad("out of range".into()))
}

fn ns_to_ms(ns: i128) -> Option<i64> {
    i64::try_from(ns.div_euclid(1_000_000) + i128::from(ns.rem_euclid(1_000_000) != 0)).ok()
}

fn ceil_div(a: u64, b: u64) -> i64 {
    i64::try_from(a.div_ceil(b)).unwrap_or(i64::MAX)
}

/// Parse a positive duration such as `10m`, `1h30m`, `250ms`, `7d` into
/// milliseconds (`what` names the argument in the error).
pub fn parse_every(what: &'static str, s: &str) -> Result<i64> {
    let ns =
        parse_duration_ns(s.trim()).map_err(|m| Error::invalid(what, format!("{s:?}: {m}")))?;
    if ns == 0 || ns % 1_000_000 != 0 {
        return Err(Error::invalid(
            what,
            format!("{s:?}: must be a whole, positive number of milliseconds"),
        ));
    }
    i64::try_from(ns / 1_000_000).map_err(|_| Error::invalid(what, format!("{s:?}: too long")))
}

/// `1h30m`, `10s`, `500ms`, `2w`: one or more number+unit pairs, in
/// nanoseconds. Units: ns, us, ms, s, m, h, d, w.
fn parse_duration_ns(s: &str) -> std::result::Result<u64, String> {
    if s.is_empty() {
        return Err("empty duration; e.g. 1h, 15m, 7d".into());
    }
    let mut total: u64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let n_end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if n_end == 0 {
            return Err(format!("expected a number at {rest:?}; e.g. 1h, 15m, 7d"));
        }
        let n: u64 = rest[..n_end]
            .parse()
            .map_err(|_| "number too large".to_string())?;
        rest = &rest[n_end..];
        let u_end = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let per: u64 = match &rest[..u_end] {
            "ns" => 1,
            "us" | "µs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "d" => 86_400_000_000_000,
            "w" => 604_800_000_000_000,
            "" => return Err(format!("{n} has no unit (ns, us, ms, s, m, h, d, w)")),
            u => return Err(format!("unknown unit {u:?} (ns, us, ms, s, m, h, d, w)")),
        };
        rest = &rest[u_end..];
        total = n
            .checked_mul(per)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| "duration too long".to_string())?;
    }
    Ok(total)
}

/// Format epoch milliseconds as RFC 3339 UTC with milliseconds.
pub fn format_ms(ms: i64) -> String {
    match chrono::DateTime::from_timestamp_millis(ms) {
        Some(t) => t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
        None => format!("{ms}ms"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_764_000_000_000;

    #[test]
    fn forms() {
        let p = |s| parse_time("--from", s, NOW).unwrap();
        assert_eq!(p("now"), NOW);
        assert_eq!(p("-1h"), NOW - 3_600_000);
        assert_eq!(p("now-15m"), NOW - 900_000);
        assert_eq!(p("+30s"), NOW + 30_000);
        assert_eq!(p("-1h30m"), NOW - 5_400_000);
        assert_eq!(p("1700000000s"), 1_700_000_000_000);
        assert_eq!(p("1700000000123ms"), 1_700_000_000_123);
        assert_eq!(p("1700000000123456us"), 1_700_000_000_124);
        assert_eq!(p("1700000000123000000ns"), 1_700_000_000_123);
        assert_eq!(p("1700000000123000001ns"), 1_700_000_000_124);
        assert_eq!(p("-5ms"), NOW - 5);
        assert_eq!(p("2023-11-14T22:13:20Z"), 1_700_000_000_000);
        assert_eq!(p("2023-11-14T23:13:20.5+01:00"), 1_700_000_000_500);
        assert_eq!(p("1970-01-01T00:00:00.000000001Z"), 1);
    }

    #[test]
    fn errors_name_the_argument() {
        for s in [
            "",
            "yesterday",
            "1700000000",
            "12parsecs",
            "-1",
            "-h",
            "2023-13-01T00:00:00Z",
            "now-",
        ] {
            let e = parse_time("--to", s, NOW).unwrap_err().to_string();
            assert!(e.contains("--to"), "{s}: {e}");
        }
    }

    #[test]
    fn every() {
        assert_eq!(parse_every("--every", "10m").unwrap(), 600_000);
        assert_eq!(parse_every("--every", "1h30m").unwrap(), 5_400_000);
        assert!(parse_every("--every", "0s").is_err());
        assert!(parse_every("--every", "10us").is_err());
        assert!(parse_every("--every", "ten").is_err());
    }

    #[test]
    fn format() {
        assert_eq!(format_ms(1_700_000_000_500), "2023-11-14T22:13:20.500Z");
    }
}
