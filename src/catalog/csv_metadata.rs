//! The shape check of `olm.csv.metadata` values: they must decode into opm's
//! `property.CSVMetadata` (docs/catalog.md §6.3, rule C11 of §7).
//!
//! Why two paths: CSV metadata is most of a catalog's bytes (descriptions, `alm-examples`
//! annotations), and the exact check (serde into the struct's shape) decodes every string it
//! checks. The fast path only looks at the kind of each value, skipping strings without
//! decoding them. It accepts a subset of what the exact check accepts; on anything else
//! (a wrong kind, a duplicate field, an escaped key, a `\uD8xx` escape) the exact check runs
//! and words the error, so results and messages are those of the exact check alone.

use serde::Deserializer as _;
use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::go_json::{self, UnmarshalError};

/// Checks an `olm.csv.metadata` value (`null` is accepted, as Go leaves the struct zero).
pub fn check(raw: &RawValue) -> Result<(), UnmarshalError> {
    if go_json::is_null(raw) {
        return Ok(());
    }
    if go_json::kind(raw) != "object" {
        return Err(UnmarshalError::Value {
            kind: go_json::kind(raw),
            go_type: "property.CSVMetadata",
        });
    }
    if plainly_valid(raw.get()) {
        return Ok(());
    }
    exact_check(raw)
}

/// What a `CSVMetadata` field must hold (besides `null`, which every field accepts).
#[derive(Clone, Copy)]
enum Expect {
    /// `map[string]string`: an object whose values are strings (or `null`).
    StringMap,
    /// `string`.
    Str,
    /// `[]string`: an array of strings (or `null`s).
    StrList,
    /// A slice of structs, checked no deeper than the exact check does.
    List,
    /// A struct or map, checked no deeper than the exact check does.
    Object,
}

/// The fields of `CSVMetadata`, named exactly as the exact check's serde derive matches them.
const FIELDS: [(&str, Expect); 14] = [
    ("annotations", Expect::StringMap),
    ("labels", Expect::StringMap),
    ("apiServiceDefinitions", Expect::Object),
    ("crdDescriptions", Expect::Object),
    ("description", Expect::Str),
    ("displayName", Expect::Str),
    ("installModes", Expect::List),
    ("keywords", Expect::StrList),
    ("links", Expect::List),
    ("maintainers", Expect::List),
    ("maturity", Expect::Str),
    ("minKubeVersion", Expect::Str),
    ("nativeAPIs", Expect::List),
    ("provider", Expect::Object),
];

/// The fast path: `true` only when the exact check would accept `text` (a JSON object).
fn plainly_valid(text: &str) -> bool {
    let mut de = serde_json::Deserializer::from_str(text);
    (&mut de).deserialize_map(TopLevel).is_ok() && de.end().is_ok()
}

/// Any error of the fast path just means "ask the exact check".
fn hand_over<E: de::Error>() -> E {
    E::custom("not plainly valid")
}

struct TopLevel;

impl<'de> Visitor<'de> for TopLevel {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = 0u32;
        // A key with escapes is not borrowed and so fails here: handed over.
        while let Some(key) = map.next_key::<&'de str>()? {
            let Some(i) = FIELDS.iter().position(|(name, _)| *name == key) else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            // serde rejects a repeated field ("duplicate field").
            if seen & (1 << i) != 0 {
                return Err(hand_over());
            }
            seen |= 1 << i;
            let ok = match FIELDS[i].1 {
                Expect::StringMap => map.next_value::<StringMap>().is_ok(),
                expect => value_fits(map.next_value::<&'de RawValue>()?, expect),
            };
            if !ok {
                return Err(hand_over());
            }
        }
        Ok(())
    }
}

fn value_fits(raw: &RawValue, expect: Expect) -> bool {
    let kind = go_json::kind(raw);
    if kind == "null" {
        return true;
    }
    match expect {
        Expect::Str => plain_string(raw),
        Expect::List => kind == "array",
        Expect::Object => kind == "object",
        Expect::StrList => {
            kind == "array"
                && serde_json::from_str::<Vec<&RawValue>>(raw.get()).is_ok_and(|items| {
                    items
                        .iter()
                        .all(|item| go_json::is_null(item) || plain_string(item))
                })
        }
        Expect::StringMap => false, // read as `StringMap`, never as a raw value
    }
}

/// A string the exact check decodes without error. Skipping a string (how it was read here)
/// does not check that `\u` escapes pair up as surrogates, decoding does: any escape that
/// may be a surrogate (`\uD800`–`\uDFFF`) is left to the exact check.
fn plain_string(raw: &RawValue) -> bool {
    let text = raw.get().as_bytes();
    text.first() == Some(&b'"')
        && !memchr::memmem::find_iter(text, b"\\u").any(|at| {
            matches!(text.get(at + 2), Some(b'd' | b'D'))
                && matches!(
                    text.get(at + 3),
                    Some(b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F')
                )
        })
}

/// A `map[string]string` field (or `null`), read in the same pass as the object around it.
struct StringMap;

impl<'de> serde::Deserialize<'de> for StringMap {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_option(StringMapVisitor)
    }
}

struct StringMapVisitor;

impl<'de> Visitor<'de> for StringMapVisitor {
    type Value = StringMap;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a map of strings")
    }
    fn visit_none<E>(self) -> Result<StringMap, E> {
        Ok(StringMap)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<StringMap, D::Error> {
        d.deserialize_map(self)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StringMap, A::Error> {
        while map.next_key::<IgnoredAny>()?.is_some() {
            let value = map.next_value::<&'de RawValue>()?;
            if !(go_json::is_null(value) || plain_string(value)) {
                return Err(hand_over());
            }
        }
        Ok(StringMap)
    }
}

/// The exact check: serde decodes the value into the shape of opm's `CSVMetadata`, and its
/// error is the message.
fn exact_check(raw: &RawValue) -> Result<(), UnmarshalError> {
    /// A `map[string]string` whose values are checked without being copied.
    struct StringMap;
    impl<'de> serde::Deserialize<'de> for StringMap {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> serde::de::Visitor<'de> for V {
                type Value = StringMap;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a map of strings")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<StringMap, A::Error> {
                    while map.next_key::<IgnoredAny>()?.is_some() {
                        map.next_value::<Option<StrCheck>>()?;
                    }
                    Ok(StringMap)
                }
            }
            d.deserialize_map(V)
        }
    }
    struct StrCheck;
    impl<'de> serde::Deserialize<'de> for StrCheck {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl serde::de::Visitor<'_> for V {
                type Value = StrCheck;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a string")
                }
                fn visit_str<E>(self, _: &str) -> Result<StrCheck, E> {
                    Ok(StrCheck)
                }
            }
            d.deserialize_str(V)
        }
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    #[allow(dead_code)] // fields exist to be type-checked
    struct Shape {
        annotations: Option<StringMap>,
        labels: Option<StringMap>,
        api_service_definitions: Option<IgnoredMap>,
        crd_descriptions: Option<IgnoredMap>,
        description: Option<StrCheck>,
        display_name: Option<StrCheck>,
        install_modes: Option<Vec<IgnoredAny>>,
        keywords: Option<Vec<Option<StrCheck>>>,
        links: Option<Vec<IgnoredAny>>,
        maintainers: Option<Vec<IgnoredAny>>,
        maturity: Option<StrCheck>,
        min_kube_version: Option<StrCheck>,
        #[serde(rename = "nativeAPIs")]
        native_apis: Option<Vec<IgnoredAny>>,
        provider: Option<IgnoredMap>,
    }
    struct IgnoredMap;
    impl<'de> serde::Deserialize<'de> for IgnoredMap {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> serde::de::Visitor<'de> for V {
                type Value = IgnoredMap;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<IgnoredMap, A::Error> {
                    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                    Ok(IgnoredMap)
                }
            }
            d.deserialize_map(V)
        }
    }
    serde_json::from_str::<Shape>(raw.get())
        .map(|_| ())
        .map_err(|e| UnmarshalError::Syntax(format!("olm.csv.metadata: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        serde_json::from_str(text).unwrap()
    }

    /// The fast path never accepts what the exact check rejects, and accepts the usual shapes.
    #[test]
    fn fast_path_accepts_only_what_the_exact_check_accepts() {
        let cases = [
            (r#"{}"#, true),
            (
                r#"{"annotations":{"a":"b","c":null},"labels":null,"x":[1,{"y":2}]}"#,
                true,
            ),
            (
                r#"{"description":"a\nb \"q\" \u00e9","displayName":null,"keywords":["a",null]}"#,
                true,
            ),
            (
                r#"{"installModes":[{"type":"OwnNamespace","supported":true}],"provider":{"name":"p"}}"#,
                true,
            ),
            (
                r#"{"crdDescriptions":{"owned":[]},"nativeAPIs":[],"maturity":"alpha"}"#,
                true,
            ),
            (r#"{"annotations":{"a":1}}"#, false),
            (r#"{"annotations":[]}"#, false),
            (r#"{"keywords":"a"}"#, false),
            (r#"{"keywords":[1]}"#, false),
            (r#"{"description":5}"#, false),
            (r#"{"provider":"p"}"#, false),
            (r#"{"links":{}}"#, false),
            (r#"{"maturity":"a","maturity":"b"}"#, false),
            (r#"{"description":"\ud800"}"#, false),
            (r#"{"annotations":{"a":"\uDC00x"}}"#, false),
            (r#"{"descr\u0069ption":5}"#, false),
        ];
        for (text, plain) in cases {
            let value = raw(text);
            assert_eq!(plainly_valid(value.get()), plain, "{text}");
            if plain {
                assert!(exact_check(&value).is_ok(), "{text}");
            }
            // Either way the answer is the exact check's.
            assert_eq!(check(&value), exact_check(&value), "{text}");
        }
    }

    #[test]
    fn a_valid_surrogate_pair_is_accepted_by_the_exact_check() {
        let value = raw(r#"{"description":"\ud83d\ude00"}"#);
        assert!(!plainly_valid(value.get()));
        assert!(check(&value).is_ok());
    }

    #[test]
    fn null_and_non_objects() {
        assert!(check(&raw("null")).is_ok());
        assert_eq!(
            check(&raw("[]")).unwrap_err().to_string(),
            "json: cannot unmarshal array into Go value of type property.CSVMetadata"
        );
    }
}
