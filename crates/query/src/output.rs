//! Writing record batches for people and pipes: an aligned table, CSV,
//! JSON lines, a JSON array, or an Arrow IPC stream. Used by the CLI
//! (for embedded and `--server` results alike) and by the daemon's HTTP
//! query endpoints.

use super::time::format_ms;
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int32Type, Int64Type, TimestampMillisecondType, UInt32Type,
    UInt64Type,
};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{DataType, SchemaRef, TimeUnit};
use std::io::Write;
use telestore_engine::error::{Error, Result};
use telestore_engine::util::text::escape_control;

/// An output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Aligned columns for a terminal.
    Table,
    /// RFC 4180 CSV with a header row.
    Csv,
    /// One JSON object per line.
    Jsonl,
    /// One JSON array of objects.
    Json,
    /// Arrow IPC stream (binary).
    Arrow,
}

impl Format {
    /// The HTTP `Content-Type` of the format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Table => "text/plain; charset=utf-8",
            Format::Csv => "text/csv; charset=utf-8",
            Format::Jsonl => "application/x-ndjson",
            Format::Json => "application/json",
            Format::Arrow => "application/vnd.apache.arrow.stream",
        }
    }
}

/// One value, rendered.
enum Cell {
    Null,
    Num(String),
    Text(String),
    Bool(bool),
}

impl Cell {
    fn text(&self) -> &str {
        match self {
            Cell::Null => "",
            Cell::Num(s) | Cell::Text(s) => s,
            Cell::Bool(true) => "true",
            Cell::Bool(false) => "false",
        }
    }

    fn json(self) -> serde_json::Value {
        use serde_json::Value;
        match self {
            Cell::Null => Value::Null,
            Cell::Text(s) => Value::String(s),
            Cell::Bool(b) => Value::Bool(b),
            // Numbers were rendered by Rust's shortest round-trip form;
            // they are parsed back by Rust's exact parser (serde_json's
            // own float parser is not exact without `float_roundtrip`:
            // 90.33333333333333 came back as 90.33333333333331) and
            // written by serde_json's shortest round-trip form.
            Cell::Num(s) => num_json(&s),
        }
    }
}

fn num_json(s: &str) -> serde_json::Value {
    if let Ok(i) = s.parse::<i64>() {
        return i.into();
    }
    if let Ok(u) = s.parse::<u64>() {
        return u.into();
    }
    s.parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map_or(serde_json::Value::Null, serde_json::Value::Number)
}

fn float(v: f64) -> Cell {
    if v.is_finite() {
        Cell::Num(format!("{v:?}"))
    } else {
        Cell::Text(v.to_string())
    }
}

fn cell(col: &ArrayRef, i: usize) -> Cell {
    if col.is_null(i) || col.data_type() == &DataType::Null {
        return Cell::Null;
    }
    match col.data_type() {
        DataType::Float64 => float(col.as_primitive::<Float64Type>().value(i)),
        DataType::Float32 => {
            // The f32's own shortest form: it parses back to the same f32.
            let v = col.as_primitive::<Float32Type>().value(i);
            if v.is_finite() {
                Cell::Num(format!("{v:?}"))
            } else {
                Cell::Text(v.to_string())
            }
        }
        DataType::Int64 => Cell::Num(col.as_primitive::<Int64Type>().value(i).to_string()),
        DataType::Int32 => Cell::Num(col.as_primitive::<Int32Type>().value(i).to_string()),
        DataType::UInt64 => Cell::Num(col.as_primitive::<UInt64Type>().value(i).to_string()),
        DataType::UInt32 => Cell::Num(col.as_primitive::<UInt32Type>().value(i).to_string()),
        DataType::Boolean => Cell::Bool(col.as_boolean().value(i)),
        DataType::Utf8 => Cell::Text(col.as_string::<i32>().value(i).to_string()),
        DataType::LargeUtf8 => Cell::Text(col.as_string::<i64>().value(i).to_string()),
        DataType::Utf8View => Cell::Text(col.as_string_view().value(i).to_string()),
        DataType::Timestamp(TimeUnit::Millisecond, _) => Cell::Text(format_ms(
            col.as_primitive::<TimestampMillisecondType>().value(i),
        )),
        DataType::Dictionary(k, v) if **k == DataType::UInt32 && **v == DataType::Utf8 => {
            let d = col.as_dictionary::<UInt32Type>();
            let k = d.keys().value(i) as usize;
            Cell::Text(d.values().as_string::<i32>().value(k).to_string())
        }
        // What SQL results may hold besides: other integer and decimal
        // types, other timestamp units, dates, intervals, other
        // dictionaries: Arrow's own rendering (RFC 3339 for times).
        t => {
            let opts = arrow_cast::display::FormatOptions::default();
            let text = arrow_cast::display::ArrayFormatter::try_new(col.as_ref(), &opts)
                .map(|f| f.value(i).to_string())
                .unwrap_or_else(|_| format!("<{t}>"));
            if t.is_numeric() {
                Cell::Num(text)
            } else {
                Cell::Text(text)
            }
        }
    }
}

/// Writes batches in one format to `w`.
pub struct Printer<W: Write> {
    format: Format,
    schema: SchemaRef,
    state: State<W>,
    rows: u64,
}

enum State<W: Write> {
    Text {
        w: W,
        widths: Vec<usize>,
        started: bool,
    },
    Csv(csv::Writer<W>),
    Arrow(StreamWriter<W>),
}

fn column_names(schema: &SchemaRef) -> Vec<&str> {
    schema.fields().iter().map(|f| f.name().as_str()).collect()
}

fn arrow_err(e: arrow_schema::ArrowError) -> Error {
    Error::invalid("arrow output", e.to_string())
}

fn io_err(e: std::io::Error) -> Error {
    Error::io("output", e)
}

impl<W: Write> Printer<W> {
    /// A writer of `format` for batches of `schema` onto `w`.
    pub fn new(format: Format, schema: SchemaRef, w: W) -> Result<Self> {
        let names = column_names(&schema);
        let state = match format {
            Format::Arrow => State::Arrow(StreamWriter::try_new(w, &schema).map_err(arrow_err)?),
            Format::Csv => {
                let mut c = csv::Writer::from_writer(w);
                c.write_record(&names).map_err(csv_err)?;
                State::Csv(c)
            }
            _ => State::Text {
                w,
                widths: names.iter().map(|n| n.len()).collect(),
                started: false,
            },
        };
        Ok(Printer {
            format,
            schema,
            state,
            rows: 0,
        })
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Write one batch.
    pub fn write(&mut self, b: &RecordBatch) -> Result<()> {
        self.rows += b.num_rows() as u64;
        let names = column_names(&self.schema);
        match &mut self.state {
            State::Arrow(w) => w.write(b).map_err(arrow_err),
            State::Csv(c) => {
                for i in 0..b.num_rows() {
                    let cells: Vec<Cell> = b.columns().iter().map(|col| cell(col, i)).collect();
                    c.write_record(cells.iter().map(Cell::text))
                        .map_err(csv_err)?;
                }
                Ok(())
            }
            State::Text { w, widths, started } => match self.format {
                Format::Table => write_table(w, &names, widths, started, b),
                _ => write_json(w, self.format, &names, started, b),
            },
        }
    }

    /// Finish the output (trailers, headers of an empty table).
    pub fn finish(self) -> Result<W> {
        let names = column_names(&self.schema);
        match self.state {
            State::Arrow(mut w) => {
                w.finish().map_err(arrow_err)?;
                w.into_inner().map_err(arrow_err)
            }
            State::Csv(c) => c.into_inner().map_err(|e| io_err(e.into_error())),
            State::Text {
                mut w,
                widths,
                mut started,
            } => {
                match self.format {
                    Format::Table if !started => table_header(&mut w, &names, &widths)?,
                    Format::Json if !started => w.write_all(b"[]\n").map_err(io_err)?,
                    Format::Json => w.write_all(b"\n]\n").map_err(io_err)?,
                    _ => {}
                }
                started = true;
                let _ = started;
                w.flush().map_err(io_err)?;
                Ok(w)
            }
        }
    }
}

fn csv_err(e: csv::Error) -> Error {
    Error::invalid("csv output", e.to_string())
}

fn table_header<W: Write>(w: &mut W, names: &[&str], widths: &[usize]) -> Result<()> {
    let head: Vec<String> = names
        .iter()
        .zip(widths)
        .map(|(n, wd)| format!("{n:<wd$}"))
        .collect();
    let rule: Vec<String> = widths.iter().map(|wd| "-".repeat(*wd)).collect();
    writeln!(w, "{}", head.join("  ").trim_end()).map_err(io_err)?;
    writeln!(w, "{}", rule.join("  ")).map_err(io_err)
}

/// Columns are as wide as the widest value seen so far; a later, wider
/// value widens its column from then on.
fn write_table<W: Write>(
    w: &mut W,
    names: &[&str],
    widths: &mut [usize],
    started: &mut bool,
    b: &RecordBatch,
) -> Result<()> {
    // Text is escaped for the terminal: a device name cannot carry
    // control characters in (the registry refuses them), but a store
    // written before that rule may hold some. A line break is kept: a
    // text of several lines (an EXPLAIN plan) takes several lines of
    // its row, each column aligned.
    let rows: Vec<Vec<(bool, Vec<String>)>> = (0..b.num_rows())
        .map(|i| b.columns().iter().map(|c| shown(cell(c, i))).collect())
        .collect();
    for r in &rows {
        for (wd, (_, lines)) in widths.iter_mut().zip(r) {
            for l in lines {
                *wd = (*wd).max(l.chars().count());
            }
        }
    }
    if !*started {
        table_header(w, names, widths)?;
        *started = true;
    }
    let mut line = String::new();
    for r in rows {
        let height = r.iter().map(|(_, l)| l.len()).max().unwrap_or(1);
        for k in 0..height {
            line.clear();
            for (j, ((num, lines), wd)) in r.iter().zip(widths.iter()).enumerate() {
                if j > 0 {
                    line.push_str("  ");
                }
                let s = lines.get(k).map_or("", String::as_str);
                let pad = wd.saturating_sub(s.chars().count());
                if *num {
                    line.extend(std::iter::repeat_n(' ', pad));
                    line.push_str(s);
                } else {
                    line.push_str(s);
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            writeln!(w, "{}", line.trim_end()).map_err(io_err)?;
        }
    }
    Ok(())
}

/// A cell as the table shows it: right-aligned or not, and its lines.
fn shown(c: Cell) -> (bool, Vec<String>) {
    match c {
        Cell::Text(t) => {
            let lines = t.split('\n').map(|l| escape_control(l).into_owned());
            (false, lines.collect())
        }
        Cell::Num(n) => (true, vec![n]),
        other => (false, vec![other.text().to_string()]),
    }
}

fn write_json<W: Write>(
    w: &mut W,
    format: Format,
    names: &[&str],
    started: &mut bool,
    b: &RecordBatch,
) -> Result<()> {
    for i in 0..b.num_rows() {
        let mut obj = serde_json::Map::with_capacity(names.len());
        for (n, c) in names.iter().zip(b.columns()) {
            obj.insert((*n).to_string(), cell(c, i).json());
        }
        let text = serde_json::Value::Object(obj).to_string();
        let sep: &[u8] = match (format, *started) {
            (Format::Json, false) => b"[\n",
            (Format::Json, true) => b",\n",
            _ => b"",
        };
        *started = true;
        w.write_all(sep).map_err(io_err)?;
        w.write_all(text.as_bytes()).map_err(io_err)?;
        if format == Format::Jsonl {
            w.write_all(b"\n").map_err(io_err)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{ArrayRef, Int64Array, StringArray};
    use std::sync::Arc;

    /// A text of several lines (an EXPLAIN plan) spans lines of its row,
    /// aligned; other control characters stay escaped.
    #[test]
    fn multi_line_text_keeps_its_lines_in_the_table() {
        let b = RecordBatch::try_from_iter([
            (
                "plan",
                Arc::new(StringArray::from(vec!["a\n  bb\u{7}", "c"])) as ArrayRef,
            ),
            ("n", Arc::new(Int64Array::from(vec![1, 22])) as ArrayRef),
        ])
        .unwrap();
        let mut out = Vec::new();
        let mut widths = vec![4, 1];
        let mut started = false;
        write_table(&mut out, &["plan", "n"], &mut widths, &mut started, &b).unwrap();
        let text = String::from_utf8(out).unwrap();
        let want = [
            "plan       n",
            "---------  --",
            "a           1",
            "  bb\\u{7}",
            "c          22",
            "",
        ]
        .join("\n");
        assert_eq!(text, want);
    }
}
