//! `telestore top`: the daemon's `/api/v1/status` as a terminal screen (a
//! summary and the regions of every table, busiest first, hot ones
//! marked). This module fetches and draws; the command (`cli/top.rs`)
//! owns the terminal and the refresh loop.

use crate::server::status::{RegionStatus, Status, STATUS_VERSION};
use crate::util::text::{escape_control, human_bytes};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph, Row, Table};
use ratatui::Frame;

/// Fetch the status of the daemon at `server` (its HTTP address), giving
/// up after `timeout` (a daemon under heavy load answers slowly: the
/// status counts every write acknowledged before it).
pub fn fetch(
    server: &str,
    token: Option<&str>,
    timeout: std::time::Duration,
) -> Result<Status, String> {
    let url = format!("{}/api/v1/status", server.trim_end_matches('/'));
    let mut req = ureq::get(&url).timeout(timeout);
    if let Some(t) = token.filter(|t| !t.is_empty()) {
        req = req.set("Authorization", &format!("Token {t}"));
    }
    let text = match req.call() {
        Ok(r) => r.into_string().map_err(|e| format!("{url}: {e}"))?,
        Err(ureq::Error::Status(code, r)) => {
            let body = r.into_string().unwrap_or_default();
            return Err(format!("{url}: HTTP {code}: {body}"));
        }
        Err(e) => return Err(format!("cannot reach {url}: {e}")),
    };
    let s: Status = serde_json::from_str(&text).map_err(|e| format!("{url}: {e}"))?;
    if s.version != STATUS_VERSION {
        return Err(format!(
            "{url}: status version {} (this telestore reads {STATUS_VERSION})",
            s.version
        ));
    }
    Ok(s)
}

fn rate(v: f64) -> String {
    match v {
        v if v >= 1e6 => format!("{:.2} M", v / 1e6),
        v if v >= 1e4 => format!("{:.1} k", v / 1e3),
        v => format!("{v:.0}"),
    }
}

/// The summary lines above the regions.
fn summary(s: &Status, server: &str) -> Vec<Line<'static>> {
    let hot: usize = s
        .tables
        .iter()
        .map(|t| t.regions.iter().filter(|r| r.hot).count())
        .sum();
    vec![
        Line::from(format!(
            "telestore top — {server} — {} — up {:.0} s — {} tables, {hot} hot regions (q quits)",
            escape_control(&s.health),
            s.uptime_seconds,
            s.tables.len()
        )),
        Line::from(format!(
            "ingest {} rows/s ({} rows since open)   memstores {} / {}, flush queue {}   WAL segments {}",
            rate(s.ingest.rows_per_second),
            s.ingest.rows_total,
            human_bytes(s.memstores.bytes),
            human_bytes(s.memstores.limit_bytes),
            s.memstores.flush_queue,
            s.wal.segments
        )),
        Line::from(format!(
            "compactions {} running, {} queued, debt {}   writes stalled {} busy {} slowed {}",
            s.compactions.running,
            s.compactions.queued,
            human_bytes(s.compactions.debt_bytes),
            s.writes.stalled_total,
            s.writes.busy_total,
            s.writes.slowed_total
        )),
        Line::from(format!(
            "block cache {} / {}, hit rate {:.1} %   latest cache {} devices   TCP {} open   HTTP rows {}",
            human_bytes(s.block_cache.bytes),
            human_bytes(s.block_cache.capacity_bytes),
            100.0 * s.block_cache.hit_ratio,
            s.latest_cache.devices,
            s.connections.tcp_open,
            s.connections.http_rows
        )),
    ]
}

/// Every region of every table, busiest first.
fn region_rows(s: &Status) -> Vec<(&str, &RegionStatus)> {
    let mut rows: Vec<(&str, &RegionStatus)> = s
        .tables
        .iter()
        .flat_map(|t| t.regions.iter().map(move |r| (t.name.as_str(), r)))
        .collect();
    let load = |r: &RegionStatus| r.write_rate + r.read_rate;
    rows.sort_by(|a, b| load(b.1).total_cmp(&load(a.1)).then(a.1.id.cmp(&b.1.id)));
    rows
}

/// Draw one screen of `s` (from `server`), or `error` above the last one.
pub fn draw(f: &mut Frame, s: &Status, server: &str, error: Option<&str>) {
    let [head, body] =
        Layout::vertical([Constraint::Length(6), Constraint::Min(3)]).areas(f.area());
    let mut lines = summary(s, server);
    if let Some(e) = error {
        lines.insert(
            0,
            Line::styled(
                format!("! {}", escape_control(e)),
                Style::new().fg(Color::Red),
            ),
        );
    }
    f.render_widget(Paragraph::new(lines).block(Block::bordered()), head);
    let header = Row::new([
        "table",
        "region",
        "hot",
        "writes/s",
        "reads/s",
        "load %",
        "memstore",
        "files",
        "size",
        "debt",
        "compaction",
    ])
    .style(Style::new().add_modifier(Modifier::BOLD));
    let rows = region_rows(s).into_iter().map(|(table, r)| {
        let style = match r.hot {
            true => Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
            false => Style::new(),
        };
        let job = match (r.compaction_running, r.compaction_queued) {
            (true, _) => "running",
            (false, true) => "queued",
            _ => "",
        };
        Row::new([
            escape_control(table).into_owned(),
            r.id.to_string(),
            if r.hot { "HOT".into() } else { String::new() },
            rate(r.write_rate),
            rate(r.read_rate),
            format!("{:.1}", 100.0 * r.load_share),
            human_bytes(r.memstore_bytes),
            format!("{} ({})", r.files, r.runs),
            human_bytes(r.size_bytes),
            human_bytes(r.compaction_debt_bytes),
            job.to_string(),
        ])
        .style(style)
    });
    let widths = [
        Constraint::Min(8),
        Constraint::Length(6),
        Constraint::Length(4),
        Constraint::Length(9),
        Constraint::Length(9),
        Constraint::Length(7),
        Constraint::Length(10),
        Constraint::Length(8),
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Length(10),
    ];
    let table = Table::new(rows, widths)
        .header(header)
        .block(Block::bordered().title(" regions, busiest first "));
    f.render_widget(table, body);
}

/// One screen of `s` as text, `width` × `height` (for `top --once` and
/// tests): the same drawing, on an in-memory terminal.
pub fn render_text(s: &Status, server: &str, width: u16, height: u16) -> String {
    let backend = ratatui::backend::TestBackend::new(width, height);
    let mut term = match ratatui::Terminal::new(backend) {
        Ok(t) => t,
        Err(e) => return format!("cannot render: {e}"),
    };
    if let Err(e) = term.draw(|f| draw(f, s, server, None)) {
        return format!("cannot render: {e}");
    }
    let buf = term.backend().buffer();
    let area = buf.area;
    let mut out = String::new();
    for y in area.top()..area.bottom() {
        let line: String = (area.left()..area.right())
            .map(|x| buf[(x, y)].symbol())
            .collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
