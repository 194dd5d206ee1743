//! A small blocking client of the binary ingest protocol (used by the
//! load generator and the tests). Frames may be pipelined: `send` several,
//! then `recv` their responses in order.

use super::proto::{FrameHeader, Handshake, Response, PROTOCOL_VERSION, RESPONSE_HEADER_LEN};
use std::io::{BufReader, BufWriter, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use telestore_engine::engine::Durability;
use telestore_engine::error::{Error, Result};
use telestore_engine::schema::FieldType;

/// A connection that passed its handshake.
pub struct Client {
    rd: BufReader<TcpStream>,
    wr: BufWriter<TcpStream>,
    /// The table's row width and fields, from the server.
    pub row_width: usize,
    /// The table's fields, from the server.
    pub fields: Vec<(String, FieldType)>,
    /// The largest frame payload the server takes.
    pub max_frame_bytes: usize,
}

fn io(e: std::io::Error) -> Error {
    Error::io("<ingest connection>", e)
}

impl Client {
    /// Connect and hand-shake; a server refusal (unknown table, wrong
    /// token, ...) is `Error::InvalidInput` with the server's message.
    pub fn connect(
        addr: impl ToSocketAddrs,
        table: &str,
        durability: Durability,
        token: &str,
    ) -> Result<Client> {
        let s = TcpStream::connect(addr).map_err(io)?;
        s.set_nodelay(true).map_err(io)?;
        let mut c = Client {
            rd: BufReader::with_capacity(64 << 10, s.try_clone().map_err(io)?),
            wr: BufWriter::with_capacity(1 << 20, s),
            row_width: 0,
            fields: Vec::new(),
            max_frame_bytes: 0,
        };
        let hs = Handshake {
            version: PROTOCOL_VERSION,
            durability,
            table: table.to_string(),
            token: token.to_string(),
        };
        c.wr.write_all(&hs.encode()).map_err(io)?;
        c.wr.flush().map_err(io)?;
        match c.recv()? {
            Response::Ready {
                row_width,
                max_frame_bytes,
                fields,
                ..
            } => {
                c.row_width = row_width as usize;
                c.max_frame_bytes = max_frame_bytes as usize;
                c.fields = fields;
                Ok(c)
            }
            Response::Error(e) => Err(Error::invalid(
                "handshake",
                format!("{}: {}", e.code.name(), e.message),
            )),
            other => Err(Error::decode("handshake reply", format!("{other:?}"))),
        }
    }

    /// Queue a frame of whole rows (buffered; `flush` or `recv` sends).
    pub fn send(&mut self, batch_id: u64, rows: &[u8]) -> Result<()> {
        let n = rows.len().checked_div(self.row_width).unwrap_or(0);
        let h = FrameHeader::for_payload(batch_id, n as u32, rows);
        self.wr.write_all(&h.encode()).map_err(io)?;
        self.wr.write_all(rows).map_err(io)
    }

    /// Send raw bytes (tests use it to send broken frames).
    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.wr.write_all(bytes).map_err(io)
    }

    /// Send what is buffered.
    pub fn flush(&mut self) -> Result<()> {
        self.wr.flush().map_err(io)
    }

    /// The next response (flushes what was sent first).
    pub fn recv(&mut self) -> Result<Response> {
        self.flush()?;
        let mut head = [0u8; RESPONSE_HEADER_LEN];
        self.rd.read_exact(&mut head).map_err(io)?;
        let (kind, len, crc) = Response::decode_head(&head)?;
        let mut p = vec![0u8; len];
        self.rd.read_exact(&mut p).map_err(io)?;
        Response::decode_payload(kind, &p, crc)
    }

    /// Split into a sending and a receiving half, to read responses on
    /// another thread while frames are sent (pipelining without waiting).
    pub fn split(self) -> (ClientSender, ClientReceiver) {
        (ClientSender { wr: self.wr }, ClientReceiver { rd: self.rd })
    }

    /// Send one frame and wait for its response.
    pub fn write(&mut self, batch_id: u64, rows: &[u8]) -> Result<Response> {
        self.send(batch_id, rows)?;
        self.recv()
    }
}

/// The sending half of a [`Client`].
pub struct ClientSender {
    wr: BufWriter<TcpStream>,
}

impl ClientSender {
    /// Send a frame of whole rows of `row_width` bytes, now.
    pub fn send(&mut self, batch_id: u64, rows: &[u8], row_width: usize) -> Result<()> {
        let n = rows.len().checked_div(row_width).unwrap_or(0);
        let h = FrameHeader::for_payload(batch_id, n as u32, rows);
        self.wr.write_all(&h.encode()).map_err(io)?;
        self.wr.write_all(rows).map_err(io)?;
        self.wr.flush().map_err(io)
    }

    /// Say "no more frames": the server answers what it read, then closes.
    pub fn close(mut self) {
        let _ = self.wr.flush();
        let _ = self.wr.get_ref().shutdown(std::net::Shutdown::Write);
    }
}

/// The receiving half of a [`Client`].
pub struct ClientReceiver {
    rd: BufReader<TcpStream>,
}

impl ClientReceiver {
    /// The next response.
    pub fn recv(&mut self) -> Result<Response> {
        let mut head = [0u8; RESPONSE_HEADER_LEN];
        self.rd.read_exact(&mut head).map_err(io)?;
        let (kind, len, crc) = Response::decode_head(&head)?;
        let mut p = vec![0u8; len];
        self.rd.read_exact(&mut p).map_err(io)?;
        Response::decode_payload(kind, &p, crc)
    }
}
