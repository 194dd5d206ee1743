//! One example for every command, shown after its `--help` (and so in
//! docs/cli.md). `tests/it/doc_examples.rs` runs them against the README's
//! demo fleet: those naming `--server`, `load` and `top` while a daemon
//! runs, then the rest on the stopped store, `serve` last. They assume
//! the tour's `readings` table (`telestore load --line-protocol`).

use clap::Command;

/// `(command path, example)` for every command that runs something.
pub const EXAMPLES: &[(&str, &str)] = &[
    (
        "table create",
        "telestore table create meters --field kwh:f64 --field voltage:f32 --ttl 365d",
    ),
    ("table alter", "telestore table alter meters --encoding rows"),
    ("table list", "telestore table list"),
    ("regions", "telestore regions --table readings"),
    ("regions split", "telestore regions split --table readings --region 0"),
    ("regions merge", "telestore regions merge --table readings --region 3"),
    ("top", "telestore top --server http://127.0.0.1:7071 --once 120x30"),
    (
        "serve",
        "telestore serve --dir ./telestore-data --http-listen 127.0.0.1:7071",
    ),
    (
        "load",
        "telestore load --trucks 100 --duration 1h --line-protocol",
    ),
    ("devices", "telestore devices --where fleet=East"),
    ("compact", "telestore compact --table readings --major"),
    ("flush", "telestore flush --server http://127.0.0.1:7071"),
    (
        "query latest",
        "telestore query latest --table readings --device truck-7 --n 3 --server http://127.0.0.1:7071",
    ),
    (
        "query range",
        "telestore query range --table readings --device truck-7 --from 2023-11-14T22:30:00Z --to 2023-11-14T22:31:00Z",
    ),
    (
        "query scan",
        "telestore query scan --table readings --where fleet=East --fields velocity --limit 5",
    ),
    (
        "query agg",
        "telestore query agg --table readings --fn max --fields velocity --every 1h --group-by fleet",
    ),
    (
        "sql",
        "telestore sql \"SELECT fleet, count(*) AS n FROM readings GROUP BY fleet ORDER BY fleet\"",
    ),
    (
        "export",
        "telestore export --table readings --from 2023-11-14T00:00:00Z --to 2023-11-15T00:00:00Z --out day.parquet",
    ),
    ("verify", "telestore verify"),
    ("repair", "telestore repair"),
];

/// `cmd` with each command's example after its help.
pub fn attach(cmd: Command) -> Command {
    attach_under(cmd, "")
}

fn attach_under(mut cmd: Command, path: &str) -> Command {
    if let Some((_, ex)) = EXAMPLES.iter().find(|(p, _)| *p == path) {
        let example = format!("Example:\n\n    {ex}");
        let text = match cmd.get_after_help() {
            Some(before) => format!("{before}\n\n{example}"),
            None => example,
        };
        cmd = cmd.after_help(text);
    }
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for name in names {
        let sub = if path.is_empty() {
            name.clone()
        } else {
            format!("{path} {name}")
        };
        cmd = cmd.mut_subcommand(&name, |c| attach_under(c, &sub));
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// The paths of the visible commands that take no subcommand (those an
    /// example is owed for).
    fn leaf_paths(cmd: &Command) -> Vec<String> {
        let mut out = Vec::new();
        leaves(cmd, "", &mut out);
        out
    }

    fn leaves(cmd: &Command, path: &str, out: &mut Vec<String>) {
        let subs: Vec<&Command> = cmd
            .get_subcommands()
            .filter(|s| !s.is_hide_set() && s.get_name() != "help")
            .collect();
        if subs.is_empty() && !path.is_empty() {
            out.push(path.to_string());
        }
        for s in subs {
            let p = if path.is_empty() {
                s.get_name().to_string()
            } else {
                format!("{path} {}", s.get_name())
            };
            leaves(s, &p, out);
        }
    }

    #[test]
    fn every_command_has_one_example_of_itself() {
        let cmd = super::super::Cli::command();
        let leaves = leaf_paths(&cmd);
        assert!(leaves.len() >= 15, "{leaves:?}");
        // `regions` has subcommands and runs on its own too.
        for path in leaves.iter().map(String::as_str).chain(["regions"]) {
            let ex = EXAMPLES.iter().filter(|(p, _)| *p == path).count();
            assert_eq!(ex, 1, "{path}: {ex} examples");
        }
        let with_examples = attach(super::super::Cli::command());
        for (path, ex) in EXAMPLES {
            assert!(ex.starts_with(&format!("telestore {path}")), "{path}: {ex}");
            let mut c = with_examples.clone();
            for word in path.split(' ') {
                c = c
                    .find_subcommand(word)
                    .unwrap_or_else(|| panic!("{path}: no command {word}"))
                    .clone();
            }
            let help = c.render_help().to_string();
            assert!(help.contains(ex), "{path}: the example is not in its help");
        }
    }
}
