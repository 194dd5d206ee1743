//! Text from the network shown on a terminal.

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
