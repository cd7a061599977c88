//! Single-line flow collections of scalars (`[a, "b"]`, `{name: x, url: y}`), as hand-written
//! CSVs use them. Anything richer (nesting, multi-line, `:` in plain scalars, trailing commas)
//! is left to the general path.

use std::borrow::Cow;

use super::scalar::{push_escaped, push_json_string, push_plain};
use super::{Parser, is_blank, text};

impl<'a> Parser<'a> {
    /// A flow sequence or mapping starting at `at` that closes on the same line.
    pub(super) fn flow_collection(&mut self, at: usize) -> Option<()> {
        let end = self.line_end(at);
        let mapping = self.b[at] == b'{';
        let close = if mapping { b'}' } else { b']' };
        self.out.push(if mapping { '{' } else { '[' });
        let mut i = self.skip_blanks(at + 1, end);
        let mut keys: Vec<Cow<'a, str>> = Vec::new();
        if self.byte(i) == close {
            i += 1;
        } else {
            loop {
                if mapping {
                    let (key, after) = self.flow_scalar_text(i, end)?;
                    if keys.contains(&key) {
                        return None;
                    }
                    if !keys.is_empty() {
                        self.out.push(',');
                    }
                    push_json_string(&mut self.out, &key);
                    keys.push(key);
                    i = self.skip_blanks(after, end);
                    if self.byte(i) != b':' || !is_blank(self.byte(i + 1)) {
                        return None;
                    }
                    self.out.push(':');
                    i = self.skip_blanks(i + 1, end);
                }
                i = self.flow_value(i, end)?;
                i = self.skip_blanks(i, end);
                match self.byte(i) {
                    b',' => {
                        i = self.skip_blanks(i + 1, end);
                        if self.byte(i) == close || i >= end {
                            return None; // trailing comma
                        }
                        if !mapping {
                            self.out.push(',');
                        }
                    }
                    c if c == close => {
                        i += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        self.out.push(if mapping { '}' } else { ']' });
        self.finish_line_after_flow(i)
    }

    fn skip_blanks(&self, mut i: usize, end: usize) -> usize {
        while i < end && is_blank(self.b[i]) {
            i += 1;
        }
        i
    }

    /// A scalar value inside a flow collection: quoted, or plain (resolved); returns the
    /// offset after it.
    fn flow_value(&mut self, i: usize, end: usize) -> Option<usize> {
        match self.byte(i) {
            b'"' | b'\'' => {
                let (value, after) = self.flow_scalar_text(i, end)?;
                push_json_string(&mut self.out, &value);
                Some(after)
            }
            _ => {
                let (value, after) = self.flow_plain(i, end)?;
                push_plain(&mut self.out, value)?;
                Some(after)
            }
        }
    }

    /// A key or quoted value: its decoded text and the offset after it.
    fn flow_scalar_text(&self, i: usize, end: usize) -> Option<(Cow<'a, str>, usize)> {
        let text: &'a str = self.text;
        match self.byte(i) {
            b'"' | b'\'' => {
                let close = text::quoted_end_on_line(&self.b[i..end])?;
                let mut decoded = String::new();
                let mut check = String::new();
                push_escaped(&mut check, &text[i..i + close])?;
                text::unquote_single_line(&text[i..i + close], &mut decoded)?;
                Some((Cow::Owned(decoded), i + close))
            }
            _ => {
                let (value, after) = self.flow_plain(i, end)?;
                let mut check = String::new();
                push_escaped(&mut check, value)?;
                Some((Cow::Borrowed(value), after))
            }
        }
    }

    /// A plain scalar in flow context: up to `,`, `]`, `}` or a `:` (which is left to the
    /// caller), trailing blanks dropped.
    fn flow_plain(&self, i: usize, end: usize) -> Option<(&'a str, usize)> {
        let first = self.byte(i);
        if i >= end || b"-?:,[]{}#&*!|>'\"%@`".contains(&first) {
            return None;
        }
        let mut j = i;
        while j < end {
            match self.b[j] {
                b',' | b']' | b'}' => break,
                b':' => break,
                b'#' if is_blank(self.b[j - 1]) => return None,
                b'[' | b'{' => return None,
                _ => j += 1,
            }
        }
        let text: &'a str = self.text;
        let value = text[i..j].trim_end_matches([' ', '\t']);
        if value.is_empty() {
            return None;
        }
        Some((value, i + value.len()))
    }

    fn finish_line_after_flow(&mut self, i: usize) -> Option<()> {
        let end = self.line_end(i);
        let rest = self.text[i..end].trim_start_matches([' ', '\t']);
        if !rest.is_empty() && !rest.starts_with('#') {
            return None;
        }
        let mut check = String::new();
        push_escaped(&mut check, rest)?;
        self.next_line_from(end);
        Some(())
    }
}
