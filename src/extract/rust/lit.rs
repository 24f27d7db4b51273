//! Rust string literals -> their value, with every byte of the value placed in the source.
//!
//! `LitStr::value()` unescapes, so offsets inside the value differ from the source; this reads
//! the literal's own text instead: escapes, `\`-newline continuations and raw strings.

use crate::source::OffsetMap;

/// Decode the literal whose source text is `text` and starts at byte `at` of the host file.
/// `None` for byte and C strings, and for text that is not a string literal.
pub fn decode(text: &str, at: usize) -> Option<(String, OffsetMap)> {
    if let Some(raw) = text.strip_prefix('r') {
        let hashes = raw.bytes().take_while(|&b| b == b'#').count();
        let body = raw.get(hashes + 1..raw.len().checked_sub(hashes + 1)?)?;
        return Some((body.to_string(), OffsetMap::shifted(at + 1 + hashes + 1)));
    }
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    let mut value = String::with_capacity(inner.len());
    let mut map = OffsetMap::shifted(at + 1);
    let mut chars = inner.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c != '\\' {
            value.push(c);
            continue;
        }
        let Some((_, e)) = chars.next() else { break };
        match e {
            'n' => value.push('\n'),
            't' => value.push('\t'),
            'r' => value.push('\r'),
            '0' => value.push('\0'),
            '\\' | '\'' | '"' => value.push(e),
            'x' => {
                let hex: String = (0..2)
                    .filter_map(|_| chars.next().map(|(_, c)| c))
                    .collect();
                value.push(u8::from_str_radix(&hex, 16).map_or('?', char::from));
            }
            'u' => {
                let mut hex = String::new();
                for (_, c) in chars.by_ref() {
                    match c {
                        '{' => {}
                        '}' => break,
                        _ => hex.push(c),
                    }
                }
                value.push(
                    u32::from_str_radix(&hex, 16)
                        .ok()
                        .and_then(char::from_u32)
                        .unwrap_or('?'),
                );
            }
            '\n' | '\r' => {
                // Line continuation: the newline and the whitespace after it are not in the value.
                while chars.peek().is_some_and(|(_, c)| c.is_whitespace()) {
                    chars.next();
                }
            }
            _ => value.push(e),
        }
        // The next value byte sits after the escape in the source.
        let next = chars.peek().map_or(inner.len(), |&(j, _)| j);
        debug_assert!(next > i);
        map.push(value.len(), at + 1 + next);
    }
    Some((value, map))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cooked_strings_map_through_escapes() {
        let src = r#"x = "a\tb\"c\
            d FOR UPDATE";"#;
        let at = src.find('"').unwrap();
        let end = src.rfind('"').unwrap() + 1;
        let (value, map) = decode(&src[at..end], at).unwrap();
        assert_eq!(value, "a\tb\"cd FOR UPDATE");
        let f = value.find("FOR").unwrap();
        assert_eq!(&src[map.host(f)..map.host(f) + 3], "FOR");
        assert_eq!(&src[map.host(2)..map.host(2) + 1], "b");
        let d = value.find('d').unwrap();
        assert_eq!(&src[map.host(d)..map.host(d) + 1], "d");
    }

    #[test]
    fn raw_strings() {
        let src = r###"let q = r#"SELECT "a" FOR UPDATE"#;"###;
        let at = src.find("r#\"").unwrap();
        let end = src.rfind('#').unwrap() + 1;
        let (value, map) = decode(&src[at..end], at).unwrap();
        assert_eq!(value, r#"SELECT "a" FOR UPDATE"#);
        assert_eq!(&src[map.host(11)..map.host(11) + 3], "FOR");
        assert!(decode("b\"x\"", 0).is_none());
    }
}
