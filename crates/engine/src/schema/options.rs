//! Table options and their parsing (`zstd:3`, `30d`, ...).

use crate::error::{Error, Result};
use crate::util::bin::{BinReader, BinWriter};

/// Block compression codec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// No compression.
    None,
    /// Snappy (raw block format).
    Snappy,
    /// Zstandard at the given level (1..=22).
    Zstd(i32),
}

impl Compression {
    /// Default zstd level.
    pub const ZSTD_LEVEL_DEFAULT: i32 = 3;
    /// Highest zstd level a flush uses. Flushes are on the ingest path's
    /// critical loop (memstores wait for them); level 1 compresses about
    /// twice as fast as 3 and decodes the same way. Compactions rewrite
    /// at the table's own level, so long-lived files get its ratio.
    pub const ZSTD_LEVEL_FLUSH_MAX: i32 = 1;

    /// The codec a flush writes with: the table's, at most
    /// [`Compression::ZSTD_LEVEL_FLUSH_MAX`] for zstd.
    pub fn for_flush(self) -> Self {
        match self {
            Compression::Zstd(l) => Compression::Zstd(l.min(Self::ZSTD_LEVEL_FLUSH_MAX)),
            other => other,
        }
    }

    /// Codec code as stored in block headers: 0 none, 1 snappy, 2 zstd.
    pub fn code(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Snappy => 1,
            Compression::Zstd(_) => 2,
        }
    }

    /// The form [`Compression::parse`] reads.
    pub fn name(self) -> String {
        match self {
            Compression::None => "none".into(),
            Compression::Snappy => "snappy".into(),
            Compression::Zstd(l) => format!("zstd:{l}"),
        }
    }

    /// Parse `none`, `snappy`, `zstd` or `zstd:LEVEL`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "none" => Ok(Compression::None),
            "snappy" => Ok(Compression::Snappy),
            "zstd" => Ok(Compression::Zstd(Self::ZSTD_LEVEL_DEFAULT)),
            _ => {
                let level = s
                    .strip_prefix("zstd:")
                    .and_then(|l| l.parse::<i32>().ok())
                    .ok_or_else(|| {
                        Error::invalid(
                            "compression",
                            format!("{s:?} (expected none, snappy, zstd or zstd:LEVEL)"),
                        )
                    })?;
                let c = Compression::Zstd(level);
                c.validate()?;
                Ok(c)
            }
        }
    }

    fn validate(self) -> Result<()> {
        if let Compression::Zstd(l) = self {
            if !(1..=22).contains(&l) {
                return Err(Error::invalid(
                    "compression",
                    format!("zstd level {l} outside 1..=22"),
                ));
            }
        }
        Ok(())
    }
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Compression::None => write!(f, "none"),
            Compression::Snappy => write!(f, "snappy"),
            Compression::Zstd(l) => write!(f, "zstd:{l}"),
        }
    }
}

/// How an HFile's data blocks are laid out (`formats/hfile.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BlockEncoding {
    /// Whole cells one after the other, then the table's compression.
    Rows,
    /// Keys as runs, each field its own column with a numeric codec (the
    /// default for new tables: about 6× smaller, faster scans and
    /// exports; see `benches/RESULTS.md`).
    #[default]
    Columnar,
}

impl BlockEncoding {
    /// Code in the info section and the manifest: 0 rows, 1 columnar.
    pub fn code(self) -> u8 {
        match self {
            BlockEncoding::Rows => 0,
            BlockEncoding::Columnar => 1,
        }
    }

    /// A codec by its code in the manifest and HFiles.
    pub fn from_code(c: u8) -> Result<Self> {
        match c {
            0 => Ok(BlockEncoding::Rows),
            1 => Ok(BlockEncoding::Columnar),
            c => Err(Error::decode("block encoding", format!("code {c}"))),
        }
    }

    /// `none`, `snappy` or `zstd`.
    pub fn name(self) -> &'static str {
        match self {
            BlockEncoding::Rows => "rows",
            BlockEncoding::Columnar => "columnar",
        }
    }

    /// Parse `rows` or `columnar`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "rows" => Ok(BlockEncoding::Rows),
            "columnar" => Ok(BlockEncoding::Columnar),
            _ => Err(Error::invalid(
                "encoding",
                format!("{s:?} (expected rows or columnar)"),
            )),
        }
    }
}

impl std::fmt::Display for BlockEncoding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Per-table options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableOptions {
    /// Retention by the cell's own timestamp, in milliseconds.
    pub ttl_ms: Option<i64>,
    /// Versions kept per (device, ts); reads return the newest by default.
    pub max_versions: u32,
    /// The block compression.
    pub compression: Compression,
    /// Target uncompressed size of an HFile data block.
    pub block_size_bytes: u32,
    /// Write a bloom filter into each HFile.
    pub bloom: bool,
    /// Pre-split region count (used by the regions feature).
    pub regions: u32,
    /// Layout of the data blocks compactions write (flushes always write
    /// rows blocks; see `engine::flush::Output`).
    pub encoding: BlockEncoding,
}

/// Smallest allowed block size.
pub const BLOCK_SIZE_MIN: u32 = 1024;
/// Largest allowed block size (uncompressed).
pub const BLOCK_SIZE_MAX: u32 = 16 << 20;
/// Most versions per cell.
pub const VERSIONS_MAX: u32 = 1 << 16;
/// Most pre-split regions.
pub const REGIONS_MAX: u32 = 65_536;

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            ttl_ms: None,
            max_versions: 1,
            compression: Compression::Zstd(Compression::ZSTD_LEVEL_DEFAULT),
            block_size_bytes: 64 * 1024,
            bloom: true,
            regions: 16,
            encoding: BlockEncoding::Columnar,
        }
    }
}

impl TableOptions {
    /// Cells older than this are expired at `now_ms` (TTL); `None` keeps
    /// everything.
    pub fn ttl_cutoff(&self, now_ms: i64) -> Option<i64> {
        self.ttl_ms.map(|ttl| now_ms.saturating_sub(ttl))
    }

    /// Check every option's range.
    pub fn validate(&self) -> Result<()> {
        if let Some(t) = self.ttl_ms {
            if t <= 0 {
                return Err(Error::invalid("ttl", format!("{t} ms must be positive")));
            }
        }
        if !(1..=VERSIONS_MAX).contains(&self.max_versions) {
            return Err(Error::invalid(
                "max_versions",
                format!("{} outside 1..={VERSIONS_MAX}", self.max_versions),
            ));
        }
        if !(BLOCK_SIZE_MIN..=BLOCK_SIZE_MAX).contains(&self.block_size_bytes) {
            return Err(Error::invalid(
                "block_size_bytes",
                format!(
                    "{} outside {BLOCK_SIZE_MIN}..={BLOCK_SIZE_MAX}",
                    self.block_size_bytes
                ),
            ));
        }
        if !(1..=REGIONS_MAX).contains(&self.regions) {
            return Err(Error::invalid(
                "regions",
                format!("{} outside 1..={REGIONS_MAX}", self.regions),
            ));
        }
        self.compression.validate()
    }

    /// The options as the manifest records them (formats/manifest.md).
    pub fn encode(&self, w: &mut BinWriter) {
        w.i64(self.ttl_ms.unwrap_or(0))
            .u32(self.max_versions)
            .u8(self.compression.code());
        let level = match self.compression {
            Compression::Zstd(l) => l as u32,
            _ => 0,
        };
        w.u32(level)
            .u32(self.block_size_bytes)
            .u8(self.bloom as u8)
            .u32(self.regions)
            .u8(self.encoding.code());
    }

    /// Decode options written by a manifest of `manifest_version` (v3 has
    /// no encoding byte: its tables are `rows`).
    pub fn decode(r: &mut BinReader<'_>, manifest_version: u32) -> Result<Self> {
        let ttl = r.i64()?;
        let max_versions = r.u32()?;
        let code = r.u8()?;
        let level = r.u32()? as i32;
        let compression = match code {
            0 => Compression::None,
            1 => Compression::Snappy,
            2 => Compression::Zstd(level),
            c => return Err(Error::decode("table options", format!("codec {c}"))),
        };
        Ok(TableOptions {
            ttl_ms: (ttl != 0).then_some(ttl),
            max_versions,
            compression,
            block_size_bytes: r.u32()?,
            bloom: r.u8()? != 0,
            regions: r.u32()?,
            encoding: match manifest_version {
                ..=3 => BlockEncoding::Rows,
                _ => BlockEncoding::from_code(r.u8()?)?,
            },
        })
    }
}

/// Parse a duration such as `500ms`, `45s`, `90m`, `12h`, `30d`, `2w` into ms.
pub fn parse_duration_ms(s: &str) -> Result<i64> {
    let bad = || {
        Error::invalid(
            "duration",
            format!("{s:?} (expected a number and a unit: ms, s, m, h, d or w)"),
        )
    };
    let split = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (num, unit) = s.split_at(split);
    let n: i64 = num.parse().map_err(|_| bad())?;
    let mult: i64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "w" => 7 * 86_400_000,
        _ => return Err(bad()),
    };
    n.checked_mul(mult).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flushes_cap_the_zstd_level_and_keep_other_codecs() {
        assert_eq!(Compression::Zstd(3).for_flush(), Compression::Zstd(1));
        assert_eq!(Compression::Zstd(19).for_flush(), Compression::Zstd(1));
        assert_eq!(Compression::Zstd(1).for_flush(), Compression::Zstd(1));
        assert_eq!(Compression::Snappy.for_flush(), Compression::Snappy);
        assert_eq!(Compression::None.for_flush(), Compression::None);
    }

    #[test]
    fn parses() {
        assert_eq!(Compression::parse("zstd").unwrap(), Compression::Zstd(3));
        assert_eq!(Compression::parse("zstd:9").unwrap(), Compression::Zstd(9));
        assert_eq!(Compression::parse("snappy").unwrap(), Compression::Snappy);
        assert!(Compression::parse("zstd:99").is_err());
        assert!(Compression::parse("lz4").is_err());
        assert_eq!(parse_duration_ms("30d").unwrap(), 30 * 86_400_000);
        assert_eq!(parse_duration_ms("500ms").unwrap(), 500);
        for bad in ["", "d", "10", "10y", "-1d", "99999999999999999999d"] {
            assert!(parse_duration_ms(bad).is_err(), "{bad}");
        }
    }
}
