//! `docs/configuration.md`, generated from [`SETTINGS`] (a test keeps the
//! file current, as `docs/cli.md` is kept).

use super::{Group, SETTINGS};
use std::fmt::Write;

/// The settings reference as Markdown.
pub fn markdown() -> String {
    let mut out = String::from(
        "# Configuration\n\n\
         <!-- Generated from crates/server/src/settings/mod.rs: \
         `UPDATE_DOCS=1 cargo test -p telestore-server --test it settings::` rewrites it. -->\n\n\
         Every setting of `telestore serve`, declared once in\n\
         `crates/server/src/settings/mod.rs`. Each one can be given, lowest\n\
         precedence first, as its default, a key of the configuration file\n\
         (`serve --config FILE`, TOML), its environment variable, its flag,\n\
         or `--set KEY=VALUE` (which also reaches a key of a table:\n\
         `--set mqtt.client_id=telestore-2`). An unknown key is an error.\n\n\
         Sizes take a unit (`64MiB`, `1.5GiB`, `512KiB`, `4096B`; `MB`, `GB`\n\
         are powers of 1000); a bare number is MiB, as the `_mib` in their\n\
         names says. `serve -h` shows the first group; `serve --help` all.\n\n",
    );
    for (group, title) in [
        (Group::Top, "Data, listeners and tokens"),
        (Group::Server, "Frontends"),
        (Group::Engine, "Storage engine"),
        (Group::Background, "Background work"),
        (Group::Query, "Queries"),
        (Group::Table, "Tables of the file"),
    ] {
        let _ = write!(
            out,
            "## {title}\n\n| key | flag / environment | default | |\n| --- | --- | --- | --- |\n"
        );
        for s in SETTINGS.iter().filter(|s| s.group == group) {
            let flag = if group == Group::Table {
                format!("`[{}]`", s.key)
            } else {
                format!("`{} {}`<br>`{}`", s.flag(), s.value_name, s.env()).replace('|', "\\|")
            };
            let mut text = s.text().replace("\n\n", "<br>").replace('|', "\\|");
            if let Some((lo, hi)) = s.range {
                let _ = write!(text, " Range {lo}..={hi}.");
            }
            let _ = writeln!(
                out,
                "| `{}` | {flag} | `{}` | {text} |",
                s.key,
                s.default_text()
            );
        }
        out.push('\n');
    }
    out
}
