//! Table schemas: names, fixed-width fields, options, row layout and batch
//! validation. A row on the ingest path is `device: u64 LE | ts: i64 LE |
//! fields...` (each field little-endian, packed, no padding).

pub mod batch;
mod options;

pub use batch::{Batch, RowHead, ROW_HEAD_LEN};
pub use options::{parse_duration_ms, BlockEncoding, Compression, TableOptions};

use crate::error::{Error, Result};
use crate::util::bin::{BinReader, BinWriter};

/// Most fields a table may have.
pub const FIELDS_MAX: usize = 256;
/// Longest table or field name.
pub const NAME_LEN_MAX: usize = 64;

/// A fixed-width field type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FieldType {
    /// 64-bit float.
    F64 = 1,
    /// 32-bit float.
    F32 = 2,
    /// 64-bit signed integer.
    I64 = 3,
    /// 32-bit signed integer.
    I32 = 4,
    /// 64-bit unsigned integer.
    U64 = 5,
    /// 32-bit unsigned integer.
    U32 = 6,
    /// One byte; 0 is false, anything else true.
    Bool = 7,
}

impl FieldType {
    /// Every type, in code order.
    pub const ALL: [FieldType; 7] = [
        FieldType::F64,
        FieldType::F32,
        FieldType::I64,
        FieldType::I32,
        FieldType::U64,
        FieldType::U32,
        FieldType::Bool,
    ];

    /// Width in bytes.
    pub fn width(self) -> usize {
        match self {
            FieldType::F64 | FieldType::I64 | FieldType::U64 => 8,
            FieldType::F32 | FieldType::I32 | FieldType::U32 => 4,
            FieldType::Bool => 1,
        }
    }
    /// The name `parse` takes (`f64`, `bool`, ...).
    pub fn name(self) -> &'static str {
        match self {
            FieldType::F64 => "f64",
            FieldType::F32 => "f32",
            FieldType::I64 => "i64",
            FieldType::I32 => "i32",
            FieldType::U64 => "u64",
            FieldType::U32 => "u32",
            FieldType::Bool => "bool",
        }
    }
    /// A type by name.
    pub fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "f64" => FieldType::F64,
            "f32" => FieldType::F32,
            "i64" => FieldType::I64,
            "i32" => FieldType::I32,
            "u64" => FieldType::U64,
            "u32" => FieldType::U32,
            "bool" => FieldType::Bool,
            other => {
                return Err(Error::invalid(
                    "field type",
                    format!("{other:?} (expected f64, f32, i64, i32, u64, u32 or bool)"),
                ))
            }
        })
    }
    /// The type's code in schemas and the ingest protocol.
    pub fn code(self) -> u8 {
        self as u8
    }
    /// A type by its code in schemas and the wire protocol.
    pub fn from_code(c: u8) -> Result<Self> {
        Ok(match c {
            1 => FieldType::F64,
            2 => FieldType::F32,
            3 => FieldType::I64,
            4 => FieldType::I32,
            5 => FieldType::U64,
            6 => FieldType::U32,
            7 => FieldType::Bool,
            _ => return Err(Error::decode("field type", format!("unknown code {c}"))),
        })
    }
}

/// One named field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// The field's name.
    pub name: String,
    /// Its type.
    pub ty: FieldType,
}

impl Field {
    /// A field named `name` of type `ty`.
    pub fn new(name: &str, ty: FieldType) -> Self {
        Field {
            name: name.to_string(),
            ty,
        }
    }
    /// Parse `name:type`.
    pub fn parse(spec: &str) -> Result<Self> {
        let (n, t) = spec
            .split_once(':')
            .ok_or_else(|| Error::invalid("field", format!("{spec:?} is not name:type")))?;
        Ok(Field::new(n, FieldType::parse(t)?))
    }
}

/// A table definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableSchema {
    /// The table's name.
    pub name: String,
    /// Its fields, in row order.
    pub fields: Vec<Field>,
    /// Its options (TTL, versions, compression, encoding, regions).
    pub options: TableOptions,
}

/// Validate a name against `[a-z0-9_]{1,64}`.
pub fn validate_name(what: &'static str, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= NAME_LEN_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !ok {
        return Err(Error::invalid(
            what,
            format!("{name:?} must match [a-z0-9_]{{1,{NAME_LEN_MAX}}}"),
        ));
    }
    Ok(())
}

impl TableSchema {
    /// Build and validate a schema.
    pub fn new(name: &str, fields: Vec<Field>, options: TableOptions) -> Result<Self> {
        let s = TableSchema {
            name: name.to_string(),
            fields,
            options,
        };
        s.validate()?;
        Ok(s)
    }

    /// Check names, field count and options.
    pub fn validate(&self) -> Result<()> {
        validate_name("table name", &self.name)?;
        if self.fields.len() > FIELDS_MAX {
            return Err(Error::invalid(
                "schema",
                format!("{} fields (max {FIELDS_MAX})", self.fields.len()),
            ));
        }
        for (i, f) in self.fields.iter().enumerate() {
            validate_name("field name", &f.name)?;
            if ["device", "device_id", "ts"].contains(&f.name.as_str()) {
                return Err(Error::invalid(
                    "field name",
                    format!("{:?} is reserved", f.name),
                ));
            }
            if self.fields[..i].iter().any(|g| g.name == f.name) {
                return Err(Error::invalid(
                    "field name",
                    format!("{:?} appears twice", f.name),
                ));
            }
        }
        self.options.validate()
    }

    /// Width of the field section of a row.
    pub fn fields_width(&self) -> usize {
        self.fields.iter().map(|f| f.ty.width()).sum()
    }

    /// Width of an ingest row: device + ts + fields.
    pub fn row_width(&self) -> usize {
        ROW_HEAD_LEN + self.fields_width()
    }

    /// Byte offset of field `i` within the field section.
    pub fn field_offset(&self, i: usize) -> usize {
        self.fields[..i].iter().map(|f| f.ty.width()).sum()
    }

    /// Index of a field by name.
    pub fn field_index(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name)
    }

    /// A stable 32-bit id of the layout (CRC32C of the encoded fields);
    /// recorded in HFiles so a file is never read with another layout.
    pub fn layout_id(&self) -> u32 {
        let mut w = BinWriter::new();
        for f in &self.fields {
            w.str(&f.name).u8(f.ty as u8);
        }
        crate::util::bin::crc(&w.buf)
    }

    /// Describe how `other` differs (for conflict errors), `None` if equal.
    /// The block encoding is not compared: it is the one option a table
    /// changes after creation (`Store::set_table_encoding`), so creating
    /// an existing table again (as `load` does) stays idempotent after it.
    pub fn diff(&self, other: &TableSchema) -> Option<String> {
        if self.fields != other.fields {
            return Some(format!(
                "fields [{}] vs [{}]",
                describe_fields(&self.fields),
                describe_fields(&other.fields)
            ));
        }
        let other_options = TableOptions {
            encoding: self.options.encoding,
            ..other.options.clone()
        };
        if self.options != other_options {
            return Some(format!("options {:?} vs {:?}", self.options, other.options));
        }
        None
    }

    /// The schema as the manifest records it (formats/manifest.md).
    pub fn encode(&self, w: &mut BinWriter) {
        w.str(&self.name).u16(self.fields.len() as u16);
        for f in &self.fields {
            w.str(&f.name).u8(f.ty as u8);
        }
        self.options.encode(w);
    }

    /// Decode a schema written by a manifest of `manifest_version`.
    pub fn decode(r: &mut BinReader<'_>, manifest_version: u32) -> Result<Self> {
        let name = r.str()?;
        let n = r.u16()? as usize;
        if n > FIELDS_MAX {
            return Err(Error::decode("schema", format!("{n} fields")));
        }
        let mut fields = Vec::with_capacity(n);
        for _ in 0..n {
            let fname = r.str()?;
            fields.push(Field::new(&fname, FieldType::from_code(r.u8()?)?));
        }
        let options = TableOptions::decode(r, manifest_version)?;
        let s = TableSchema {
            name,
            fields,
            options,
        };
        s.validate()
            .map_err(|e| Error::decode("schema", e.to_string()))?;
        Ok(s)
    }
}

fn describe_fields(f: &[Field]) -> String {
    f.iter()
        .map(|f| format!("{}:{}", f.name, f.ty.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> TableSchema {
        TableSchema::new(
            "readings",
            vec![
                Field::new("lat", FieldType::F64),
                Field::new("ok", FieldType::Bool),
                Field::new("n", FieldType::I32),
            ],
            TableOptions::default(),
        )
        .unwrap()
    }

    #[test]
    fn names_are_validated() {
        assert!(validate_name("t", "abc_09").is_ok());
        for bad in ["", "Abc", "a-b", "a b", &"x".repeat(65)] {
            assert!(validate_name("t", bad).is_err(), "{bad}");
        }
        let dup = TableSchema::new(
            "t",
            vec![
                Field::new("a", FieldType::F64),
                Field::new("a", FieldType::I64),
            ],
            TableOptions::default(),
        );
        assert!(dup.is_err());
        let reserved = TableSchema::new(
            "t",
            vec![Field::new("ts", FieldType::F64)],
            TableOptions::default(),
        );
        assert!(reserved.is_err());
    }

    #[test]
    fn layout() {
        let s = schema();
        assert_eq!(s.row_width(), 16 + 8 + 1 + 4);
        assert_eq!(s.field_offset(2), 9);
    }

    #[test]
    fn encode_round_trip_and_truncation() {
        let s = schema();
        let mut w = BinWriter::new();
        s.encode(&mut w);
        let b = w.into_inner();
        let mut r = BinReader::new(&b, "schema");
        assert_eq!(TableSchema::decode(&mut r, 4).unwrap(), s);
        r.finish().unwrap();
        for cut in 0..b.len() {
            assert!(TableSchema::decode(&mut BinReader::new(&b[..cut], "schema"), 4).is_err());
        }
    }
}
