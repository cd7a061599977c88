//! Scalars for the fast YAML path: JSON string escaping with libyaml's character checks, and
//! plain-scalar resolution mirroring `serde_yaml_ng` (so both YAML paths yield the same JSON).

use std::fmt::Write;

/// Checks raw source text: `None` for characters libyaml rejects or treats as line breaks
/// (C0/C1 controls other than tab, DEL, NEL, U+2028/2029, U+FFFE/FFFF); the caller then falls
/// back to the general parser, which reports or handles them.
pub fn check_chars(s: &str) -> Option<()> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if (0x20..0x7f).contains(&c) || c == b'\t' {
            i += 1;
            continue;
        }
        match c {
            0xC2 if b.get(i + 1).is_some_and(|&n| (0x80..=0x9F).contains(&n)) => return None,
            0xE2 if b.get(i + 1) == Some(&0x80) && matches!(b.get(i + 2), Some(0xA8 | 0xA9)) => {
                return None;
            }
            0xEF if b.get(i + 1) == Some(&0xBF) && matches!(b.get(i + 2), Some(0xBE | 0xBF)) => {
                return None;
            }
            // A byte-order mark is skipped by libyaml's reader even mid-stream.
            0xEF if b.get(i + 1) == Some(&0xBB) && b.get(i + 2) == Some(&0xBF) => return None,
            c if c >= 0x80 => {}
            _ => return None,
        }
        i += 1;
    }
    Some(())
}

/// `check_chars` with a fast path for printable ASCII (most catalog text), which it accepts.
pub fn check_text(s: &str) -> Option<()> {
    if s.bytes().fold(true, |ok, c| ok & (0x20..0x7f).contains(&c)) {
        return Some(());
    }
    check_chars(s)
}

/// Appends `s` as a JSON string literal.
pub fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        push_json_char(out, c);
    }
    out.push('"');
}

/// Appends one decoded character, JSON-escaped.
pub fn push_json_char(out: &mut String, c: char) {
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        c if (c as u32) < 0x20 => {
            let _ = write!(out, "\\u{:04x}", c as u32);
        }
        c => out.push(c),
    }
}

/// Bytes that need a look: controls, `"`, `\`, DEL and non-ASCII.
static SPECIAL: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = i < 0x20 || i == b'"' as usize || i == b'\\' as usize || i >= 0x7f;
        i += 1;
    }
    t
};

/// Whether any of eight bytes is a control, `"`, `\\`, DEL or non-ASCII (SWAR test).
#[inline]
fn word_has_special(chunk: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(chunk);
    let w = u64::from_le_bytes(bytes);
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let below_space = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
    (w & HIGH) != 0
        || below_space != 0
        || has_zero(w ^ (ONES * b'"' as u64)) != 0
        || has_zero(w ^ (ONES * b'\\' as u64)) != 0
        || has_zero(w ^ (ONES * 0x7f)) != 0
}

/// Appends raw YAML text JSON-escaped (no quotes), checking it as `check_chars` does.
///
/// Most catalog text is printable ASCII, and much of it is JSON inside YAML (`alm-examples`),
/// dense with `"`: such text is recognised in one branch-free pass and then only `"` and `\`
/// are looked for (memchr). Anything else takes the byte-by-byte path.
pub fn push_escaped(out: &mut String, s: &str) -> Option<()> {
    let b = s.as_bytes();
    let printable = b.iter().fold(true, |ok, &c| ok & (0x20..0x7f).contains(&c));
    if !printable {
        return push_escaped_checked(out, s);
    }
    out.reserve(b.len() + 16);
    let mut start = 0;
    for i in memchr::memchr2_iter(b'"', b'\\', b) {
        // Both escapes are a backslash before the character itself.
        out.push_str(&s[start..i]);
        out.push('\\');
        start = i;
    }
    out.push_str(&s[start..]);
    Some(())
}

/// `push_escaped` for text with controls, tabs or non-ASCII: runs of ordinary ASCII are
/// copied at once, everything else is looked at byte by byte.
fn push_escaped_checked(out: &mut String, s: &str) -> Option<()> {
    let b = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        // Skip eight ordinary bytes at a time.
        while i + 8 <= b.len() && !word_has_special(&b[i..i + 8]) {
            i += 8;
        }
        if i >= b.len() {
            break;
        }
        let c = b[i];
        if !SPECIAL[c as usize] {
            i += 1;
            continue;
        }
        let escape = match c {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\t' => "\\t",
            0x7f => return None,
            c if c < 0x20 => return None,
            0xC2 if b.get(i + 1).is_some_and(|&n| (0x80..=0x9F).contains(&n)) => return None,
            0xE2 if b.get(i + 1) == Some(&0x80) && matches!(b.get(i + 2), Some(0xA8 | 0xA9)) => {
                return None;
            }
            0xEF if b.get(i + 1) == Some(&0xBF) && matches!(b.get(i + 2), Some(0xBE | 0xBF)) => {
                return None;
            }
            0xEF if b.get(i + 1) == Some(&0xBB) && b.get(i + 2) == Some(&0xBF) => return None,
            _ => {
                // Other non-ASCII bytes are copied as they are.
                i += 1;
                continue;
            }
        };
        out.push_str(&s[start..i]);
        out.push_str(escape);
        i += 1;
        start = i;
    }
    out.push_str(&s[start..]);
    Some(())
}

fn digits_but_not_number(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    s.len() > 1 && s.starts_with('0') && s[1..].bytes().all(|b| b.is_ascii_digit())
}

fn radix_prefixed(s: &str) -> Option<(&str, u32)> {
    for (prefix, radix) in [("0x", 16), ("0o", 8), ("0b", 2)] {
        if let Some(rest) = s.strip_prefix(prefix) {
            return Some((rest, radix));
        }
    }
    None
}

fn unsigned<T>(s: &str, parse: fn(&str, u32) -> Result<T, std::num::ParseIntError>) -> Option<T> {
    let unpositive = s.strip_prefix('+').unwrap_or(s);
    if let Some((rest, radix)) = radix_prefixed(unpositive) {
        if rest.starts_with(['+', '-']) {
            return None;
        }
        if let Ok(n) = parse(rest, radix) {
            return Some(n);
        }
    }
    if unpositive.starts_with(['+', '-']) || digits_but_not_number(s) {
        return None;
    }
    parse(unpositive, 10).ok()
}

fn negative<T>(s: &str, parse: fn(&str, u32) -> Result<T, std::num::ParseIntError>) -> Option<T> {
    for (prefix, radix) in [("-0x", 16), ("-0o", 8), ("-0b", 2)] {
        if let Some(rest) = s.strip_prefix(prefix)
            && let Ok(n) = parse(&format!("-{rest}"), radix)
        {
            return Some(n);
        }
    }
    if digits_but_not_number(s) {
        return None;
    }
    parse(s, 10).ok()
}

fn float(s: &str) -> Option<f64> {
    let unpositive = match s.strip_prefix('+') {
        Some(rest) if rest.starts_with(['+', '-']) => return None,
        Some(rest) => rest,
        None => s,
    };
    if matches!(unpositive, ".inf" | ".Inf" | ".INF") {
        return Some(f64::INFINITY);
    }
    if matches!(s, "-.inf" | "-.Inf" | "-.INF") {
        return Some(f64::NEG_INFINITY);
    }
    if matches!(s, ".nan" | ".NaN" | ".NAN") {
        return Some(f64::NAN);
    }
    unpositive.parse::<f64>().ok().filter(|f| f.is_finite())
}

/// Appends the JSON for an untagged plain scalar, resolved as `serde_yaml_ng` resolves it into
/// a `serde_json::Value`. `None` for values it turns into something JSON cannot hold the same
/// way (128-bit integers), which the general path handles.
pub fn push_plain(out: &mut String, s: &str) -> Option<()> {
    let first = s.as_bytes().first().copied();
    let maybe_special = match first {
        None => true,
        Some(c) => {
            c.is_ascii_digit()
                || matches!(
                    c,
                    b'+' | b'-' | b'.' | b'~' | b'n' | b'N' | b't' | b'T' | b'f' | b'F'
                )
        }
    };
    if !maybe_special {
        out.push('"');
        push_escaped(out, s)?;
        out.push('"');
        return Some(());
    }
    match s {
        "" | "~" | "null" | "Null" | "NULL" => {
            out.push_str("null");
            return Some(());
        }
        "true" | "True" | "TRUE" => {
            out.push_str("true");
            return Some(());
        }
        "false" | "False" | "FALSE" => {
            out.push_str("false");
            return Some(());
        }
        _ => {}
    }
    if let Some(n) = unsigned(s, u64::from_str_radix) {
        let _ = write!(out, "{n}");
        return Some(());
    }
    if let Some(n) = negative(s, i64::from_str_radix) {
        let _ = write!(out, "{n}");
        return Some(());
    }
    // Integers wider than 64 bits: leave them to the general path.
    if unsigned(s, u128::from_str_radix).is_some() || negative(s, i128::from_str_radix).is_some() {
        return None;
    }
    if !digits_but_not_number(s)
        && let Some(f) = float(s)
    {
        match serde_json::Number::from_f64(f) {
            Some(n) => {
                let _ = write!(out, "{n}");
            }
            None => out.push_str("null"),
        }
        return Some(());
    }
    out.push('"');
    push_escaped(out, s)?;
    out.push('"');
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn via_serde_yaml(s: &str) -> serde_json::Value {
        serde_yaml_ng::from_str(&format!("v: {s}\n"))
            .map(|m: serde_json::Map<String, serde_json::Value>| m["v"].clone())
            .unwrap()
    }

    #[test]
    fn plain_resolution_matches_serde_yaml_ng() {
        for s in [
            "abc",
            "null",
            "Null",
            "~",
            "true",
            "False",
            "TRUE",
            "yes",
            "on",
            "0",
            "12",
            "-3",
            "+4",
            "007",
            "-007",
            "0x1F",
            "0o17",
            "0b101",
            "-0x10",
            "1.5",
            "1e3",
            "-2.5e-3",
            ".5",
            "+.5",
            ".inf",
            "-.inf",
            ".nan",
            "1.2.3",
            "0.3.1",
            "1_000",
            "infinity",
            "nan",
            "0x",
            "+-1",
            "1e400",
            "18446744073709551615",
            "-9223372036854775808",
            "v1",
            "2023-01-01",
            "1:30",
        ] {
            let mut out = String::new();
            if push_plain(&mut out, s).is_none() {
                continue;
            }
            let ours: serde_json::Value = serde_json::from_str(&out).unwrap();
            assert_eq!(ours, via_serde_yaml(s), "{s}");
        }
        let mut out = String::new();
        assert!(push_plain(&mut out, "340282366920938463463374607431768211455").is_none());
    }

    #[test]
    fn rejects_what_libyaml_rejects() {
        assert!(check_chars("a\u{7}b").is_none());
        assert!(check_chars("a\u{85}b").is_none());
        assert!(check_chars("a\u{2028}b").is_none());
        assert!(check_chars("a\u{7f}").is_none());
        assert!(check_chars("é\tß €").is_some());
        let mut out = String::new();
        push_json_string(&mut out, "é \"q\" \\ \t\n\r\u{8}");
        assert_eq!(out, r#""é \"q\" \\ \t\n\r\u0008""#);
        out.clear();
        push_escaped(&mut out, "é \"q\" \\ \t€").unwrap();
        assert_eq!(out, r#"é \"q\" \\ \t€"#);
        assert!(push_escaped(&mut out, "a\u{85}").is_none());
        assert!(push_escaped(&mut out, "a\u{1}").is_none());
        for probe in [
            "abcdefgh\"",
            "abcdefghij\\k",
            "abcdefgh\u{7f}",
            "0123456789abcdef\u{1}",
            "abcdefghé",
        ] {
            out.clear();
            let r = push_escaped(&mut out, probe);
            let mut slow = String::new();
            let expected = check_chars(probe).map(|_| {
                push_json_string(&mut slow, probe);
                slow[1..slow.len() - 1].to_string()
            });
            assert_eq!(r.map(|_| out.clone()), expected, "{probe:?}");
        }
    }
}
