//! Go `encoding/json` string escaping with HTML escaping on (the default of `json.Marshal` and
//! `json.NewEncoder`). The one escaper of the crate: the OLM hashes
//! and the catalog's Go-JSON output (`catalog::go_json::marshal_sorted`) both write with it.
//!
//! Backspace and form feed are written `\b` and `\f`, as Go writes them since Go 1.22 (older Go
//! wrote `\u0008` and `\u000c`); OLM v0.31 and opm v1.50 are built with a later Go.

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `text` as a quoted JSON string exactly as Go's encoder writes it.
pub fn write_go_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        push_escaped_char(out, c);
    }
    out.push('"');
}

/// Appends raw bytes as a quoted JSON string; each byte that is not part of valid UTF-8 becomes
/// `\ufffd`, as Go does for strings holding invalid UTF-8.
pub fn write_go_bytes(out: &mut String, bytes: &[u8]) {
    out.push('"');
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            push_escaped_char(out, c);
        }
        for _ in chunk.invalid() {
            out.push_str("\\ufffd");
        }
    }
    out.push('"');
}

/// `text` quoted and escaped the Go way, as a new string.
pub fn go_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    write_go_string(&mut out, text);
    out
}

fn push_escaped_char(out: &mut String, c: char) {
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        '<' | '>' | '&' | '\u{0}'..='\u{1f}' => {
            let b = c as u32 as usize;
            out.push_str("\\u00");
            out.push(char::from(HEX[b >> 4]));
            out.push(char::from(HEX[b & 0xf]));
        }
        '\u{2028}' => out.push_str("\\u2028"),
        '\u{2029}' => out.push_str("\\u2029"),
        other => out.push(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_escaping_table() {
        let table: &[(&str, &str)] = &[
            ("plain", r#""plain""#),
            ("a\"b", r#""a\"b""#),
            ("back\\slash", r#""back\\slash""#),
            ("nl\ncr\rtab\t", r#""nl\ncr\rtab\t""#),
            ("bs\u{8}ff\u{c}", r#""bs\bff\f""#),
            ("\u{0}\u{1}\u{1f}", r#""\u0000\u0001\u001f""#),
            (
                "<a href=\"x\">&amp;</a>",
                r#""\u003ca href=\"x\"\u003e\u0026amp;\u003c/a\u003e""#,
            ),
            ("line\u{2028}para\u{2029}", r#""line\u2028para\u2029""#),
            ("del\u{7f}", "\"del\u{7f}\""),
            ("ünï ☃ 𝄞", "\"ünï ☃ 𝄞\""),
            ("/slash'quote", r#""/slash'quote""#),
            ("", r#""""#),
        ];
        for (input, want) in table {
            assert_eq!(go_quote(input), *want, "input {input:?}");
        }
    }

    #[test]
    fn invalid_utf8_bytes_become_replacement_escapes() {
        let mut out = String::new();
        write_go_bytes(&mut out, b"a\xffb\xc3(<");
        assert_eq!(out, r#""a\ufffdb\ufffd(\u003c""#);
    }

    #[test]
    fn valid_bytes_match_string_form() {
        let text = "x<y>\u{2028}é";
        let mut from_bytes = String::new();
        write_go_bytes(&mut from_bytes, text.as_bytes());
        assert_eq!(from_bytes, go_quote(text));
    }
}
