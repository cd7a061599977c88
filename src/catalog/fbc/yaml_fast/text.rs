//! Scalar bodies for the fast YAML path: plain (multi-line), quoted (multi-line, escapes) and
//! block (`|`, `>`, chomping) scalars, following libyaml's folding rules. They write JSON
//! directly into the parser's output.

use super::scalar::{check_chars, check_text, push_escaped, push_json_char, push_plain};
use super::{Parser, is_blank};

/// Index just past the closing quote of the quoted scalar starting at `line[0]`, if it closes
/// on this line.
pub fn quoted_end_on_line(line: &[u8]) -> Option<usize> {
    let q = *line.first()?;
    let mut i = 1;
    while i < line.len() {
        match line[i] {
            b'\\' if q == b'"' => i += 2,
            b'\'' if q == b'\'' && line.get(i + 1) == Some(&b'\'') => i += 2,
            c if c == q => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// Decodes a one-line quoted scalar (quotes included) into `out` as plain text.
pub fn unquote_single_line(quoted: &str, out: &mut String) -> Option<()> {
    let q = quoted.as_bytes()[0];
    let body = &quoted[1..quoted.len() - 1];
    if q == b'\'' {
        out.push_str(&body.replace("''", "'"));
        return Some(());
    }
    let mut rest = body;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        rest = decode_escape(&rest[i + 1..], |c| out.push(c))?;
    }
    out.push_str(rest);
    Some(())
}

/// Decodes the escape after a backslash, handing the character to `push`; returns the text
/// after it.
fn decode_escape(s: &str, mut push: impl FnMut(char)) -> Option<&str> {
    let c = *s.as_bytes().first()?;
    let simple = match c {
        b'0' => Some('\0'),
        b'a' => Some('\u{7}'),
        b'b' => Some('\u{8}'),
        b't' | b'\t' => Some('\t'),
        b'n' => Some('\n'),
        b'v' => Some('\u{b}'),
        b'f' => Some('\u{c}'),
        b'r' => Some('\r'),
        b'e' => Some('\u{1b}'),
        b' ' => Some(' '),
        b'"' => Some('"'),
        b'/' => Some('/'),
        b'\\' => Some('\\'),
        b'N' => Some('\u{85}'),
        b'_' => Some('\u{a0}'),
        b'L' => Some('\u{2028}'),
        b'P' => Some('\u{2029}'),
        _ => None,
    };
    if let Some(ch) = simple {
        push(ch);
        return Some(&s[1..]);
    }
    let width = match c {
        b'x' => 2,
        b'u' => 4,
        b'U' => 8,
        _ => return None,
    };
    let hex = s.get(1..1 + width)?;
    let code = u32::from_str_radix(hex, 16).ok()?;
    push(char::from_u32(code)?);
    Some(&s[1 + width..])
}

fn push_newlines(out: &mut String, n: usize) {
    for _ in 0..n {
        out.push_str("\\n");
    }
}

impl Parser<'_> {
    /// Rest of the line after a closed scalar must be blank or a comment.
    fn finish_line(&mut self, from: usize) -> Option<()> {
        let end = self.line_end(from);
        let rest = self.text[from..end].trim_start_matches([' ', '\t']);
        if !rest.is_empty() && !rest.starts_with('#') {
            return None;
        }
        check_chars(rest)?;
        self.next_line_from(end);
        Some(())
    }

    /// Moves over empty lines after a line break inside a flow or plain scalar, returning how
    /// many there were and the whitespace before the next line's content.
    fn fold_breaks(&mut self) -> (usize, usize) {
        let mut empty = 0;
        loop {
            let ind = self.b[self.pos..]
                .iter()
                .take_while(|&&c| is_blank(c))
                .count();
            if self.pos + ind < self.b.len() && self.b[self.pos + ind] == b'\n' {
                empty += 1;
                self.next_line_from(self.pos + ind);
                continue;
            }
            return (empty, ind);
        }
    }

    /// Body of a single- or double-quoted scalar starting at `at`, JSON-escaped.
    pub(super) fn quoted(&mut self, at: usize) -> Option<()> {
        let q = self.b[at];
        let mut i = at + 1;
        loop {
            let end = self.line_end(i);
            let mut escaped_break = false;
            let mut seg = i;
            while i < end {
                let c = self.b[i];
                if c == q {
                    if q == b'\'' && self.byte(i + 1) == b'\'' {
                        push_escaped(&mut self.out, &self.text[seg..i + 1])?;
                        i += 2;
                        seg = i;
                        continue;
                    }
                    push_escaped(&mut self.out, &self.text[seg..i])?;
                    return self.finish_line(i + 1);
                }
                if c == b'\\' && q == b'"' {
                    push_escaped(&mut self.out, &self.text[seg..i])?;
                    if i + 1 == end {
                        escaped_break = true;
                        seg = end;
                        break;
                    }
                    let out = &mut self.out;
                    let rest = decode_escape(&self.text[i + 1..end], |ch| push_json_char(out, ch))?;
                    i = end - rest.len();
                    seg = i;
                    continue;
                }
                i += 1;
            }
            // Unescaped trailing blanks before a line break are not content.
            let tail = &self.text[seg..end];
            push_escaped(
                &mut self.out,
                if escaped_break {
                    tail
                } else {
                    tail.trim_end_matches([' ', '\t'])
                },
            )?;
            if end >= self.b.len() {
                return None; // unterminated
            }
            self.next_line_from(end);
            let (empty, ind) = self.fold_breaks();
            if self.eof() || self.marker_at(self.pos).is_some() {
                return None;
            }
            // libyaml does not check the indentation of flow scalar continuation lines; tabs
            // in it are left to the general path.
            if ind != self.indent(self.pos) {
                return None;
            }
            if empty > 0 {
                push_newlines(&mut self.out, empty);
            } else if !escaped_break {
                self.out.push(' ');
            }
            i = self.pos + ind;
        }
    }

    /// One line of a plain scalar from `start`: the end of its content (trailing blanks
    /// dropped), its line end, and whether a comment ends it. `None` on `: ` (not allowed).
    fn plain_line(&self, start: usize) -> Option<(usize, usize, bool)> {
        let end = self.line_end(start);
        let line = &self.b[start..end];
        let mut stop = line.len();
        let mut from = 0;
        while let Some(j) = memchr::memchr2(b'#', b':', &line[from..]) {
            let i = from + j;
            if line[i] == b'#' {
                if i > 0 && is_blank(line[i - 1]) {
                    stop = i;
                    break;
                }
            } else if matches!(line.get(i + 1), None | Some(b' ' | b'\t')) {
                return None;
            }
            from = i + 1;
        }
        let content = self.text[start..start + stop].trim_end_matches([' ', '\t']);
        if stop < line.len() {
            check_chars(&self.text[start + stop..end])?;
        }
        Some((start + content.len(), end, stop < line.len()))
    }

    /// A plain scalar starting at `at`, continuing on lines more indented than `parent`.
    pub(super) fn plain(&mut self, parent: isize, at: usize) -> Option<()> {
        let (content_end, end, comment) = self.plain_line(at)?;
        self.next_line_from(end);
        if comment || !self.plain_continues(parent)? {
            return push_plain(&mut self.out, &self.text[at..content_end]);
        }
        // Multi-line plain scalars contain a space or newline, so they are always strings.
        self.out.push('"');
        self.push_text(at, content_end)?;
        loop {
            let (empty, ind) = self.fold_breaks();
            if empty > 0 {
                push_newlines(&mut self.out, empty);
            } else {
                self.out.push(' ');
            }
            let start = self.pos + ind;
            let (content_end, end, comment) = self.plain_line(start)?;
            self.push_text(start, content_end)?;
            self.next_line_from(end);
            if comment || !self.plain_continues(parent)? {
                break;
            }
        }
        self.out.push('"');
        Some(())
    }

    /// Whether the next non-empty line continues a plain scalar (`pos` is left unchanged);
    /// `None` for cases left to the general path (tab indentation, a comment line inside).
    fn plain_continues(&mut self, parent: isize) -> Option<bool> {
        let save = (self.pos, self.line);
        let (_, ind) = self.fold_breaks();
        let result = if self.eof()
            || self.pos + ind >= self.b.len()
            || self.marker_at(self.pos).is_some()
            || (self.indent(self.pos) as isize) <= parent
        {
            Some(false)
        } else if ind != self.indent(self.pos) || self.b[self.pos + ind] == b'#' {
            None
        } else {
            Some(true)
        };
        (self.pos, self.line) = save;
        result
    }

    /// Body of a literal (`|`) or folded (`>`) block scalar whose header starts at `at`.
    pub(super) fn block_scalar(&mut self, parent: isize, at: usize) -> Option<()> {
        let literal = self.b[at] == b'|';
        let end = self.line_end(at);
        let header = &self.text[at + 1..end];
        let (chomp, rest) = match header.as_bytes().first() {
            Some(b'-') => (-1, &header[1..]),
            Some(b'+') => (1, &header[1..]),
            _ => (0, header),
        };
        if rest.as_bytes().first().is_some_and(|c| c.is_ascii_digit()) {
            return None; // explicit indentation indicator
        }
        let rest = rest.trim_start_matches([' ', '\t']);
        if !rest.is_empty() && (!rest.starts_with('#') || rest.len() == header.len()) {
            return None;
        }
        check_chars(rest)?;
        self.next_line_from(end);

        let min_indent = (parent + 1).max(1) as usize;
        let mut indent = 0usize;
        let mut leading_break = false;
        let mut trailing_breaks = 0usize;
        let mut leading_blank = false;
        self.block_breaks(&mut indent, min_indent, &mut trailing_breaks)?;
        loop {
            if self.eof() || !self.has_indent(indent) {
                break;
            }
            let content_start = self.pos + indent;
            let line_end = self.line_end(content_start);
            if content_start >= line_end && line_end == self.b.len() {
                return None; // whitespace-only last line without a newline
            }
            let trailing_blank = is_blank(self.byte(content_start));
            if !literal && leading_break && !leading_blank && !trailing_blank {
                if trailing_breaks == 0 {
                    self.out.push(' ');
                }
            } else if leading_break {
                self.out.push_str("\\n");
            }
            push_newlines(&mut self.out, trailing_breaks);
            trailing_breaks = 0;
            leading_blank = trailing_blank;
            self.push_text(content_start, line_end)?;
            self.next_line_from(line_end);
            if line_end == self.b.len() {
                leading_break = false;
                break;
            }
            leading_break = true;
            // The common case, a content line at the scalar's indentation, needs no break
            // scanning (`block_breaks` would stop at once on it).
            if !(self.has_indent(indent) && self.byte(self.pos + indent) != b'\n') {
                self.block_breaks(&mut indent, min_indent, &mut trailing_breaks)?;
            }
        }
        if chomp != -1 && leading_break {
            self.out.push_str("\\n");
        }
        if chomp == 1 {
            push_newlines(&mut self.out, trailing_breaks);
        }
        Some(())
    }

    /// Appends `text[from..to]` JSON-escaped; while `emptying` (the string will be written as
    /// `""`), only checks its characters, as escaping would, and records that text was left
    /// out (a one-line block scalar would otherwise leave no trace of it in `out`).
    fn push_text(&mut self, from: usize, to: usize) -> Option<()> {
        let text = &self.text[from..to];
        if self.emptying {
            self.emptied |= !text.is_empty();
            return check_text(text);
        }
        push_escaped(&mut self.out, text)
    }

    /// Whether the line at `pos` starts with at least `n` spaces (compared at once rather than
    /// counted: block scalar lines are mostly indentation).
    fn has_indent(&self, n: usize) -> bool {
        const SPACES: [u8; 128] = [b' '; 128];
        let line = &self.b[self.pos..];
        if n <= SPACES.len() {
            line.len() >= n && line[..n] == SPACES[..n]
        } else {
            self.indent(self.pos) >= n
        }
    }

    /// libyaml `scan_block_scalar_breaks`: consumes empty lines (counting them) and, when the
    /// indentation is not known yet, sets it from the first content line.
    fn block_breaks(
        &mut self,
        indent: &mut usize,
        min_indent: usize,
        breaks: &mut usize,
    ) -> Option<()> {
        let mut max_indent = 0;
        loop {
            if self.eof() {
                break;
            }
            let spaces = self.indent(self.pos);
            let col = if *indent == 0 {
                spaces
            } else {
                spaces.min(*indent)
            };
            max_indent = max_indent.max(col);
            let c = self.byte(self.pos + col);
            if c == b'\t' && (*indent == 0 || col < *indent) {
                return None;
            }
            if c != b'\n' || self.pos + col >= self.b.len() {
                break;
            }
            *breaks += 1;
            let end = self.line_end(self.pos + col);
            self.next_line_from(end);
        }
        if *indent == 0 {
            *indent = max_indent.max(min_indent);
            if !self.eof() && self.indent(self.pos) < max_indent && max_indent > min_indent {
                // Leading empty lines more indented than the first content line: libyaml then
                // ends the scalar early; leave that to the general path.
                return None;
            }
        }
        Some(())
    }
}
