//! One line of InfluxDB line protocol, as `lineproto` matches it to a
//! table. Plain lines — no escapes, no quoted strings, single spaces, the
//! shape every client sends for numeric telemetry — are split here
//! without allocating; anything else goes to InfluxData's own parser
//! (`influxdb-line-protocol`), which also words every error. The fast
//! path accepts exactly what that parser accepts for the lines it takes
//! (checked against it by a seeded differential test); when in doubt it
//! declines and the parser decides.

use influxdb_line_protocol::{parse_lines, FieldValue};
use std::borrow::Cow;
use std::fmt;

/// A field value.
#[derive(Clone, Debug, PartialEq)]
pub enum Val<'a> {
    /// A float (`1.5`).
    F64(f64),
    /// A signed integer (`5i`).
    I64(i64),
    /// An unsigned integer (`5u`).
    U64(u64),
    /// A boolean (`t`, `false`).
    Bool(bool),
    /// A string (`"text"`).
    Str(Cow<'a, str>),
}

impl fmt::Display for Val<'_> {
    /// As line protocol writes it (`1i`, `2u`, `1.5`, `true`, `"s"`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Val::F64(v) => write!(f, "{v}"),
            Val::I64(v) => write!(f, "{v}i"),
            Val::U64(v) => write!(f, "{v}u"),
            Val::Bool(v) => write!(f, "{v}"),
            Val::Str(s) => write!(f, "{s:?}"),
        }
    }
}

/// A parsed line. Reused from line to line (its vectors keep their
/// capacity).
#[derive(Debug, Default, PartialEq)]
pub struct Line<'a> {
    /// The measurement (a table).
    pub measurement: Cow<'a, str>,
    /// The tags, in line order.
    pub tags: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    /// The fields, in line order.
    pub fields: Vec<(Cow<'a, str>, Val<'a>)>,
    /// The timestamp as written (in the request's precision), if any.
    pub timestamp: Option<i64>,
}

impl<'a> Line<'a> {
    /// Parse `text` (one line, trimmed, not empty, not a comment) into
    /// `self`. The error is the parser's description.
    pub fn parse(&mut self, text: &'a str) -> Result<(), String> {
        self.tags.clear();
        self.fields.clear();
        if fast(text, self).is_some() {
            return Ok(());
        }
        self.tags.clear();
        self.fields.clear();
        self.parse_with_crate(text)
    }

    pub(crate) fn parse_with_crate(&mut self, text: &'a str) -> Result<(), String> {
        let parsed = match parse_lines(text).next() {
            Some(Ok(l)) => l,
            Some(Err(e)) => return Err(e.to_string()),
            None => return Err("no line".into()),
        };
        let own = |s: &str| Cow::Owned(s.to_string());
        self.measurement = own(parsed.series.measurement.as_str());
        for (k, v) in parsed.series.tag_set.iter().flatten() {
            self.tags.push((own(k.as_str()), own(v.as_str())));
        }
        for (k, v) in &parsed.field_set {
            let v = match v {
                FieldValue::F64(x) => Val::F64(*x),
                FieldValue::I64(x) => Val::I64(*x),
                FieldValue::U64(x) => Val::U64(*x),
                FieldValue::Boolean(b) => Val::Bool(*b),
                FieldValue::String(s) => Val::Str(own(s.as_str())),
            };
            self.fields.push((own(k.as_str()), v));
        }
        self.timestamp = parsed.timestamp;
        Ok(())
    }
}

/// Characters that make a line not plain: escapes, strings, and
/// separators the parser treats specially.
fn plain(text: &str) -> bool {
    !text
        .bytes()
        .any(|b| matches!(b, b'\\' | b'"' | b'\t' | b'\n' | b'\r' | b'\0'))
}

/// `-?[0-9]+`
fn signed_digits(s: &str) -> bool {
    let d = s.strip_prefix('-').unwrap_or(s);
    !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())
}

/// The parser's float grammar: `-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?`.
fn float_text(s: &str) -> bool {
    let (mant, exp) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let mant_ok = match mant.split_once('.') {
        Some((int, frac)) => {
            signed_digits(int) && !frac.is_empty() && frac.bytes().all(|b| b.is_ascii_digit())
        }
        None => signed_digits(mant),
    };
    let exp_ok = exp.is_none_or(|e| {
        let d = e.strip_prefix(['-', '+']).unwrap_or(e);
        !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())
    });
    mant_ok && exp_ok
}

fn value(s: &str) -> Option<Val<'static>> {
    match s {
        "t" | "T" | "true" | "True" | "TRUE" => return Some(Val::Bool(true)),
        "f" | "F" | "false" | "False" | "FALSE" => return Some(Val::Bool(false)),
        _ => {}
    }
    if let Some(n) = s.strip_suffix('i') {
        return signed_digits(n).then(|| n.parse().ok().map(Val::I64))?;
    }
    if let Some(n) = s.strip_suffix('u') {
        let digits = !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
        return digits.then(|| n.parse().ok().map(Val::U64))?;
    }
    float_text(s).then(|| s.parse().ok().map(Val::F64))?
}

/// `k=v` with a non-empty key and value and no second `=`.
fn pair(s: &str) -> Option<(&str, &str)> {
    let (k, v) = s.split_once('=')?;
    (!k.is_empty() && !v.is_empty() && !v.contains('=')).then_some((k, v))
}

/// The plain-line fast path; `None` declines (the parser decides).
pub(crate) fn fast<'a>(text: &'a str, line: &mut Line<'a>) -> Option<()> {
    if !plain(text) {
        return None;
    }
    let mut parts = text.split(' ');
    let series = parts.next()?;
    let fields = parts.next()?;
    let ts = parts.next();
    if parts.next().is_some() {
        return None;
    }
    let mut series = series.split(',');
    let measurement = series.next().filter(|m| !m.is_empty())?;
    for t in series {
        let (k, v) = pair(t)?;
        line.tags.push((Cow::Borrowed(k), Cow::Borrowed(v)));
    }
    for f in fields.split(',') {
        let (k, v) = pair(f)?;
        line.fields.push((Cow::Borrowed(k), value(v)?));
    }
    line.timestamp = match ts {
        Some(t) if signed_digits(t) => Some(t.parse().ok()?),
        Some(_) => return None,
        None => None,
    };
    line.measurement = Cow::Borrowed(measurement);
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Tokens that exercise the grammar's edges.
    const WORDS: &[&str] = &[
        "m", "cpu", "a", "b", "k", "x y", "a,b", "a=b", "", "\\ ", "é", "1", "-",
    ];
    const VALUES: &[&str] = &[
        "1",
        "-1",
        "1.5",
        "-0.25",
        "1e5",
        "1E-3",
        "2.5e+7",
        "1.",
        ".5",
        "1e",
        "1.5e",
        "--1",
        "1i",
        "-2i",
        "9223372036854775808i",
        "3u",
        "-3u",
        "18446744073709551616u",
        "t",
        "T",
        "true",
        "True",
        "TRUE",
        "tru",
        "f",
        "false",
        "FALSE",
        "\"s\"",
        "\"\"",
        "nan",
        "inf",
        "1x",
        "+1",
        "0x10",
        "1_000",
        "",
    ];
    const STAMPS: &[&str] = &[
        "",
        " 1",
        " -5",
        " 1700000000000",
        " 1.5",
        " x",
        "  2",
        " 1 ",
        " 99999999999999999999",
    ];

    /// Half the time from the first `n` (the well-formed ones), so plenty
    /// of lines are accepted too.
    fn pick<'a>(rng: &mut impl Rng, from: &[&'a str]) -> &'a str {
        let n = if rng.gen() { 4 } else { from.len() };
        from[rng.gen_range(0..n)]
    }

    fn random_line(rng: &mut impl Rng) -> String {
        let mut s = pick(rng, WORDS).to_string();
        for _ in 0..rng.gen_range(0..3) {
            s += &format!(",{}={}", pick(rng, WORDS), pick(rng, WORDS));
        }
        s.push(' ');
        for i in 0..rng.gen_range(1..4) {
            if i > 0 {
                s.push(',');
            }
            s += &format!("{}={}", pick(rng, WORDS), pick(rng, VALUES));
        }
        s + pick(rng, STAMPS)
    }

    /// Whenever the fast path takes a line, the parser reads the same
    /// line; when the parser refuses a line, the fast path declines it.
    #[test]
    fn fast_path_agrees_with_the_parser() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let (mut taken, mut refused) = (0, 0);
        for _ in 0..20_000 {
            let text = random_line(&mut rng);
            let text = text.trim();
            let mut fast_line = Line::default();
            let took = fast(text, &mut fast_line).is_some();
            let mut slow = Line::default();
            match slow.parse_with_crate(text) {
                Ok(()) if took => {
                    taken += 1;
                    assert_eq!(fast_line, slow, "{text:?}");
                }
                Ok(()) => {}
                Err(e) => {
                    refused += 1;
                    assert!(!took, "fast path took {text:?}, the parser said {e}");
                }
            }
        }
        assert!(
            taken > 1_000 && refused > 1_000,
            "{taken} taken, {refused} refused"
        );
    }

    #[test]
    fn plain_telemetry_lines_take_the_fast_path() {
        let text = "readings,device=truck-1,fleet=East latitude=1.5,n=-3i,c=7u,ok=t 1700000000000";
        let mut l = Line::default();
        assert!(fast(text, &mut l).is_some());
        assert_eq!(l.measurement, "readings");
        assert_eq!(l.tags.len(), 2);
        assert_eq!(l.fields[0].1, Val::F64(1.5));
        assert_eq!(l.fields[1].1, Val::I64(-3));
        assert_eq!(l.fields[2].1, Val::U64(7));
        assert_eq!(l.fields[3].1, Val::Bool(true));
        assert_eq!(l.timestamp, Some(1_700_000_000_000));
        // Escapes and strings go to the parser, which handles them.
        let mut l = Line::default();
        assert!(fast(r#"m,device=a\ b s="x""#, &mut l).is_none());
        let mut l = Line::default();
        l.parse(r#"m,device=a\ b s="x""#).unwrap();
        assert_eq!(l.tags[0].1, "a b");
        assert_eq!(l.fields[0].1, Val::Str("x".into()));
    }

    /// 17 significant digits: both paths store the double the text names
    /// (the shortest round-trip text of a stored value reads back as it).
    #[test]
    fn seventeen_digit_floats_are_read_exactly_on_both_paths() {
        for text in [
            "-31871.714327714286",
            "0.30000000000000004",
            "1.7976931348623157e308",
            "5e-324",
            "123456.78901234567",
        ] {
            let want: f64 = text.parse().unwrap();
            assert_eq!(
                want.to_string().parse::<f64>().unwrap().to_bits(),
                want.to_bits()
            );
            let line = format!("m,device=d v={text} 1");
            let mut l = Line::default();
            assert!(fast(&line, &mut l).is_some(), "{line}");
            assert_eq!(l.fields[0].1, Val::F64(want), "fast path, {text}");
            let mut l = Line::default();
            l.parse_with_crate(&line).unwrap();
            assert_eq!(l.fields[0].1, Val::F64(want), "the parser, {text}");
        }
    }
}
