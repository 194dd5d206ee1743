//! `docs/configuration.md` is generated from the settings' one declaration
//! (`crates/server/src/settings/mod.rs`); this keeps the checked-in file
//! current (regenerate with
//! `UPDATE_DOCS=1 cargo test -p telestore-server --test it settings::`),
//! and every TOML example of the docs loads as a configuration.

use std::path::Path;
use telestore_server::settings::{markdown, DaemonConfig};

fn docs() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs")
}

#[test]
fn the_checked_in_reference_is_the_generated_one() {
    let text = markdown();
    let path = docs().join("configuration.md");
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == text,
        "docs/configuration.md differs from the settings: run UPDATE_DOCS=1 cargo test -p telestore-server --test it settings::"
    );
}

#[test]
fn every_toml_example_in_the_docs_is_a_valid_configuration() {
    let mut checked = 0;
    for page in ["operations.md", "ingest.md"] {
        let text = std::fs::read_to_string(docs().join(page)).unwrap();
        for block in text.split("```toml\n").skip(1) {
            let body = block.split("```").next().unwrap();
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("telestore.toml");
            std::fs::write(&p, body).unwrap();
            if let Err(e) = DaemonConfig::load(Some(&p), &[]) {
                // Token files and TLS files of an example do not exist
                // here; everything else must load.
                let e = e.to_string();
                assert!(e.contains("No such file"), "{page}: {e}\n{body}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 2, "found {checked} TOML examples");
}
