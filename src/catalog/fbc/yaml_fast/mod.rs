//! A fast YAML → JSON transcoder for the block-style YAML that catalog tools write (Go's
//! `yaml` encoders: block mappings and sequences, plain, quoted and literal/folded scalars).
//!
//! Why: parsing catalogs/v4.20 (15 MB of YAML) with libyaml takes ~0.5 s, more than the whole
//! time budget of `olm-rs catalog validate`. This transcoder streams the text once and writes
//! JSON directly. It is deliberately partial: on anything outside the subset (anchors, tags,
//! flow collections, tabs in indentation, unusual indentation, syntax errors …) it returns
//! `None` and the caller uses `serde_yaml_ng`, which also produces the error messages. Both
//! paths give the same JSON; `tests` checks that on real catalogs and generated documents.

mod flow;
mod scalar;
mod text;

use std::borrow::Cow;

use scalar::{check_chars, push_escaped, push_json_string};

/// Each document of `text` as JSON, with the line its content starts on; `None` when the text
/// is outside the supported subset.
pub fn to_json_documents(text: &str) -> Option<Vec<(String, u32)>> {
    let mut docs = Vec::new();
    for_each_document(text, |json, line| docs.push((json.to_owned(), line)))?;
    Some(docs)
}

/// Hands each document of `text` to `each` as JSON, with the line its content starts on, as
/// soon as it is transcoded; one buffer serves every document, so a file's JSON is never held
/// whole. `None` when the text is outside the supported subset — possibly after `each` has
/// seen earlier documents, which the caller must then discard.
pub fn for_each_document(text: &str, each: impl FnMut(&str, u32)) -> Option<()> {
    for_each_document_in(text, &mut String::new(), each)
}

/// `for_each_document` transcoding into `buffer` (cleared first; its capacity is kept for the
/// caller's next text, so a loader reading many files grows it, and faults its pages in, once).
pub fn for_each_document_in(
    text: &str,
    buffer: &mut String,
    mut each: impl FnMut(&str, u32),
) -> Option<()> {
    transcode(text, buffer, false, |json, line, _| {
        each(json, line);
        true
    })
}

/// `for_each_document_in` for a caller that only checks the shape of `olm.csv.metadata`
/// values (`catalog validate`): in the value of a top-level `properties` item whose `type` is
/// `olm.csv.metadata` (written before `value`, as opm writes it), every string is handed over
/// empty (`""`). Those strings are most of a catalog's bytes, and the shape check never reads
/// what is in them: a string from this transcoder is always one the check accepts.
///
/// `each` is told whether the document had strings emptied; when it answers `false` (it wants
/// the real text, say to word an error), the same document is transcoded again in full and
/// handed over once more, and that answer is not asked for.
pub fn for_each_document_emptying_csv_metadata(
    text: &str,
    buffer: &mut String,
    each: impl FnMut(&str, u32, bool) -> bool,
) -> Option<()> {
    transcode(text, buffer, true, each)
}

fn transcode(
    text: &str,
    buffer: &mut String,
    empty_csv_metadata: bool,
    each: impl FnMut(&str, u32, bool) -> bool,
) -> Option<()> {
    if text.starts_with('\u{feff}') || memchr::memchr(b'\r', text.as_bytes()).is_some() {
        return None;
    }
    buffer.clear();
    let mut p = Parser::new(text, std::mem::take(buffer));
    p.empty_csv_metadata = empty_csv_metadata;
    let done = p.documents(each);
    *buffer = p.out;
    done
}

struct Parser<'a> {
    text: &'a str,
    b: &'a [u8],
    /// Byte offset; at the start of a line between nodes.
    pos: usize,
    /// Line number of `pos` (1-based).
    line: u32,
    out: String,
    /// Whether strings in `olm.csv.metadata` values are emptied (see
    /// `for_each_document_emptying_csv_metadata`) …
    empty_csv_metadata: bool,
    /// … in the current document (not when it is read again in full).
    may_empty: bool,
    /// Block mappings open around `pos` (1 in a document's top-level mapping).
    map_depth: u32,
    /// Inside the value of the top-level key `properties`.
    in_properties: bool,
    /// Inside an `olm.csv.metadata` property's value: strings are written as `""`.
    emptying: bool,
    /// Whether any string of the current document was emptied.
    emptied: bool,
}

fn is_blank(c: u8) -> bool {
    c == b' ' || c == b'\t'
}

impl<'a> Parser<'a> {
    fn new(text: &'a str, out: String) -> Parser<'a> {
        Parser {
            text,
            b: text.as_bytes(),
            pos: 0,
            line: 1,
            out,
            empty_csv_metadata: false,
            may_empty: false,
            map_depth: 0,
            in_properties: false,
            emptying: false,
            emptied: false,
        }
    }

    fn eof(&self) -> bool {
        self.pos >= self.b.len()
    }

    fn line_end(&self, from: usize) -> usize {
        memchr(b'\n', &self.b[from..]).map_or(self.b.len(), |i| from + i)
    }

    /// Moves to the start of the next line.
    fn next_line(&mut self) {
        let end = self.line_end(self.pos);
        self.next_line_from(end);
    }

    /// Moves past the line ending at `end` (a `\n` or the end of the text).
    fn next_line_from(&mut self, end: usize) {
        self.pos = (end + 1).min(self.b.len());
        self.line += 1;
    }

    /// Spaces at the start of the line beginning at `start`.
    fn indent(&self, start: usize) -> usize {
        self.b[start..].iter().take_while(|&&c| c == b' ').count()
    }

    fn byte(&self, i: usize) -> u8 {
        self.b.get(i).copied().unwrap_or(b'\n')
    }

    /// `---` or `...` at column 0 followed by a blank or the end of the line.
    fn marker_at(&self, start: usize) -> Option<u8> {
        let s = &self.b[start..];
        if s.len() >= 3
            && (s.starts_with(b"---") || s.starts_with(b"..."))
            && matches!(s.get(3), None | Some(b' ' | b'\t' | b'\n'))
        {
            Some(s[0])
        } else {
            None
        }
    }

    /// Skips blank and comment-only lines. Tabs before the first character are not handled.
    fn skip_empty_lines(&mut self) -> Option<()> {
        while !self.eof() {
            let ind = self.indent(self.pos);
            match self.byte(self.pos + ind) {
                b'\n' => self.next_line(),
                b'#' => {
                    let end = self.line_end(self.pos);
                    check_chars(&self.text[self.pos..end])?;
                    self.next_line();
                }
                b'\t' => return None,
                _ => break,
            }
        }
        Some(())
    }

    fn documents(&mut self, mut each: impl FnMut(&str, u32, bool) -> bool) -> Option<()> {
        loop {
            self.skip_empty_lines()?;
            if self.eof() {
                return Some(());
            }
            match self.marker_at(self.pos) {
                Some(b'-') => {
                    let end = self.line_end(self.pos);
                    let rest = self.text[self.pos + 3..end].trim_start_matches([' ', '\t']);
                    if !rest.is_empty() && !rest.starts_with('#') {
                        return None; // content on the `---` line
                    }
                    check_chars(rest)?;
                    self.next_line();
                    continue;
                }
                Some(_) => return None, // `...`
                None => {}
            }
            if self.byte(self.pos) == b'%' {
                return None; // directive
            }
            let start = (self.pos, self.line);
            self.document(self.empty_csv_metadata)?;
            // Empty documents are skipped, as on the general path.
            if self.out != "null" && !each(&self.out, start.1, self.emptied) && self.emptied {
                // Asked for the full text: the same document again, without emptying. It ends
                // where it did the first time, since emptying changes only what is written.
                (self.pos, self.line) = start;
                self.document(false)?;
                each(&self.out, start.1, false);
            }
        }
    }

    /// One document from `pos` to the next `---` or the end of the text, into `out`.
    fn document(&mut self, may_empty: bool) -> Option<()> {
        self.out.clear();
        self.may_empty = may_empty;
        self.map_depth = 0;
        self.in_properties = false;
        self.emptying = false;
        self.emptied = false;
        self.node_on_next_lines(-1, false)?;
        self.skip_empty_lines()?;
        if !self.eof() && self.marker_at(self.pos) != Some(b'-') {
            return None;
        }
        Some(())
    }

    /// A node that starts on the next non-empty line, more indented than `parent` (or a
    /// sequence at `parent` when `seq_at_parent`); `null` when there is none.
    fn node_on_next_lines(&mut self, parent: isize, seq_at_parent: bool) -> Option<()> {
        self.skip_empty_lines()?;
        if self.eof() || self.marker_at(self.pos).is_some() {
            self.out.push_str("null");
            return Some(());
        }
        let ind = self.indent(self.pos);
        let start = self.pos + ind;
        let seq_item = self.is_seq_item(start);
        if (ind as isize) > parent {
            if seq_item {
                return self.block_seq(ind);
            }
            if let Some(key) = self.key_end(start)? {
                return self.block_map(ind, start, key);
            }
            return self.inline_value(parent, start);
        }
        if ind as isize == parent && seq_at_parent && seq_item {
            return self.block_seq(ind);
        }
        self.out.push_str("null");
        Some(())
    }

    fn is_seq_item(&self, at: usize) -> bool {
        self.byte(at) == b'-' && matches!(self.byte(at + 1), b' ' | b'\n' | b'\t')
    }

    /// If a mapping key starts at `at`, the offset just past its `:`. `Some(None)` when the
    /// line is not a key; `None` (give up) for keys outside the subset.
    fn key_end(&self, at: usize) -> Option<Option<(usize, KeyKind)>> {
        let end = self.line_end(at);
        let line = &self.b[at..end];
        match line.first() {
            Some(b'"') | Some(b'\'') => {
                let close = text::quoted_end_on_line(line)?;
                let after = &line[close..];
                let spaces = after.iter().take_while(|&&c| is_blank(c)).count();
                if after.get(spaces) == Some(&b':')
                    && matches!(after.get(spaces + 1), None | Some(b' ' | b'\t'))
                {
                    let kind = if line[0] == b'"' {
                        KeyKind::Double
                    } else {
                        KeyKind::Single
                    };
                    return Some(Some((at + close + spaces + 1, kind)));
                }
                Some(None)
            }
            // `-x`, `?x`, `:x` start plain scalars; other indicators never start a plain key.
            Some(c) if b"-?:".contains(c) && matches!(line.get(1), None | Some(b' ' | b'\t')) => {
                Some(None)
            }
            Some(c) if b",[]{}#&*!|>%@`".contains(c) => Some(None),
            _ => {
                let mut i = 0;
                while i < line.len() {
                    match line[i] {
                        b':' if matches!(line.get(i + 1), None | Some(b' ' | b'\t')) => {
                            if i > 1024 {
                                return None;
                            }
                            return Some(Some((at + i + 1, KeyKind::Plain)));
                        }
                        b'#' if i > 0 && is_blank(line[i - 1]) => return Some(None),
                        _ => i += 1,
                    }
                }
                Some(None)
            }
        }
    }

    fn block_map(
        &mut self,
        indent: usize,
        first_key: usize,
        first: (usize, KeyKind),
    ) -> Option<()> {
        self.out.push('{');
        self.map_depth += 1;
        // Whether this is a `properties` item whose `type` is `olm.csv.metadata` (so far).
        let mut csv_metadata_item = false;
        let mut keys: Vec<Cow<'a, str>> = Vec::new();
        let mut at = first_key;
        let (mut after, mut kind) = first;
        loop {
            let text: &'a str = self.text;
            let key: Cow<'a, str> = match kind {
                KeyKind::Plain => Cow::Borrowed(text[at..after - 1].trim_end_matches([' ', '\t'])),
                KeyKind::Double | KeyKind::Single => {
                    let mut k = String::new();
                    let close = text::quoted_end_on_line(&self.b[at..self.line_end(at)])?;
                    check_chars(&text[at..at + close])?;
                    text::unquote_single_line(&text[at..at + close], &mut k)?;
                    Cow::Owned(k)
                }
            };
            if key.is_empty() && kind == KeyKind::Plain || keys.contains(&key) {
                return None;
            }
            if !keys.is_empty() {
                self.out.push(',');
            }
            match kind {
                KeyKind::Plain => {
                    self.out.push('"');
                    push_escaped(&mut self.out, &key)?;
                    self.out.push('"');
                }
                _ => push_json_string(&mut self.out, &key),
            }
            let outer = (self.in_properties, self.emptying);
            let property_item = self.map_depth == 2 && self.in_properties;
            let is_type = property_item && key == "type";
            if self.may_empty {
                match (self.map_depth, key.as_ref()) {
                    (1, "properties") => self.in_properties = true,
                    (2, "value") if property_item && csv_metadata_item => self.emptying = true,
                    _ => {}
                }
            }
            keys.push(key);
            self.out.push(':');
            let value_at = self.out.len();
            let end = self.line_end(after);
            let rest_start = after
                + self.b[after..end]
                    .iter()
                    .take_while(|&&c| is_blank(c))
                    .count();
            if rest_start == end || self.b[rest_start] == b'#' {
                check_chars(&self.text[rest_start..end])?;
                self.next_line();
                self.node_on_next_lines(indent as isize, true)?;
            } else {
                self.inline_value(indent as isize, rest_start)?;
            }
            (self.in_properties, self.emptying) = outer;
            if is_type {
                csv_metadata_item = &self.out[value_at..] == "\"olm.csv.metadata\"";
            }
            self.skip_empty_lines()?;
            if self.eof() || self.marker_at(self.pos).is_some() {
                break;
            }
            let ind = self.indent(self.pos);
            if ind < indent {
                break;
            }
            if ind > indent || self.is_seq_item(self.pos + ind) {
                return None;
            }
            at = self.pos + ind;
            (after, kind) = self.key_end(at)?.ok_or(()).ok()?;
        }
        self.out.push('}');
        self.map_depth -= 1;
        Some(())
    }

    fn block_seq(&mut self, indent: usize) -> Option<()> {
        self.out.push('[');
        let mut first = true;
        loop {
            if !first {
                self.out.push(',');
            }
            first = false;
            let dash = self.pos + indent;
            let end = self.line_end(dash);
            let content = dash
                + 1
                + self.b[dash + 1..end]
                    .iter()
                    .take_while(|&&c| c == b' ')
                    .count();
            if self.byte(content) == b'\t' {
                return None;
            }
            if content == end || self.b[content] == b'#' {
                check_chars(&self.text[content..end])?;
                self.next_line();
                self.node_on_next_lines(indent as isize, false)?;
            } else if self.is_seq_item(content) {
                return None; // `- - x`
            } else if let Some(key) = self.key_end(content)? {
                self.block_map(content - self.pos, content, key)?;
            } else {
                self.inline_value(indent as isize, content)?;
            }
            self.skip_empty_lines()?;
            if self.eof() || self.marker_at(self.pos).is_some() {
                break;
            }
            let ind = self.indent(self.pos);
            if ind < indent || (ind == indent && !self.is_seq_item(self.pos + ind)) {
                break;
            }
            if ind > indent {
                return None;
            }
        }
        self.out.push(']');
        Some(())
    }

    /// A value starting at `at` on the current line; `parent` is the indentation of the
    /// collection holding it. Leaves `pos` at the start of the line after the value. A string
    /// is written as `""` while `emptying`.
    fn inline_value(&mut self, parent: isize, at: usize) -> Option<()> {
        if !self.emptying {
            return self.inline_value_in_full(parent, at);
        }
        let start = self.out.len();
        self.inline_value_in_full(parent, at)?;
        if self.out.as_bytes().get(start) == Some(&b'"') && self.out.len() > start + 2 {
            self.out.truncate(start + 1);
            self.out.push('"');
            self.emptied = true;
        }
        Some(())
    }

    fn inline_value_in_full(&mut self, parent: isize, at: usize) -> Option<()> {
        match self.byte(at) {
            b'"' | b'\'' => {
                self.out.push('"');
                self.quoted(at)?;
                self.out.push('"');
                Some(())
            }
            b'|' | b'>' => {
                self.out.push('"');
                self.block_scalar(parent, at)?;
                self.out.push('"');
                Some(())
            }
            b'[' | b'{' => self.flow_collection(at),
            b'&' | b'*' | b'!' | b'%' | b'@' | b'`' | b'?' | b',' | b']' | b'}' | b'#' => None,
            b'-' | b':' if matches!(self.byte(at + 1), b' ' | b'\t' | b'\n') => None,
            _ => self.plain(parent, at),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyKind {
    Plain,
    Double,
    Single,
}

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    memchr::memchr(needle, hay)
}

#[cfg(test)]
mod tests;
