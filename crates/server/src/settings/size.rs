//! [`ByteSize`]: a size setting that reads `64MiB` as well as a bare
//! number of MiB (what every `*_mib` key meant before sizes were typed).

use serde::de::{self, Deserializer, Visitor};
use serde::{Serialize, Serializer};
use std::fmt;

const MIB: u64 = 1 << 20;

/// A size in bytes. Parsed from a number of MiB (`64`) or a number with a
/// unit: `B`, `KiB`/`K`, `MiB`/`M`, `GiB`/`G`, `TiB`/`T` (powers of 1024)
/// or `KB`, `MB`, `GB`, `TB` (powers of 1000), a space allowed before it
/// (`64MiB`, `1.5 GiB`, `512KiB`). Written back as the largest binary unit
/// that divides it (`64MiB`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// `n` MiB.
    pub const fn mib(n: u64) -> Self {
        ByteSize(n.saturating_mul(MIB))
    }

    /// The size in bytes.
    pub const fn bytes(self) -> u64 {
        self.0
    }

    /// The size in bytes as a `usize` (saturating on 32-bit targets).
    pub fn bytes_usize(self) -> usize {
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }

    /// Parse `64`, `64MiB`, `1.5 GiB`, … (see [`ByteSize`]).
    pub fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (num, unit) = (&t[..split], t[split..].trim());
        let scale = unit_scale(unit).ok_or_else(|| {
            format!("{text:?}: unknown unit {unit:?} (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)")
        })?;
        if num.is_empty() {
            return Err(format!(
                "{text:?}: a size is a number with an optional unit (64MiB)"
            ));
        }
        if let Ok(n) = num.parse::<u64>() {
            return n
                .checked_mul(scale)
                .map(ByteSize)
                .ok_or_else(|| format!("{text:?}: larger than 2^64 bytes"));
        }
        let f: f64 = num
            .parse()
            .map_err(|_| format!("{text:?}: {num:?} is not a number"))?;
        let bytes = (f * scale as f64).round();
        if !(0.0..1.8e19).contains(&bytes) {
            return Err(format!("{text:?}: larger than 2^64 bytes"));
        }
        Ok(ByteSize(bytes as u64))
    }
}

/// Bytes per unit; the empty unit is MiB.
fn unit_scale(unit: &str) -> Option<u64> {
    let s = match unit.to_ascii_lowercase().as_str() {
        "" | "mib" | "m" => MIB,
        "b" => 1,
        "kib" | "k" => 1 << 10,
        "gib" | "g" => 1 << 30,
        "tib" | "t" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => return None,
    };
    Some(s)
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        for (unit, scale) in [
            ("TiB", 1u64 << 40),
            ("GiB", 1 << 30),
            ("MiB", MIB),
            ("KiB", 1 << 10),
        ] {
            if n != 0 && n.is_multiple_of(scale) {
                return write!(f, "{}{unit}", n / scale);
            }
        }
        write!(f, "{n}B")
    }
}

impl std::str::FromStr for ByteSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ByteSize::parse(s)
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SizeVisitor)
    }
}

struct SizeVisitor;

impl Visitor<'_> for SizeVisitor {
    type Value = ByteSize;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a size: a number of MiB or a string such as \"64MiB\"")
    }
    fn visit_u64<E: de::Error>(self, n: u64) -> Result<ByteSize, E> {
        n.checked_mul(MIB)
            .map(ByteSize)
            .ok_or_else(|| E::custom(format!("{n} MiB is larger than 2^64 bytes")))
    }
    fn visit_i64<E: de::Error>(self, n: i64) -> Result<ByteSize, E> {
        u64::try_from(n)
            .map_err(|_| E::custom(format!("a size cannot be negative ({n})")))
            .and_then(|n| self.visit_u64(n))
    }
    fn visit_f64<E: de::Error>(self, n: f64) -> Result<ByteSize, E> {
        ByteSize::parse(&n.to_string()).map_err(E::custom)
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<ByteSize, E> {
        ByteSize::parse(s).map_err(E::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::ByteSize;

    #[test]
    fn parses_units_and_bare_mib() {
        for (text, bytes) in [
            ("64", 64 << 20),
            ("64MiB", 64 << 20),
            ("64 MiB", 64 << 20),
            ("1.5GiB", 3 << 29),
            ("512KiB", 512 << 10),
            ("512k", 512 << 10),
            ("4096B", 4096),
            ("1GB", 1_000_000_000),
            ("0", 0),
            ("2TiB", 2 << 40),
        ] {
            assert_eq!(ByteSize::parse(text), Ok(ByteSize(bytes)), "{text}");
        }
        for bad in [
            "",
            "MiB",
            "64 parsecs",
            "-1",
            "1.2.3MiB",
            "99999999999999TiB",
        ] {
            assert!(ByteSize::parse(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn displays_the_largest_exact_unit_and_reads_it_back() {
        for (bytes, text) in [
            (64 << 20, "64MiB"),
            (3 << 29, "1536MiB"),
            (4 << 30, "4GiB"),
            (1000, "1000B"),
            (0, "0B"),
        ] {
            assert_eq!(ByteSize(bytes).to_string(), text);
            assert_eq!(ByteSize::parse(text), Ok(ByteSize(bytes)));
        }
    }

    #[test]
    fn toml_takes_numbers_as_mib_and_strings_with_units() {
        #[derive(serde::Deserialize)]
        struct T {
            a: ByteSize,
            b: ByteSize,
        }
        let t: T = toml::from_str("a = 64\nb = \"1GiB\"").unwrap();
        assert_eq!((t.a, t.b), (ByteSize::mib(64), ByteSize(1 << 30)));
        assert!(toml::from_str::<T>("a = -1\nb = 1").is_err());
        assert!(toml::from_str::<T>("a = \"many\"\nb = 1").is_err());
    }
}
