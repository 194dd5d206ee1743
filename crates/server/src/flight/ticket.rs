//! What a Flight client names: a *descriptor* (what to read, or where to
//! write) and a *ticket* (one endpoint's part of a read). Both are JSON
//! specified in `formats/flight.md`; bytes from a client are parsed with
//! a size limit and every refusal names what was wrong.

use serde::{Deserialize, Serialize};
use telestore_engine::engine::KeySpan;
use telestore_engine::error::{Error, Result};
use telestore_engine::key::{RowKey, KEY_LEN};

/// Version of the descriptor and ticket documents (`formats/flight.md`).
pub const FLIGHT_TICKET_VERSION: u32 = 1;
/// Largest descriptor command or ticket accepted.
pub const FLIGHT_DOC_MAX: usize = 64 << 10;

/// A read or write request: a `CMD` descriptor's JSON, or built from a
/// `PATH` descriptor (`[table]`). Filters are those of `telestore query`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct Request {
    /// The table.
    pub table: String,
    /// Window start (inclusive): RFC 3339, epoch ms, `now`, `-1h`.
    pub from: Option<String>,
    /// Window end (exclusive).
    pub to: Option<String>,
    /// Comma-separated field names (default: all).
    pub fields: Option<String>,
    /// Comma-separated devices, by name or numeric id.
    pub devices: Option<String>,
    /// `tag=value`.
    #[serde(rename = "where")]
    pub where_: Option<String>,
    /// DoPut only: `sync` (default), `async` or `skip`.
    pub durability: Option<String>,
    /// A SQL query instead of a scan (then no other key but `table`,
    /// which may be empty).
    pub sql: Option<String>,
}

/// What `DoGet` redeems: a part of a scan, or a SQL query.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Ticket {
    /// A scan of one table (formats/flight.md).
    Scan(ScanTicket),
    /// A SQL query.
    Sql(SqlTicket),
}

/// A SQL query's one endpoint.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SqlTicket {
    /// The document's version (1).
    pub v: u32,
    /// The query.
    pub sql: String,
}

/// One endpoint's read: a table's rows in a key span, resolved (times in
/// epoch ms) so that every endpoint of one `GetFlightInfo` reads the
/// same window.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ScanTicket {
    /// The document's version (1).
    pub v: u32,
    /// The table.
    pub table: String,
    /// `[from, to)` in epoch ms (`i64::MIN` / `i64::MAX`: unbounded).
    pub from: i64,
    /// The end of the window, excluded, epoch ms.
    pub to: i64,
    /// Field names, in output order.
    pub fields: Vec<String>,
    /// The request's device filter, as given (resolved again on `DoGet`).
    pub devices: Option<String>,
    /// `tag=value`: the devices carrying that tag.
    #[serde(rename = "where")]
    pub where_: Option<String>,
    /// The span's first key, 36 hex digits.
    pub start: String,
    /// The span's end key (exclusive), or none: the end of the key space.
    pub end: Option<String>,
}

fn too_big(what: &'static str, len: usize) -> Error {
    Error::invalid(
        what,
        format!("{len} bytes exceeds the {FLIGHT_DOC_MAX} byte limit"),
    )
}

impl Request {
    /// A descriptor's command bytes.
    pub fn parse_cmd(bytes: &[u8]) -> Result<Request> {
        if bytes.len() > FLIGHT_DOC_MAX {
            return Err(too_big("descriptor", bytes.len()));
        }
        let r: Request = serde_json::from_slice(bytes)
            .map_err(|e| Error::invalid("descriptor", format!("not a request document: {e}")))?;
        if r.sql.is_some() {
            let others = [
                &r.from,
                &r.to,
                &r.fields,
                &r.devices,
                &r.where_,
                &r.durability,
            ];
            if others.iter().any(|o| o.is_some()) {
                return Err(Error::invalid(
                    "descriptor",
                    "a SQL request holds only \"sql\": filters belong in the query",
                ));
            }
        } else if r.table.is_empty() {
            return Err(Error::invalid("descriptor", "no table given"));
        }
        Ok(r)
    }

    /// A `PATH` descriptor: exactly one element, the table.
    pub fn from_path(path: &[String]) -> Result<Request> {
        match path {
            [t] if !t.is_empty() => Ok(Request {
                table: t.clone(),
                ..Default::default()
            }),
            _ => Err(Error::invalid(
                "descriptor",
                format!("a path descriptor names one table, got {path:?}"),
            )),
        }
    }
}

impl Ticket {
    /// The ticket as it goes on the wire (JSON).
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a ticket serializes")
    }

    /// A ticket from the wire; anything else is a clear error.
    pub fn parse(bytes: &[u8]) -> Result<Ticket> {
        if bytes.len() > FLIGHT_DOC_MAX {
            return Err(too_big("ticket", bytes.len()));
        }
        let t: Ticket = serde_json::from_slice(bytes)
            .map_err(|e| Error::invalid("ticket", format!("not a telestore ticket: {e}")))?;
        let v = match &t {
            Ticket::Scan(s) => s.v,
            Ticket::Sql(s) => s.v,
        };
        if v != FLIGHT_TICKET_VERSION {
            return Err(Error::UnsupportedVersion {
                what: "flight ticket",
                version: v,
            });
        }
        if let Ticket::Scan(s) = &t {
            if s.from > s.to {
                return Err(Error::invalid("ticket", "from is after to"));
            }
            s.span()?;
        }
        Ok(t)
    }
}

impl ScanTicket {
    /// The key span the ticket reads.
    pub fn span(&self) -> Result<KeySpan> {
        Ok(KeySpan {
            start: key_from_hex(&self.start)?,
            end: self.end.as_deref().map(key_from_hex).transpose()?,
        })
    }
}

/// A key as 36 hex digits.
pub fn key_to_hex(k: &RowKey) -> String {
    k.iter().map(|b| format!("{b:02x}")).collect()
}

fn key_from_hex(s: &str) -> Result<RowKey> {
    let bad = || {
        Error::invalid(
            "ticket",
            format!("{s:?} is not a key ({} hex digits)", 2 * KEY_LEN),
        )
    };
    if s.len() != 2 * KEY_LEN || !s.is_ascii() {
        return Err(bad());
    }
    let mut k = [0u8; KEY_LEN];
    for (i, b) in k.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticket() -> ScanTicket {
        ScanTicket {
            v: FLIGHT_TICKET_VERSION,
            table: "readings".into(),
            from: 0,
            to: 10,
            fields: vec!["velocity".into()],
            devices: None,
            where_: Some("fleet=north".into()),
            start: key_to_hex(&[0x12; KEY_LEN]),
            end: None,
        }
    }

    #[test]
    fn tickets_round_trip_and_refuse_damage() {
        let t = ticket();
        let whole = Ticket::Scan(t.clone());
        assert_eq!(Ticket::parse(&whole.to_bytes()).unwrap(), whole);
        let sql = Ticket::Sql(SqlTicket {
            v: 1,
            sql: "SELECT 1".into(),
        });
        assert_eq!(Ticket::parse(&sql.to_bytes()).unwrap(), sql);
        let bad = |b: &[u8]| Ticket::parse(b).unwrap_err().to_string();
        let enc = |t: &ScanTicket| Ticket::Scan(t.clone()).to_bytes();
        assert!(bad(br#"{"kind":"sql","v":1,"sql":"x","extra":1}"#).contains("unknown field"));
        assert!(bad(br#"{"kind":"nope","v":1}"#).contains("unknown variant"));
        assert!(bad(b"{").contains("not a telestore ticket"));
        assert!(bad(&vec![b' '; FLIGHT_DOC_MAX + 1]).contains("limit"));
        let mut v2 = t.clone();
        v2.v = 2;
        assert!(bad(&enc(&v2)).contains("version 2"));
        let mut short = t.clone();
        short.start = "12".into();
        assert!(bad(&enc(&short)).contains("not a key"));
        let mut nonhex = t.clone();
        nonhex.start = "zz".repeat(KEY_LEN);
        assert!(bad(&enc(&nonhex)).contains("not a key"));
        let mut multibyte = t;
        multibyte.start = "é".repeat(KEY_LEN);
        assert!(bad(&enc(&multibyte)).contains("not a key"));
    }

    #[test]
    fn requests_are_strict() {
        let r = Request::parse_cmd(br#"{"table":"t","from":"-1h"}"#).unwrap();
        assert_eq!(r.from.as_deref(), Some("-1h"));
        assert!(Request::parse_cmd(br#"{"table":"t","form":"-1h"}"#).is_err());
        assert!(Request::parse_cmd(br#"{"from":"-1h"}"#).is_err());
        assert!(Request::parse_cmd(br#"{"sql":"SELECT 1"}"#).is_ok());
        assert!(Request::parse_cmd(br#"{"sql":"SELECT 1","from":"-1h"}"#).is_err());
        assert!(Request::from_path(&["a".into(), "b".into()]).is_err());
        assert_eq!(Request::from_path(&["a".into()]).unwrap().table, "a");
    }
}
