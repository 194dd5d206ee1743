//! Building a [`DaemonConfig`] from its layers: the defaults, the
//! configuration file, then each [`Override`] (environment variables,
//! flags, `--set`) in the order given.

use super::{setting, DaemonConfig, Group};
use std::path::Path;
use telestore_engine::error::{Error, Result};

/// One value given outside the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Override {
    /// The setting's key, or `table.key` for a key of a [`Group::Table`].
    pub key: String,
    /// The value as typed: `64MiB`, `true`, `127.0.0.1:7070`, …
    pub value: String,
    /// Where it came from, for errors: `--flush-threshold-mib`,
    /// `$TELESTORE_DIR`, `--set`.
    pub source: String,
}

impl Override {
    /// `KEY=VALUE` as given to `--set`.
    pub fn parse_set(text: &str) -> Result<Override> {
        let (key, value) = text.split_once('=').ok_or_else(|| {
            Error::invalid(
                "--set",
                format!("{text:?}: expected KEY=VALUE (flush_threshold_mib=128MiB)"),
            )
        })?;
        Ok(Override {
            key: key.trim().to_string(),
            value: value.trim().to_string(),
            source: "--set".into(),
        })
    }
}

impl DaemonConfig {
    /// The defaults, then `file` (TOML), then `overrides` in order; checked
    /// ([`DaemonConfig::validate`]).
    pub fn load(file: Option<&Path>, overrides: &[Override]) -> Result<DaemonConfig> {
        let mut tree = match file {
            Some(p) => read_file(p)?,
            None => toml::Table::new(),
        };
        for o in overrides {
            let (path, value) = resolve(o)?;
            insert(&mut tree, &path, value);
        }
        let cfg: DaemonConfig = toml::Value::Table(tree)
            .try_into()
            .map_err(|e| Error::invalid("settings", e.to_string()))?;
        cfg.validate()?;
        Ok(cfg)
    }
}

/// The file as a TOML table, checked against the struct first so that a
/// mistake is reported with its line and column.
fn read_file(p: &Path) -> Result<toml::Table> {
    let text = std::fs::read_to_string(p)
        .map_err(|e| Error::invalid("--config", format!("reading {}: {e}", p.display())))?;
    let bad = |e: toml::de::Error| Error::invalid("--config", format!("{}: {e}", p.display()));
    toml::from_str::<DaemonConfig>(&text).map_err(bad)?;
    toml::from_str(&text).map_err(bad)
}

/// The path of `o`'s key and the TOML value it sets: the value read as
/// TOML (`128`, `true`) where the setting takes that, else as a string.
fn resolve(o: &Override) -> Result<(Vec<String>, toml::Value)> {
    let path: Vec<String> = o.key.split('.').map(str::to_string).collect();
    let Some(s) = setting(&path[0]) else {
        return Err(Error::invalid(
            "--set",
            format!(
                "{} {:?}: no such setting (docs/configuration.md lists them)",
                o.source, o.key
            ),
        ));
    };
    let raw = toml::Value::String(o.value.clone());
    match (s.group == Group::Table, path.len()) {
        (true, 2) => return Ok((path, raw)),
        (false, 1) => {}
        (true, _) => {
            return Err(Error::invalid(
                s.key,
                format!(
                    "{}: {} is a table: set one of its keys ({}.KEY=VALUE)",
                    o.source, s.key, s.key
                ),
            ))
        }
        (false, _) => {
            return Err(Error::invalid(
                s.key,
                format!("{}: {} is not a table", o.source, s.key),
            ))
        }
    }
    let typed = toml::from_str::<toml::Table>(&format!("v = {}", o.value))
        .ok()
        .and_then(|mut t| t.remove("v"));
    let mut first_error = None;
    for v in typed.into_iter().chain([raw]) {
        let one = toml::Table::from_iter([(s.key.to_string(), v.clone())]);
        match toml::Value::Table(one).try_into::<DaemonConfig>() {
            Ok(_) => return Ok((path, v)),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    let why = first_error.map(|e| e.to_string()).unwrap_or_default();
    Err(Error::invalid(
        s.key,
        format!("{} {:?}: {}", o.source, o.value, why.trim()),
    ))
}

/// Set `path` in `tree`, creating (or replacing by) tables on the way.
fn insert(tree: &mut toml::Table, path: &[String], value: toml::Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut t = tree;
    for p in parents {
        let entry = t
            .entry(p.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if !entry.is_table() {
            *entry = toml::Value::Table(toml::Table::new());
        }
        let toml::Value::Table(inner) = entry else {
            return;
        };
        t = inner;
    }
    t.insert(last.clone(), value);
}
