//! `telestore devices`: the device registry (names, ids, tags).

use super::DirArg;
use anyhow::{bail, Result};
use clap::Args;
use telestore::util::text::escape_control;
use telestore::Options;

#[derive(Args, Debug)]
pub struct DevicesArgs {
    /// Only devices carrying this tag, as KEY=VALUE (e.g. fleet=East).
    #[arg(long = "where")]
    filter: Option<String>,
    /// Output as JSON lines instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    dir: DirArg,
}

pub fn run(a: DevicesArgs) -> Result<()> {
    let tag = match &a.filter {
        Some(f) => match f.split_once('=') {
            Some((k, v)) if !k.is_empty() => Some((k.to_string(), v.to_string())),
            _ => bail!("--where {f:?}: expected KEY=VALUE, e.g. fleet=East"),
        },
        None => None,
    };
    let store = super::query::open_store(&a.dir.dir, Options::default())?;
    let list = store.devices(tag.as_ref().map(|(k, v)| (k.as_str(), v.as_str())));
    if a.json {
        for (id, d) in &list {
            let tags: serde_json::Map<String, serde_json::Value> = d
                .tags
                .iter()
                .map(|(k, v)| (k.clone(), v.clone().into()))
                .collect();
            println!(
                "{}",
                serde_json::json!({ "id": id, "name": d.name, "tags": tags })
            );
        }
    } else {
        println!("{:<16} {:<24} tags", "id", "name");
        for (id, d) in &list {
            let tags: Vec<String> = d.tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let name = escape_control(&d.name);
            println!("{id:<16} {name:<24} {}", escape_control(&tags.join(",")));
        }
    }
    store.close()?;
    Ok(())
}
