//! Between the catalog index and the registry wire messages, both ways:
//! `to_api` projects an indexed FBC bundle onto `api.Bundle` as `opm serve` does
//! (spec/catalog.md §6.3); `from_api` rebuilds a declarative config from what a registry sent,
//! so remote catalogs land in the same `CatalogIndex` as local ones.

mod csv_stub;
pub mod from_api;
pub mod to_api;

/// JSON text as Go's `encoding/json` writes it: `<`, `>`, `&`, U+2028 and U+2029 escaped.
/// opm builds some values with Go's encoder; clients parse them as JSON either way, but matching
/// the bytes keeps our answers diffable against opm's.
pub(crate) fn go_json_text(value: &impl serde::Serialize) -> String {
    // Serialising a tree of strings and maps cannot fail.
    let text = serde_json::to_string(value).unwrap_or_default();
    if !text.contains(['<', '>', '&', '\u{2028}', '\u{2029}']) {
        return text;
    }
    // These characters can only occur inside JSON strings, so replacing them in the whole text
    // only ever rewrites string contents.
    text.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

#[cfg(test)]
mod tests {
    #[test]
    fn go_json_text_escapes_html_characters_like_go() {
        let v = serde_json::json!({"packageName": "a&b", "version": ">=1.0.0 <2.0.0"});
        assert_eq!(
            super::go_json_text(&v),
            r#"{"packageName":"a\u0026b","version":"\u003e=1.0.0 \u003c2.0.0"}"#
        );
        let parsed: serde_json::Value = serde_json::from_str(&super::go_json_text(&v)).unwrap();
        assert_eq!(parsed, v);
    }
}
