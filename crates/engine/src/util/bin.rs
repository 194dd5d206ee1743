//! Little-endian binary writer/reader used by metadata encodings (manifest
//! records, HFile info). The reader never panics: every read is bounds
//! checked and returns [`Error::Decode`].

use crate::error::{Error, Result};

/// Appends little-endian values to a byte vector.
#[derive(Default, Debug)]
pub struct BinWriter {
    pub buf: Vec<u8>,
}

impl BinWriter {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(v);
        self
    }
    /// A string as `len: u16` then UTF-8 bytes.
    pub fn str(&mut self, s: &str) -> &mut Self {
        debug_assert!(s.len() <= u16::MAX as usize);
        self.u16(s.len() as u16);
        self.bytes(s.as_bytes())
    }
    pub fn into_inner(self) -> Vec<u8> {
        self.buf
    }
}

/// Reads little-endian values from a byte slice with bounds checks.
#[derive(Debug)]
pub struct BinReader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> BinReader<'a> {
    pub fn new(buf: &'a [u8], what: &'static str) -> Self {
        Self { buf, pos: 0, what }
    }
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.remaining() < n {
            return Err(Error::decode(
                self.what,
                format!(
                    "needed {n} bytes at {}, only {} left",
                    self.pos,
                    self.remaining()
                ),
            ));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }
    pub fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    pub fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_le_bytes(self.array()?))
    }
    pub fn str(&mut self) -> Result<String> {
        let n = self.u16()? as usize;
        let b = self.take(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| Error::decode(self.what, "string is not UTF-8"))
    }
    /// Error unless every byte was consumed.
    pub fn finish(&self) -> Result<()> {
        if self.remaining() != 0 {
            return Err(Error::decode(
                self.what,
                format!("{} trailing bytes", self.remaining()),
            ));
        }
        Ok(())
    }
}

/// CRC32C (Castagnoli) of `data`.
pub fn crc(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// Read a little-endian u32 at `off` (caller guarantees bounds).
pub fn le_u32(b: &[u8], off: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[off..off + 4]);
    u32::from_le_bytes(a)
}

/// A little-endian u64 from a slice of exactly 8 bytes (0 otherwise).
pub fn le_u64_slice(b: &[u8]) -> u64 {
    <[u8; 8]>::try_from(b).map_or(0, u64::from_le_bytes)
}

/// Read a little-endian u64 at `off` (caller guarantees bounds).
pub fn le_u64(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_truncation() {
        let mut w = BinWriter::new();
        w.u8(1).u16(2).u32(3).u64(4).i64(-5).str("héllo");
        let b = w.into_inner();
        let mut r = BinReader::new(&b, "test");
        assert_eq!(r.u8().unwrap(), 1);
        assert_eq!(r.u16().unwrap(), 2);
        assert_eq!(r.u32().unwrap(), 3);
        assert_eq!(r.u64().unwrap(), 4);
        assert_eq!(r.i64().unwrap(), -5);
        assert_eq!(r.str().unwrap(), "héllo");
        r.finish().unwrap();
        for cut in 0..b.len() {
            let mut r = BinReader::new(&b[..cut], "test");
            let res = (|| -> Result<()> {
                r.u8()?;
                r.u16()?;
                r.u32()?;
                r.u64()?;
                r.i64()?;
                r.str()?;
                Ok(())
            })();
            assert!(res.is_err(), "cut at {cut} decoded");
        }
    }
}
