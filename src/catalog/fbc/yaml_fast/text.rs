//! Scalar bodies for the fast YAML path: plain (multi-line), quoted (multi-line, escapes) and
//! block (`|`, `>`, chomping) scalars, following libyaml's folding rules.

use super::scalar::check_chars;
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

/// Decodes a one-line quoted scalar (quotes included) into `out`.
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
        rest = decode_escape(&rest[i + 1..], out)?;
    }
    out.push_str(rest);
    Some(())
}

/// Decodes the escape after a backslash; returns the text after it.
fn decode_escape<'s>(s: &'s str, out: &mut String) -> Option<&'s str> {
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
        out.push(ch);
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
    out.push(char::from_u32(code)?);
    Some(&s[1 + width..])
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
        self.pos = from;
        self.next_line();
        Some(())
    }

    /// Moves over empty lines after a line break inside a flow or plain scalar, returning how
    /// many there were and the start of the next content line (its indentation included).
    fn fold_breaks(&mut self) -> (usize, usize) {
        let mut empty = 0;
        loop {
            let ind = self.b[self.pos..].iter().take_while(|&&c| is_blank(c)).count();
            if self.pos + ind < self.b.len() && self.b[self.pos + ind] == b'\n' {
                empty += 1;
                self.next_line();
                continue;
            }
            return (empty, ind);
        }
    }

    /// A single- or double-quoted scalar starting at `at`.
    pub(super) fn quoted(&mut self, at: usize, out: &mut String) -> Option<()> {
        let q = self.b[at];
        let mut i = at + 1;
        loop {
            let end = self.line_end(i);
            let mut kept = out.len(); // length before trailing raw blanks
            let mut escaped_break = false;
            let mut seg = i;
            while i < end {
                let c = self.b[i];
                if c == q {
                    if q == b'\'' && self.byte(i + 1) == b'\'' {
                        check_chars(&self.text[seg..i + 1])?;
                        out.push_str(&self.text[seg..i + 1]);
                        i += 2;
                        seg = i;
                        kept = out.len();
                        continue;
                    }
                    check_chars(&self.text[seg..i])?;
                    out.push_str(&self.text[seg..i]);
                    return self.finish_line(i + 1);
                }
                if c == b'\\' && q == b'"' {
                    check_chars(&self.text[seg..i])?;
                    out.push_str(&self.text[seg..i]);
                    if i + 1 == end {
                        escaped_break = true;
                        seg = end;
                        break;
                    }
                    let rest = decode_escape(&self.text[i + 1..end], out)?;
                    i = end - rest.len();
                    seg = i;
                    kept = out.len();
                    continue;
                }
                if !is_blank(c) {
                    kept = out.len() + (i - seg) + 1;
                }
                i += 1;
            }
            check_chars(&self.text[seg..end])?;
            out.push_str(&self.text[seg..end]);
            if !escaped_break {
                out.truncate(kept);
            }
            if end >= self.b.len() {
                return None; // unterminated
            }
            self.pos = end;
            self.next_line();
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
                out.extend(std::iter::repeat_n('\n', empty));
            } else if !escaped_break {
                out.push(' ');
            }
            i = self.pos + ind;
        }
    }

    /// A plain scalar starting at `at`, continuing on more-indented lines.
    pub(super) fn plain(&mut self, parent: isize, at: usize, out: &mut String) -> Option<()> {
        let mut start = at;
        loop {
            let end = self.line_end(start);
            let line = &self.b[start..end];
            let mut stop = line.len();
            for (i, &c) in line.iter().enumerate() {
                match c {
                    b'#' if i > 0 && is_blank(line[i - 1]) => {
                        stop = i;
                        break;
                    }
                    b':' if matches!(line.get(i + 1), None | Some(b' ' | b'\t')) => return None,
                    _ => {}
                }
            }
            let content = self.text[start..start + stop].trim_end_matches([' ', '\t']);
            check_chars(&self.text[start..end])?;
            out.push_str(content);
            self.pos = start;
            self.next_line();
            if stop < line.len() {
                return Some(()); // a comment ends the scalar
            }
            // Continuation lines must be more indented than the parent and not look like
            // anything else.
            let save = (self.pos, self.line);
            let (empty, ind) = self.fold_breaks();
            if self.eof() || self.marker_at(self.pos).is_some() || (self.indent(self.pos) as isize) <= parent {
                // Not a continuation: rewind over the empty lines, they belong to the parent.
                (self.pos, self.line) = save;
                return Some(());
            }
            if ind != self.indent(self.pos) {
                return None;
            }
            let next = self.pos + ind;
            // A comment line ends the scalar (libyaml); leave that case to the general path.
            if self.b[next] == b'#' {
                return None;
            }
            if empty > 0 {
                out.extend(std::iter::repeat_n('\n', empty));
            } else {
                out.push(' ');
            }
            start = next;
        }
    }

    /// A literal (`|`) or folded (`>`) block scalar whose header starts at `at`.
    pub(super) fn block_scalar(&mut self, parent: isize, at: usize, out: &mut String) -> Option<()> {
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
        self.pos = at;
        self.next_line();

        let min_indent = (parent + 1).max(1) as usize;
        let mut indent = 0usize;
        let mut leading_break = false;
        let mut trailing_breaks = 0usize;
        let mut leading_blank = false;
        self.block_breaks(&mut indent, min_indent, &mut trailing_breaks)?;
        loop {
            if self.eof() || self.indent(self.pos) < indent {
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
                    out.push(' ');
                }
            } else if leading_break {
                out.push('\n');
            }
            out.extend(std::iter::repeat_n('\n', trailing_breaks));
            trailing_breaks = 0;
            leading_blank = trailing_blank;
            let text = &self.text[content_start..line_end];
            check_chars(text)?;
            out.push_str(text);
            self.pos = content_start;
            self.next_line();
            if line_end == self.b.len() {
                leading_break = false;
                break;
            }
            leading_break = true;
            self.block_breaks(&mut indent, min_indent, &mut trailing_breaks)?;
        }
        if chomp != -1 && leading_break {
            out.push('\n');
        }
        if chomp == 1 {
            out.extend(std::iter::repeat_n('\n', trailing_breaks));
        }
        Some(())
    }

    /// libyaml `scan_block_scalar_breaks`: consumes empty lines (counting them) and, when the
    /// indentation is not known yet, sets it from the first content line.
    fn block_breaks(&mut self, indent: &mut usize, min_indent: usize, breaks: &mut usize) -> Option<()> {
        let mut max_indent = 0;
        loop {
            if self.eof() {
                break;
            }
            let spaces = self.indent(self.pos);
            let col = if *indent == 0 { spaces } else { spaces.min(*indent) };
            max_indent = max_indent.max(col);
            let c = self.byte(self.pos + col);
            if c == b'\t' && (*indent == 0 || col < *indent) {
                return None;
            }
            if c != b'\n' || self.pos + col >= self.b.len() {
                break;
            }
            *breaks += 1;
            self.next_line();
        }
        if *indent == 0 {
            *indent = max_indent.max(min_indent);
            if !self.eof() && self.indent(self.pos) < max_indent && max_indent > min_indent {
                // Leading empty lines more indented than the first content line: libyaml
                // rejects this.
                return None;
            }
        }
        Some(())
    }
}
