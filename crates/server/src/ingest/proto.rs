//! The binary ingest protocol (spec: `formats/ingest.md`): the client's
//! handshake and data frames, the server's responses. Pure encode/decode,
//! no I/O; every decoder checks lengths, limits and checksums and never
//! panics on bytes from outside.

use telestore_engine::engine::Durability;
use telestore_engine::error::{Error, Result};
use telestore_engine::schema::{FieldType, TableSchema};
use telestore_engine::util::bin::{crc, le_u32, BinReader, BinWriter};

/// The handshake's magic.
pub const HANDSHAKE_MAGIC: [u8; 4] = *b"TSIH";
/// A data frame's magic.
pub const FRAME_MAGIC: [u8; 4] = *b"TSIF";
/// A response's magic.
pub const RESPONSE_MAGIC: [u8; 4] = *b"TSIR";
/// The protocol version this side speaks (formats/ingest.md): 2 added the
/// `invalid` error code.
pub const PROTOCOL_VERSION: u16 = 2;
/// The oldest version a server still accepts (its clients get
/// `row_count_mismatch` where version 2 says `invalid`).
pub const PROTOCOL_VERSION_MIN: u16 = 1;
/// Fixed part of a handshake before its variable fields.
pub const HANDSHAKE_FIXED_LEN: usize = 8;
/// Largest handshake body (table name + token + lengths).
pub const HANDSHAKE_BODY_MAX: usize = 4096;
/// Bytes of a data frame's header.
pub const FRAME_HEADER_LEN: usize = 28;
/// Bytes of a response's header.
pub const RESPONSE_HEADER_LEN: usize = 16;
/// Largest frame payload the server accepts (rows × row width).
pub const FRAME_PAYLOAD_MAX: usize = 16 << 20;
/// Largest response payload.
pub const RESPONSE_PAYLOAD_MAX: usize = 1 << 20;
/// Timestamps accepted over the wire: 1970-01-01T00:00:00Z ..=
/// 9999-12-31T23:59:59.999Z, in ms (the engine's own range).
pub use telestore_engine::schema::batch::{TS_MAX, TS_MIN};

/// What a client sends first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handshake {
    /// The protocol version the client speaks.
    pub version: u16,
    /// The durability of every frame of the connection.
    pub durability: Durability,
    /// The table written.
    pub table: String,
    /// The token (empty: none).
    pub token: String,
}

fn durability_code(d: Durability) -> u8 {
    match d {
        Durability::Sync => 0,
        Durability::Async => 1,
        Durability::Skip => 2,
    }
}

fn durability_of(c: u8) -> Option<Durability> {
    match c {
        0 => Some(Durability::Sync),
        1 => Some(Durability::Async),
        2 => Some(Durability::Skip),
        _ => None,
    }
}

impl Handshake {
    /// `magic | version u16 | durability u8 | 0 u8 | body_len u32 |
    /// body_crc u32 | body: table (u16 len + UTF-8) | token (u16 len +
    /// UTF-8)`.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = BinWriter::new();
        body.str(&self.table).str(&self.token);
        let body = body.into_inner();
        let mut out = HANDSHAKE_MAGIC.to_vec();
        out.extend_from_slice(&self.version.to_le_bytes());
        out.push(durability_code(self.durability));
        out.push(0);
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc(&body).to_le_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Check the fixed part (the first 16 bytes); returns the body length.
    pub fn decode_head(b: &[u8; 16]) -> std::result::Result<(u16, u8, usize, u32), WireError> {
        if b[..4] != HANDSHAKE_MAGIC {
            return Err(WireError::fatal(
                ErrorCode::BadMagic,
                "not a telestore ingest handshake",
            ));
        }
        let version = u16::from_le_bytes([b[4], b[5]]);
        if !(PROTOCOL_VERSION_MIN..=PROTOCOL_VERSION).contains(&version) {
            return Err(WireError::fatal(
                ErrorCode::UnsupportedVersion,
                format!(
                    "protocol version {version}; this server speaks \
                     {PROTOCOL_VERSION_MIN} to {PROTOCOL_VERSION}"
                ),
            ));
        }
        let len = le_u32(b, 8) as usize;
        if len > HANDSHAKE_BODY_MAX {
            return Err(WireError::fatal(
                ErrorCode::BadHandshake,
                format!("handshake body of {len} bytes (limit {HANDSHAKE_BODY_MAX})"),
            ));
        }
        Ok((version, b[6], len, le_u32(b, 12)))
    }

    /// Decode a whole handshake (head and body).
    pub fn decode(b: &[u8]) -> std::result::Result<Handshake, WireError> {
        let head: &[u8; 16] = b.get(..16).and_then(|h| h.try_into().ok()).ok_or_else(|| {
            WireError::fatal(ErrorCode::BadHandshake, "handshake shorter than 16 bytes")
        })?;
        let (version, dur, len, body_crc) = Self::decode_head(head)?;
        let body = b
            .get(16..16 + len)
            .ok_or_else(|| WireError::fatal(ErrorCode::BadHandshake, "handshake body cut short"))?;
        if crc(body) != body_crc {
            return Err(WireError::fatal(
                ErrorCode::BadChecksum,
                "handshake body checksum mismatch",
            ));
        }
        let durability = durability_of(dur).ok_or_else(|| {
            WireError::fatal(
                ErrorCode::BadHandshake,
                format!("durability code {dur} (0 sync, 1 async, 2 skip)"),
            )
        })?;
        let mut r = BinReader::new(body, "handshake");
        let bad = |e: Error| WireError::fatal(ErrorCode::BadHandshake, e.to_string());
        let table = r.str().map_err(bad)?;
        let token = r.str().map_err(bad)?;
        r.finish().map_err(bad)?;
        Ok(Handshake {
            version,
            durability,
            table,
            token,
        })
    }
}

/// A data frame's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// Bytes of rows that follow.
    pub payload_len: u32,
    /// Rows in them.
    pub rows: u32,
    /// The client's id, echoed in the response.
    pub batch_id: u64,
    /// CRC32C of the payload.
    pub payload_crc: u32,
}

impl FrameHeader {
    /// A header for `payload` (rows × row width bytes).
    pub fn for_payload(batch_id: u64, rows: u32, payload: &[u8]) -> Self {
        FrameHeader {
            payload_len: payload.len() as u32,
            rows,
            batch_id,
            payload_crc: crc(payload),
        }
    }

    /// `magic | payload_len u32 | rows u32 | batch_id u64 | payload_crc
    /// u32 | header_crc u32 (over bytes 0..24)`.
    pub fn encode(&self) -> [u8; FRAME_HEADER_LEN] {
        let mut h = [0u8; FRAME_HEADER_LEN];
        h[..4].copy_from_slice(&FRAME_MAGIC);
        h[4..8].copy_from_slice(&self.payload_len.to_le_bytes());
        h[8..12].copy_from_slice(&self.rows.to_le_bytes());
        h[12..20].copy_from_slice(&self.batch_id.to_le_bytes());
        h[20..24].copy_from_slice(&self.payload_crc.to_le_bytes());
        let c = crc(&h[..24]);
        h[24..28].copy_from_slice(&c.to_le_bytes());
        h
    }

    /// Decode a header. A bad magic or header checksum loses the framing
    /// (fatal); an oversize payload is fatal too (the server will not read
    /// it).
    pub fn decode(h: &[u8; FRAME_HEADER_LEN]) -> std::result::Result<Self, WireError> {
        if h[..4] != FRAME_MAGIC {
            return Err(WireError::fatal(
                ErrorCode::BadMagic,
                "frame magic missing: framing lost",
            ));
        }
        if crc(&h[..24]) != le_u32(h, 24) {
            return Err(WireError::fatal(
                ErrorCode::BadChecksum,
                "frame header checksum mismatch: framing lost",
            ));
        }
        let f = FrameHeader {
            payload_len: le_u32(h, 4),
            rows: le_u32(h, 8),
            batch_id: u64::from_le_bytes(h[12..20].try_into().expect("8 bytes")),
            payload_crc: le_u32(h, 20),
        };
        if f.payload_len as usize > FRAME_PAYLOAD_MAX {
            let msg = format!(
                "frame of {} bytes (limit {FRAME_PAYLOAD_MAX})",
                f.payload_len
            );
            return Err(WireError::fatal(ErrorCode::FrameTooLarge, msg).batch(f.batch_id));
        }
        Ok(f)
    }

    /// Check the payload against the header and the table's row layout;
    /// these errors reject the frame but keep the connection.
    pub fn check_payload(
        &self,
        payload: &[u8],
        row_width: usize,
    ) -> std::result::Result<(), WireError> {
        let fail = |code, msg: String| Err(WireError::frame(code, msg).batch(self.batch_id));
        if crc(payload) != self.payload_crc {
            return fail(ErrorCode::BadChecksum, "payload checksum mismatch".into());
        }
        if self.rows == 0 || payload.len() != self.rows as usize * row_width {
            return fail(
                ErrorCode::RowCountMismatch,
                format!(
                    "{} rows declared, {} bytes sent, row width {row_width}",
                    self.rows,
                    payload.len()
                ),
            );
        }
        for (i, row) in payload.chunks_exact(row_width).enumerate() {
            let ts = i64::from_le_bytes(row[8..16].try_into().expect("8 bytes"));
            if !(TS_MIN..=TS_MAX).contains(&ts) {
                return fail(
                    ErrorCode::TimestampOutOfRange,
                    format!("row {i}: timestamp {ts} ms outside {TS_MIN}..={TS_MAX} (1970..9999)"),
                );
            }
        }
        Ok(())
    }
}

/// Error codes of error responses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum ErrorCode {
    /// The handshake or frame magic is wrong (for a frame: framing lost).
    BadMagic = 1,
    /// The handshake's version is not one this server speaks.
    UnsupportedVersion = 2,
    /// The handshake body is malformed, too long, or did not come in time.
    BadHandshake = 3,
    /// The handshake's table does not exist.
    UnknownTable = 4,
    /// The token is wrong, missing or read-only.
    AuthFailed = 5,
    /// A frame's payload is over the limit.
    FrameTooLarge = 6,
    /// A CRC does not match.
    BadChecksum = 7,
    /// `rows` is 0 or does not match the payload's length.
    RowCountMismatch = 8,
    /// A row's timestamp is outside 1970..9999.
    TimestampOutOfRange = 9,
    /// The store stalls writes: retry later.
    Busy = 10,
    /// The store stopped its write path or is closing.
    Unavailable = 11,
    /// Anything else.
    Internal = 12,
    /// The engine refused the frame's rows (version 2 on).
    Invalid = 13,
}

impl ErrorCode {
    /// Every code, in code order.
    pub const ALL: [ErrorCode; 13] = {
        use ErrorCode::*;
        [
            BadMagic,
            UnsupportedVersion,
            BadHandshake,
            UnknownTable,
            AuthFailed,
            FrameTooLarge,
            BadChecksum,
            RowCountMismatch,
            TimestampOutOfRange,
            Busy,
            Unavailable,
            Internal,
            Invalid,
        ]
    };

    /// The code of a number, if it is one.
    pub fn from_u16(c: u16) -> Option<Self> {
        Self::ALL.into_iter().find(|x| *x as u16 == c)
    }
    /// The name used in logs and metrics.
    pub fn name(self) -> &'static str {
        use ErrorCode::*;
        match self {
            BadMagic => "bad_magic",
            UnsupportedVersion => "unsupported_version",
            BadHandshake => "bad_handshake",
            UnknownTable => "unknown_table",
            AuthFailed => "auth_failed",
            FrameTooLarge => "frame_too_large",
            BadChecksum => "bad_checksum",
            RowCountMismatch => "row_count_mismatch",
            TimestampOutOfRange => "timestamp_out_of_range",
            Busy => "busy",
            Unavailable => "unavailable",
            Internal => "internal",
            Invalid => "invalid",
        }
    }
}

/// An error to send: the code, whether the connection closes after it,
/// the batch it refers to (0 for none) and a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireError {
    /// What went wrong.
    pub code: ErrorCode,
    /// Whether the server closes the connection after it.
    pub fatal: bool,
    /// The frame it is about (0: none).
    pub batch_id: u64,
    /// The message (at most 1,000 chars on the wire).
    pub message: String,
}

impl WireError {
    /// An error that closes the connection.
    pub fn fatal(code: ErrorCode, message: impl Into<String>) -> Self {
        WireError {
            code,
            fatal: true,
            batch_id: 0,
            message: message.into(),
        }
    }
    /// An error about one frame; the connection stays.
    pub fn frame(code: ErrorCode, message: impl Into<String>) -> Self {
        WireError {
            fatal: false,
            ..Self::fatal(code, message)
        }
    }
    /// About frame `id`.
    pub fn batch(mut self, id: u64) -> Self {
        self.batch_id = id;
        self
    }
}

/// A server response.
#[derive(Clone, Debug, PartialEq)]
pub enum Response {
    /// The handshake was accepted: the table's layout.
    Ready {
        /// Bytes per row.
        row_width: u32,
        /// A hash of the field layout the client checks.
        layout_id: u32,
        /// The largest frame payload the server reads.
        max_frame_bytes: u32,
        /// The table's fields.
        fields: Vec<(String, FieldType)>,
    },
    /// A frame was applied.
    Ack {
        /// The frame acknowledged.
        batch_id: u64,
        /// The durability it was applied with.
        durability: Durability,
        /// The sequence number of its first row.
        first_seq: u64,
        /// Rows applied.
        rows: u32,
    },
    /// The frame or handshake was refused.
    Error(WireError),
}

const KIND_READY: u8 = 1;
const KIND_ACK: u8 = 2;
const KIND_ERROR: u8 = 3;

impl Response {
    /// The `Ready` response for a table.
    pub fn ready(schema: &TableSchema) -> Self {
        Response::Ready {
            row_width: schema.row_width() as u32,
            layout_id: schema.layout_id(),
            max_frame_bytes: FRAME_PAYLOAD_MAX as u32,
            fields: schema
                .fields
                .iter()
                .map(|f| (f.name.clone(), f.ty))
                .collect(),
        }
    }

    /// `magic | kind u8 | 0 u8[3] | payload_len u32 | payload_crc u32 |
    /// payload`.
    pub fn encode(&self) -> Vec<u8> {
        let mut p = BinWriter::new();
        let kind = match self {
            Response::Ready {
                row_width,
                layout_id,
                max_frame_bytes,
                fields,
            } => {
                p.u32(*row_width).u32(*layout_id).u32(*max_frame_bytes);
                p.u16(fields.len() as u16);
                for (name, ty) in fields {
                    p.str(name).u8(ty.code());
                }
                KIND_READY
            }
            Response::Ack {
                batch_id,
                durability,
                first_seq,
                rows,
            } => {
                p.u64(*batch_id).u8(durability_code(*durability));
                p.u64(*first_seq).u32(*rows);
                KIND_ACK
            }
            Response::Error(e) => {
                p.u64(e.batch_id).u16(e.code as u16).u8(e.fatal as u8);
                let msg: String = e.message.chars().take(1000).collect();
                p.str(&msg);
                KIND_ERROR
            }
        };
        let p = p.into_inner();
        let mut out = RESPONSE_MAGIC.to_vec();
        out.extend_from_slice(&[kind, 0, 0, 0]);
        out.extend_from_slice(&(p.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc(&p).to_le_bytes());
        out.extend_from_slice(&p);
        out
    }

    /// Check a response header; returns (kind, payload length, crc).
    pub fn decode_head(h: &[u8; RESPONSE_HEADER_LEN]) -> Result<(u8, usize, u32)> {
        if h[..4] != RESPONSE_MAGIC {
            return Err(Error::decode("ingest response", "bad magic"));
        }
        let len = le_u32(h, 8) as usize;
        if len > RESPONSE_PAYLOAD_MAX {
            return Err(Error::decode("ingest response", format!("{len} bytes")));
        }
        Ok((h[4], len, le_u32(h, 12)))
    }

    /// Decode a response payload of `kind`.
    pub fn decode_payload(kind: u8, p: &[u8], expected_crc: u32) -> Result<Self> {
        if crc(p) != expected_crc {
            return Err(Error::decode("ingest response", "checksum mismatch"));
        }
        let mut r = BinReader::new(p, "ingest response");
        let resp = match kind {
            KIND_READY => {
                let (row_width, layout_id, max_frame_bytes) = (r.u32()?, r.u32()?, r.u32()?);
                let n = r.u16()?;
                let mut fields = Vec::with_capacity(n.into());
                for _ in 0..n {
                    let name = r.str()?;
                    let code = r.u8()?;
                    let ty = FieldType::from_code(code)?;
                    fields.push((name, ty));
                }
                Response::Ready {
                    row_width,
                    layout_id,
                    max_frame_bytes,
                    fields,
                }
            }
            KIND_ACK => {
                let batch_id = r.u64()?;
                let d = r.u8()?;
                let durability = durability_of(d)
                    .ok_or_else(|| Error::decode("ingest response", format!("durability {d}")))?;
                Response::Ack {
                    batch_id,
                    durability,
                    first_seq: r.u64()?,
                    rows: r.u32()?,
                }
            }
            KIND_ERROR => {
                let batch_id = r.u64()?;
                let c = r.u16()?;
                let code = ErrorCode::from_u16(c)
                    .ok_or_else(|| Error::decode("ingest response", format!("error code {c}")))?;
                let fatal = r.u8()? != 0;
                let message = r.str()?;
                Response::Error(WireError {
                    code,
                    fatal,
                    batch_id,
                    message,
                })
            }
            k => return Err(Error::decode("ingest response", format!("kind {k}"))),
        };
        r.finish()?;
        Ok(resp)
    }

    /// Decode one whole response from the start of `b`; returns it and the
    /// bytes used.
    pub fn decode(b: &[u8]) -> Result<(Self, usize)> {
        let head: &[u8; RESPONSE_HEADER_LEN] = b
            .get(..RESPONSE_HEADER_LEN)
            .and_then(|h| h.try_into().ok())
            .ok_or_else(|| Error::decode("ingest response", "short"))?;
        let (kind, len, c) = Self::decode_head(head)?;
        let p = b
            .get(RESPONSE_HEADER_LEN..RESPONSE_HEADER_LEN + len)
            .ok_or_else(|| Error::decode("ingest response", "cut short"))?;
        Ok((Self::decode_payload(kind, p, c)?, RESPONSE_HEADER_LEN + len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_frames_and_responses_round_trip() {
        let h = Handshake {
            version: PROTOCOL_VERSION,
            durability: Durability::Async,
            table: "readings".into(),
            token: "s3cret".into(),
        };
        assert_eq!(Handshake::decode(&h.encode()).unwrap(), h);
        let mut bad = h.encode();
        bad[20] ^= 1;
        assert_eq!(
            Handshake::decode(&bad).unwrap_err().code,
            ErrorCode::BadChecksum
        );
        let mut v3 = h.encode();
        v3[4] = 3;
        assert_eq!(
            Handshake::decode(&v3).unwrap_err().code,
            ErrorCode::UnsupportedVersion
        );

        let payload = vec![0u8; 48];
        let f = FrameHeader::for_payload(7, 2, &payload);
        assert_eq!(FrameHeader::decode(&f.encode()).unwrap(), f);
        assert!(f.check_payload(&payload, 24).is_ok());
        assert_eq!(
            f.check_payload(&payload, 16).unwrap_err().code,
            ErrorCode::RowCountMismatch
        );
        let mut h2 = f.encode();
        h2[9] ^= 1;
        assert_eq!(
            FrameHeader::decode(&h2).unwrap_err().code,
            ErrorCode::BadChecksum
        );
        let mut late = payload.clone();
        late[8..16].copy_from_slice(&(-5i64).to_le_bytes());
        let f2 = FrameHeader::for_payload(8, 2, &late);
        let e = f2.check_payload(&late, 24).unwrap_err();
        assert_eq!(
            (e.code, e.fatal, e.batch_id),
            (ErrorCode::TimestampOutOfRange, false, 8)
        );

        for r in [
            Response::Ack {
                batch_id: 9,
                durability: Durability::Sync,
                first_seq: 100,
                rows: 2,
            },
            Response::Error(WireError::frame(ErrorCode::Busy, "later").batch(3)),
            Response::Ready {
                row_width: 24,
                layout_id: 5,
                max_frame_bytes: 10,
                fields: vec![("v".into(), FieldType::F64)],
            },
        ] {
            let enc = r.encode();
            assert_eq!(Response::decode(&enc).unwrap(), (r, enc.len()));
        }
    }
}
