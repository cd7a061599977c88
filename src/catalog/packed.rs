//! JSON text kept compressed (LZ4) in memory, for big property values a long-lived process
//! rarely reads.
//!
//! Why: `olm-rs catalog serve` keeps every bundle of its catalog, and the `olm.csv.metadata`
//! values (descriptions, `alm-examples`) are most of them — ~11 MB of catalogs/v4.20's 15 MB —
//! while only `GetBundle`-style answers (the stub CSV's `csvJson`) read them. LZ4 packs that
//! JSON ~4× and unpacks a value in microseconds, so the server holds a fraction of it at the
//! cost of one unpack per answer.

use serde_json::value::RawValue;

/// Compressed JSON text; `unpack` gives back the exact text that was packed.
#[derive(Clone, PartialEq, Eq)]
pub struct PackedJson {
    /// LZ4 block with the text's length in front (`lz4_flex`'s size-prepended format).
    bytes: Box<[u8]>,
}

impl PackedJson {
    pub fn pack(raw: &RawValue) -> PackedJson {
        PackedJson {
            bytes: lz4_flex::compress_prepend_size(raw.get().as_bytes()).into_boxed_slice(),
        }
    }

    /// The packed JSON text.
    #[allow(
        clippy::expect_used,
        reason = "bytes made by `pack` from valid JSON, never changed"
    )]
    pub fn unpack(&self) -> Box<RawValue> {
        // Proven invariant: `bytes` was made by `pack` from a valid JSON value and is never
        // changed, so it unpacks to that same UTF-8 JSON text.
        let text = lz4_flex::decompress_size_prepended(&self.bytes)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .expect("a packed JSON value unpacks to the text that was packed");
        RawValue::from_string(text).expect("a packed JSON value is valid JSON")
    }

    /// Bytes held.
    pub fn packed_len(&self) -> usize {
        self.bytes.len()
    }
}

impl std::fmt::Debug for PackedJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PackedJson({} bytes)", self.bytes.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpacks_the_exact_text() {
        for text in [
            "null",
            "{}",
            r#"{"description":"a \"quoted\" \u00e9 é","annotations":{"alm-examples":"[{\n}]"}}"#,
        ] {
            let raw: Box<RawValue> = serde_json::from_str(text).unwrap();
            assert_eq!(PackedJson::pack(&raw).unpack().get(), text);
        }
    }

    #[test]
    fn repetitive_json_packs_small() {
        let text = format!(
            "[{}]",
            vec![r#"{"apiVersion":"example.com/v1","kind":"Example","spec":{"size":3}}"#; 200]
                .join(",")
        );
        let raw: Box<RawValue> = serde_json::from_str(&text).unwrap();
        assert!(PackedJson::pack(&raw).packed_len() * 10 < text.len());
    }
}
