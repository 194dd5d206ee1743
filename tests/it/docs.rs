//! The user documentation stays true: docs/cli.md is what the commands'
//! `--help` says (regenerate with `UPDATE_DOCS=1 cargo test --test it docs::`),
//! no user-facing text names a work item, and every relative link in
//! README.md and docs/ resolves, anchors included.

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn cli_reference_is_the_help_of_every_command() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_telestore"))
        .arg("cli-markdown")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let generated = String::from_utf8(out.stdout).unwrap();
    assert!(generated.contains("## `telestore serve`"), "{generated}");
    assert!(
        !generated.contains("cli-markdown") && !generated.contains("crash-writer"),
        "hidden commands are not documented"
    );
    let path = root().join("docs/cli.md");
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "docs/cli.md differs from the commands' help: run UPDATE_DOCS=1 cargo test --test it docs::"
    );
}

#[test]
fn no_user_facing_text_names_a_work_item() {
    let mut files = vec![root().join("README.md"), root().join("docs/cli.md")];
    files.extend(markdown_in(&root().join("docs")));
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for (no, line) in text.lines().enumerate() {
            let l = line.to_lowercase();
            let bad = l
                .match_indices("issue ")
                .any(|(i, _)| l[i + 6..].starts_with(|c: char| c.is_ascii_digit()));
            assert!(!bad, "{}:{}: {line}", f.display(), no + 1);
        }
    }
}

fn markdown_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    v.sort();
    v
}

/// GitHub's anchor of a heading: lower case, spaces to `-`, punctuation
/// other than `-` and `_` dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> Vec<String> {
    let mut in_code = false;
    let mut v = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        } else if !in_code && line.starts_with('#') {
            v.push(slug(line.trim_start_matches('#')));
        }
    }
    v
}

/// `(target, line)` of every inline link `](target)` outside code blocks.
fn links(text: &str) -> Vec<(String, usize)> {
    let mut in_code = false;
    let mut v = Vec::new();
    for (no, line) in text.lines().enumerate() {
        if line.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            v.push((after[..end].to_string(), no + 1));
            rest = &after[end..];
        }
    }
    v
}

#[test]
fn relative_links_resolve() {
    let mut files = vec![root().join("README.md")];
    files.extend(markdown_in(&root().join("docs")));
    let mut broken = Vec::new();
    let mut checked = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (target, line) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let file = if path.is_empty() {
                f.clone()
            } else {
                f.parent().unwrap().join(path)
            };
            if !file.exists() {
                broken.push(format!("{}:{line}: {target} (no such file)", f.display()));
                continue;
            }
            if !anchor.is_empty() && file.extension().is_some_and(|e| e == "md") {
                let t = std::fs::read_to_string(&file).unwrap();
                if !anchors(&t).iter().any(|a| a == anchor) {
                    broken.push(format!(
                        "{}:{line}: {target} (no such heading)",
                        f.display()
                    ));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(
        checked > 20,
        "only {checked} links found: is the parser right?"
    );
}

#[test]
fn the_link_checker_catches_what_it_should() {
    assert_eq!(slug(" Tokens and auth"), "tokens-and-auth");
    assert_eq!(slug("MQTT: at least once"), "mqtt-at-least-once");
    let l = links("see [a](x.md#y) and [b](http://z)\n```\n[c](no.md)\n```");
    assert_eq!(
        l,
        vec![("x.md#y".to_string(), 1), ("http://z".to_string(), 1)]
    );
    assert_eq!(
        anchors("# One\n```\n# not\n```\n## Two words"),
        ["one", "two-words"]
    );
}

/// Every repository path named in backticks (`crates/engine/src/wal/`,
/// `tests/it/docs.rs`) by the README, docs/, formats/ and the module docs
/// of the code exists: a moved or renamed file cannot leave a stale
/// pointer behind.
#[test]
fn code_paths_named_in_docs_exist() {
    let mut files = vec![root().join("README.md")];
    files.extend(markdown_in(&root().join("docs")));
    files.extend(markdown_in(&root().join("formats")));
    for dir in ["src", "crates", "tests", "benches"] {
        files.extend(rust_in(&root().join(dir)));
    }
    let mut missing = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let rust = f.extension().is_some_and(|e| e == "rs");
        for (no, line) in text.lines().enumerate() {
            if rust && !line.trim_start().starts_with("//") {
                continue;
            }
            for p in named_paths(line) {
                if !root().join(&p).exists() {
                    missing.push(format!("{}:{}: `{p}`", f.display(), no + 1));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "paths that do not exist:\n{}",
        missing.join("\n")
    );
}

/// Backticked tokens of `line` that look like a repository path.
fn named_paths(line: &str) -> Vec<String> {
    const TOPS: [&str; 9] = [
        "crates/",
        "src/",
        "tests/",
        "tools/",
        "benches/",
        "fuzz/",
        "formats/",
        "docs/",
        "examples/",
    ];
    line.split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| TOPS.iter().any(|top| t.starts_with(top)))
        .filter(|t| {
            t.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c))
        })
        .map(|t| t.trim_end_matches('.').to_string())
        .collect()
}

fn rust_in(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn the_path_checker_reads_backticked_paths_only() {
    let line = "see `crates/engine/src/wal/` and `src/cli/`, not src/x or `Store::open`";
    assert_eq!(named_paths(line), ["crates/engine/src/wal/", "src/cli/"]);
    assert!(named_paths("`src/{a,b}.rs` `tests/*.rs`").is_empty());
}
