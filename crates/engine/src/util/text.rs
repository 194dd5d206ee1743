//! Text shown on a terminal: what came from the network, and sizes.

use std::borrow::Cow;

/// `s` with every control character (Unicode `Cc`: C0, DEL, C1) written
/// as a `\u{…}` escape, so that what a writer stored cannot move the
/// cursor, ring the bell or start an escape sequence where it is printed.
/// Backslashes are left alone: the output is for eyes, not for parsing.
pub fn escape_control(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Bytes in a short human form: `512 B`, `1.5 KiB`, `2.0 GiB`.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert!(matches!(escape_control("truck-1 é"), Cow::Borrowed(_)));
        assert_eq!(escape_control("a\u{7}b\u{1b}[2J"), "a\\u{7}b\\u{1b}[2J");
        assert_eq!(escape_control("\u{9b}x\n"), "\\u{9b}x\\u{a}");
    }
}
