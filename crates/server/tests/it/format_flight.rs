//! Guards formats/flight.md: the fixtures of the Flight ticket and request
//! documents decode as the spec says (the other formats' fixtures are
//! checked in `telestore-engine`'s `format_fixtures`).

use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../formats/fixtures")
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// formats/flight.md: the version-1 ticket and request documents decode
/// to what the spec says they hold.
#[test]
fn flight_v1_documents_decode_as_specified() {
    use telestore_server::flight::ticket::{Request, Ticket};
    let dir = fixtures().join("flight_v1");
    let Ticket::Scan(t) = Ticket::parse(&read(&dir.join("scan-ticket.json"))).unwrap() else {
        panic!("a scan ticket")
    };
    assert_eq!((t.v, t.table.as_str()), (1, "readings"));
    assert_eq!((t.from, t.to), (1_700_000_000_000, 1_700_003_600_000));
    assert_eq!(t.fields, ["velocity", "fuel_state"]);
    assert_eq!(t.where_.as_deref(), Some("fleet=North"));
    let span = t.span().unwrap();
    assert_eq!(&span.start[..2], &[0x40, 0x00]);
    assert_eq!(span.end.unwrap()[0], 0x80);
    let Ticket::Sql(q) = Ticket::parse(&read(&dir.join("sql-ticket.json"))).unwrap() else {
        panic!("a SQL ticket")
    };
    assert_eq!(q.sql, "SELECT count(*) FROM readings");
    let r = Request::parse_cmd(&read(&dir.join("request.json"))).unwrap();
    assert_eq!(r.from.as_deref(), Some("-1h"));
    assert_eq!(r.fields.as_deref(), Some("velocity,fuel_state"));
}
