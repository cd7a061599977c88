//! Splitting a catalog file into documents, each as JSON text.
//!
//! Like opm (k8s `YAMLOrJSONDecoder`), a file whose first non-blank character is `{` is a stream
//! of JSON values; anything else is a stream of YAML documents. YAML goes through the fast
//! block-YAML transcoder first (`yaml_fast`) and, for anything it does not handle, through
//! `serde_yaml_ng`; both produce the same JSON (checked by differential tests).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::yaml_fast;

/// One document of a file, as JSON text, with the line it starts on when known.
#[derive(Debug, Clone)]
pub struct Document<'a> {
    pub json: Cow<'a, str>,
    pub line: Option<u32>,
}

/// A file that is not a stream of YAML/JSON documents.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SyntaxError {
    pub line: Option<u32>,
    pub column: Option<u32>,
    pub message: String,
}

/// Line (1-based) of a byte offset.
pub fn line_of(text: &str, offset: usize) -> u32 {
    let upto = &text.as_bytes()[..offset.min(text.len())];
    (upto.iter().filter(|&&b| b == b'\n').count() + 1) as u32
}

pub fn split(text: &str) -> Result<Vec<Document<'_>>, SyntaxError> {
    let start = text.trim_start();
    if start.starts_with('{') {
        return split_json(text);
    }
    if let Some(docs) = yaml_fast::to_json_documents(text) {
        return Ok(docs
            .into_iter()
            .map(|(json, line)| Document {
                json: Cow::Owned(json),
                line: Some(line),
            })
            .collect());
    }
    split_yaml_slow(text)
}

/// `split` without the fast YAML path, for callers that tried `yaml_fast` themselves.
pub fn split_general(text: &str) -> Result<Vec<Document<'_>>, SyntaxError> {
    if text.trim_start().starts_with('{') {
        return split_json(text);
    }
    split_yaml_slow(text)
}

fn split_json(text: &str) -> Result<Vec<Document<'_>>, SyntaxError> {
    let mut out = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<&RawValue>();
    loop {
        let offset = stream.byte_offset();
        match stream.next() {
            None => break,
            Some(Ok(raw)) => {
                let skipped = text[offset..].len() - text[offset..].trim_start().len();
                out.push(Document {
                    json: Cow::Borrowed(raw.get()),
                    line: Some(line_of(text, offset + skipped)),
                });
            }
            Some(Err(e)) => {
                return Err(SyntaxError {
                    line: Some(e.line() as u32),
                    column: Some(e.column() as u32),
                    message: e.to_string(),
                });
            }
        }
    }
    Ok(out)
}

/// The general YAML path: libyaml via `serde_yaml_ng`. Empty documents are skipped.
pub fn split_yaml_slow(text: &str) -> Result<Vec<Document<'static>>, SyntaxError> {
    let mut out = Vec::new();
    let starts = yaml_document_lines(text);
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value = serde_json::Value::deserialize(doc).map_err(|e| {
            let loc = e.location();
            SyntaxError {
                line: loc.as_ref().map(|l| l.line() as u32),
                column: loc.as_ref().map(|l| l.column() as u32),
                message: e.to_string(),
            }
        })?;
        if value.is_null() {
            continue;
        }
        out.push(Document {
            json: Cow::Owned(value.to_string()),
            line: starts.get(i).copied().flatten(),
        });
    }
    Ok(out)
}

/// First content line of each YAML document, guessed from `---` markers at column 0 (libyaml
/// yields no document for a marker-less prefix holding only comments). Only used for messages.
fn yaml_document_lines(text: &str) -> Vec<Option<u32>> {
    let mut starts = Vec::new();
    let mut current: Option<Option<u32>> = None; // None: before any marker
    let mut prefix_line: Option<u32> = None;
    for (n, line) in text.lines().enumerate() {
        let n = n as u32 + 1;
        let is_marker = line == "---" || line.starts_with("--- ") || line.starts_with("---\t");
        if is_marker {
            match current.take() {
                Some(start) => starts.push(start),
                None => {
                    if let Some(l) = prefix_line {
                        starts.push(Some(l));
                    }
                }
            }
            let inline = line[3..].trim();
            current = Some((!inline.is_empty() && !inline.starts_with('#')).then_some(n));
            continue;
        }
        let content = !line.trim().is_empty() && !line.trim_start().starts_with('#');
        match &mut current {
            Some(start @ None) if content => *start = Some(n),
            None if content && prefix_line.is_none() => prefix_line = Some(n),
            _ => {}
        }
    }
    match current {
        Some(start) => starts.push(start),
        None => {
            if let Some(l) = prefix_line {
                starts.push(Some(l));
            }
        }
    }
    starts
}
