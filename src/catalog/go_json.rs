//! Reading JSON the way Go's `encoding/json` reads it into opm's structs, which is what decides
//! whether `opm validate` accepts a catalog: object keys match struct fields case-insensitively
//! (the last matching key wins), `null` leaves a field unset, unknown keys are ignored, and a
//! value of the wrong kind is an error worded `json: cannot unmarshal <kind> into Go struct field
//! <Struct.field> of type <type>`.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::olm_hash::go_json::write_go_string;

/// The JSON kind of a raw value, named as Go names it in unmarshal errors.
pub fn kind(raw: &RawValue) -> &'static str {
    match raw.get().as_bytes().first() {
        Some(b'"') => "string",
        Some(b'{') => "object",
        Some(b'[') => "array",
        Some(b't' | b'f') => "bool",
        Some(b'n') => "null",
        _ => "number",
    }
}

pub fn is_null(raw: &RawValue) -> bool {
    raw.get() == "null"
}

/// A Go unmarshal type error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnmarshalError {
    #[error("json: cannot unmarshal {kind} into Go struct field {field} of type {go_type}")]
    Field {
        kind: &'static str,
        field: String,
        go_type: &'static str,
    },
    #[error("json: cannot unmarshal {kind} into Go value of type {go_type}")]
    Value {
        kind: &'static str,
        go_type: &'static str,
    },
    #[error("{0}")]
    Syntax(String),
    #[error(transparent)]
    Base64(#[from] super::fbc::blob::Base64Error),
}

/// The members of a JSON object, in document order, borrowing the values.
pub struct Fields<'a> {
    members: Vec<(Cow<'a, str>, &'a RawValue)>,
    /// One array-of-objects member read in the same pass as the object (`parse_object_with_list`);
    /// its entry in `members` holds `null`.
    list: Option<PreParsedList<'a>>,
}

struct PreParsedList<'a> {
    name: &'static str,
    /// The last member named `name` (ignoring ASCII case); `None` when it is absent or `null`.
    value: Option<ListValue<'a>>,
}

/// An array of objects parsed item by item, or the kind of what stood there instead.
enum ListValue<'a> {
    Items(Vec<ObjectItem<'a>>),
    Kind(&'static str),
}

impl<'a> Fields<'a> {
    /// `Ok(None)` when `raw` is `null` (Go leaves the struct zero); an error when it is not an
    /// object.
    pub fn of(
        raw: &'a RawValue,
        go_type: &'static str,
    ) -> Result<Option<Fields<'a>>, UnmarshalError> {
        if is_null(raw) {
            return Ok(None);
        }
        if kind(raw) != "object" {
            return Err(UnmarshalError::Value {
                kind: kind(raw),
                go_type,
            });
        }
        let members =
            parse_members(raw.get()).map_err(|e| UnmarshalError::Syntax(e.to_string()))?;
        Ok(Some(Fields {
            members,
            list: None,
        }))
    }

    pub fn members(&self) -> &[(Cow<'a, str>, &'a RawValue)] {
        &self.members
    }

    /// The last member whose key equals `name` ignoring ASCII case, unless its value is `null`.
    pub fn get(&self, name: &str) -> Option<&'a RawValue> {
        self.members
            .iter()
            .rev()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
            .filter(|v| !is_null(v))
    }

    pub fn string(&self, name: &str, owner: &str) -> Result<Option<String>, UnmarshalError> {
        match self.get(name) {
            None => Ok(None),
            Some(raw) => string_value(raw, || format!("{owner}.{name}")).map(Some),
        }
    }

    pub fn string_list(&self, name: &str, owner: &str) -> Result<Vec<String>, UnmarshalError> {
        let Some(raw) = self.get(name) else {
            return Ok(Vec::new());
        };
        let field = || format!("{owner}.{name}");
        array_items(raw, field, "[]string")?
            .into_iter()
            .map(|item| {
                if is_null(item) {
                    Ok(String::new())
                } else {
                    string_value(item, field)
                }
            })
            .collect()
    }
}

fn string_value(raw: &RawValue, field: impl Fn() -> String) -> Result<String, UnmarshalError> {
    if kind(raw) != "string" {
        return Err(UnmarshalError::Field {
            kind: kind(raw),
            field: field(),
            go_type: "string",
        });
    }
    serde_json::from_str(raw.get()).map_err(|e| UnmarshalError::Syntax(e.to_string()))
}

/// The items of a JSON array (`null` gives none).
pub fn array_items<'a>(
    raw: &'a RawValue,
    field: impl Fn() -> String,
    go_type: &'static str,
) -> Result<Vec<&'a RawValue>, UnmarshalError> {
    if is_null(raw) {
        return Ok(Vec::new());
    }
    if kind(raw) != "array" {
        return Err(UnmarshalError::Field {
            kind: kind(raw),
            field: field(),
            go_type,
        });
    }
    serde_json::from_str::<Vec<&RawValue>>(raw.get())
        .map_err(|e| UnmarshalError::Syntax(e.to_string()))
}

/// Parses the members of a JSON object text without copying values.
pub fn parse_members(text: &str) -> Result<Vec<(Cow<'_, str>, &RawValue)>, serde_json::Error> {
    struct MembersVisitor;
    impl<'de> Visitor<'de> for MembersVisitor {
        type Value = Vec<(Cow<'de, str>, &'de RawValue)>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::with_capacity(map.size_hint().unwrap_or(8));
            while let Some(key) = map.next_key::<BorrowedOrOwned<'de>>()? {
                let value: &'de RawValue = map.next_value()?;
                out.push((key.0, value));
            }
            Ok(out)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let members = (&mut de).deserialize_map(MembersVisitor)?;
    de.end()?;
    Ok(members)
}

/// Parses a JSON object like `parse_members` and, in the same pass, the array of objects under
/// `list` (matched ignoring ASCII case, the last one winning, as `Fields::get` does), which
/// `Fields::object_list` then hands out without reading it again. A catalog's `properties`
/// are nearly all of its bytes, so this saves a full pass over them.
///
/// Errors are not worded: on any error the caller takes the general path (`parse_members`,
/// then `object_list`), which words them as before. The pass accepts exactly what that path
/// accepts, except number items it cannot hold (`1e400`), which also send it there.
pub fn parse_object_with_list<'a>(
    text: &'a str,
    list: &'static str,
) -> Result<Fields<'a>, serde_json::Error> {
    struct ObjectVisitor {
        list: &'static str,
    }
    impl<'de> Visitor<'de> for ObjectVisitor {
        type Value = Fields<'de>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut members = Vec::with_capacity(map.size_hint().unwrap_or(8));
            let mut value = None;
            while let Some(key) = map.next_key::<BorrowedOrOwned<'de>>()? {
                if key.0.eq_ignore_ascii_case(self.list) {
                    value = map.next_value::<Option<ListValue<'de>>>()?;
                    members.push((key.0, RawValue::NULL));
                } else {
                    let raw: &'de RawValue = map.next_value()?;
                    members.push((key.0, raw));
                }
            }
            Ok(Fields {
                members,
                list: Some(PreParsedList {
                    name: self.list,
                    value,
                }),
            })
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let fields = (&mut de).deserialize_map(ObjectVisitor { list })?;
    de.end()?;
    Ok(fields)
}

impl<'de> serde::Deserialize<'de> for ListValue<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ListValue<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(8));
                while let Some(item) = seq.next_element::<ObjectItem<'de>>()? {
                    items.push(item);
                }
                Ok(ListValue::Items(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(ListValue::Kind("object"))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(ListValue::Kind("bool"))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(ListValue::Kind("number"))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(ListValue::Kind("number"))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(ListValue::Kind("number"))
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(ListValue::Kind("string"))
            }
        }
        d.deserialize_any(V)
    }
}

/// A key that borrows from the input unless it contains escapes.
struct BorrowedOrOwned<'a>(Cow<'a, str>);

impl<'de> serde::Deserialize<'de> for BorrowedOrOwned<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = BorrowedOrOwned<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(BorrowedOrOwned(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(BorrowedOrOwned(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(BorrowedOrOwned(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// Go's `json.Marshal` of a generic value: compact, object keys sorted, strings escaped by the
/// one Go string escaper (`olm_hash::go_json`), which the OLM hashes use too — what opm writes
/// for bundle objects and in the L4 message.
pub fn marshal_sorted(value: &serde_json::Value) -> String {
    let mut out = String::new();
    write_sorted(value, &mut out);
    out
}

fn write_sorted(value: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_string(out, k);
                out.push(':');
                write_sorted(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_sorted(v, out);
            }
            out.push(']');
        }
        Value::String(s) => write_go_string(out, s),
        other => out.push_str(&other.to_string()),
    }
}

/// Go's `%v` of a decoded JSON value (as `interface{}`).
pub fn go_format_v(value: &serde_json::Value) -> String {
    use serde_json::Value;
    match value {
        Value::Null => "<nil>".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_float(n.as_f64().unwrap_or(0.0)),
        Value::String(s) => s.clone(),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(go_format_v).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{k}:{}", go_format_v(&map[*k])))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

/// Go's `%t` of a decoded JSON value: only booleans format; others print as `%!t(type=value)`.
pub fn go_format_t(value: &serde_json::Value) -> String {
    use serde_json::Value;
    match value {
        Value::Null => "%!t(<nil>)".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => format!("%!t(float64={})", go_float(n.as_f64().unwrap_or(0.0))),
        Value::String(s) => format!("%!t(string={s})"),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(go_format_t).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("%!t(string={k}):{}", go_format_t(&map[*k])))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

fn go_float(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e21 {
        format!("{f:.0}")
    } else {
        format!("{f}")
    }
}

/// An element of an array of objects, parsed in the same pass as the array.
#[derive(Clone)]
pub enum ObjectItem<'a> {
    Object(Vec<(Cow<'a, str>, &'a RawValue)>),
    Null,
    /// Not an object: its Go kind name.
    Other(&'static str),
}

impl<'de> serde::Deserialize<'de> for ObjectItem<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ObjectItem<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(4));
                while let Some(key) = map.next_key::<BorrowedOrOwned<'de>>()? {
                    let value: &'de RawValue = map.next_value()?;
                    out.push((key.0, value));
                }
                Ok(ObjectItem::Object(out))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(ObjectItem::Null)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(ObjectItem::Other("bool"))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(ObjectItem::Other("number"))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(ObjectItem::Other("number"))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(ObjectItem::Other("number"))
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(ObjectItem::Other("string"))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(ObjectItem::Other("array"))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'a> Fields<'a> {
    pub fn from_members(members: Vec<(Cow<'a, str>, &'a RawValue)>) -> Fields<'a> {
        Fields {
            members,
            list: None,
        }
    }

    /// The items of an array-of-objects member, each parsed once.
    pub fn object_list(
        &self,
        name: &str,
        owner: &str,
        go_type: &'static str,
        item_type: &'static str,
    ) -> Result<Vec<Option<Fields<'a>>>, UnmarshalError> {
        let pre = self
            .list
            .as_ref()
            .filter(|l| l.name.eq_ignore_ascii_case(name));
        let items: Vec<ObjectItem<'a>> = match pre {
            Some(PreParsedList { value: None, .. }) => return Ok(Vec::new()),
            Some(PreParsedList {
                value: Some(ListValue::Kind(kind)),
                ..
            }) => {
                return Err(UnmarshalError::Field {
                    kind,
                    field: format!("{owner}.{name}"),
                    go_type,
                });
            }
            Some(PreParsedList {
                value: Some(ListValue::Items(items)),
                ..
            }) => items.clone(),
            None => {
                let Some(raw) = self.get(name) else {
                    return Ok(Vec::new());
                };
                if kind(raw) != "array" {
                    return Err(UnmarshalError::Field {
                        kind: kind(raw),
                        field: format!("{owner}.{name}"),
                        go_type,
                    });
                }
                serde_json::from_str(raw.get())
                    .map_err(|e| UnmarshalError::Syntax(e.to_string()))?
            }
        };
        items
            .into_iter()
            .map(|item| match item {
                ObjectItem::Object(m) => Ok(Some(Fields {
                    members: m,
                    list: None,
                })),
                ObjectItem::Null => Ok(None),
                ObjectItem::Other(kind) => Err(UnmarshalError::Field {
                    kind,
                    field: format!("{owner}.{name}"),
                    go_type: item_type,
                }),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes Go (1.22 and later, which opm and OLM are built with) writes for
    /// `json.Marshal(map[string]interface{}{…})`: keys sorted, `\b`/`\f` short escapes, other
    /// control characters as `\u00XX`, HTML characters and U+2028/U+2029 escaped.
    #[test]
    fn marshal_sorted_writes_what_go_writes() {
        let value = serde_json::json!({
            "z": "bs\u{8}ff\u{c}nl\ncr\rtab\t\u{1}\u{1f}\u{7f}",
            "a": ["<b>&amp;</b>", "line\u{2028}para\u{2029}", "quote\"back\\slash/"],
            "m": {"n": null, "t": true, "i": 3, "f": 1.5, "u": "ünï ☃"},
        });
        assert_eq!(
            marshal_sorted(&value),
            concat!(
                r#"{"a":["\u003cb\u003e\u0026amp;\u003c/b\u003e","line\u2028para\u2029","quote\"back\\slash/"],"#,
                r#""m":{"f":1.5,"i":3,"n":null,"t":true,"u":"ünï ☃"},"#,
                "\"z\":\"bs\\bff\\fnl\\ncr\\rtab\\t\\u0001\\u001f\u{7f}\"}"
            )
        );
    }

    #[test]
    fn fields_match_case_insensitively_last_wins() {
        let raw: Box<RawValue> =
            serde_json::from_str(r#"{"Name":"a","name":"b","skips":["x",null],"n":null}"#).unwrap();
        let f = Fields::of(&raw, "declcfg.ChannelEntry").unwrap().unwrap();
        assert_eq!(
            f.string("name", "ChannelEntry").unwrap().as_deref(),
            Some("b")
        );
        assert_eq!(
            f.string_list("skips", "ChannelEntry").unwrap(),
            vec!["x", ""]
        );
        assert_eq!(f.string("n", "ChannelEntry").unwrap(), None);
    }

    #[test]
    fn wrong_kinds_are_go_errors() {
        let raw: Box<RawValue> = serde_json::from_str(r#"{"entries":"x","name":5}"#).unwrap();
        let f = Fields::of(&raw, "declcfg.Channel").unwrap().unwrap();
        assert_eq!(
            f.string("name", "Channel").unwrap_err().to_string(),
            "json: cannot unmarshal number into Go struct field Channel.name of type string"
        );
        let arr: Box<RawValue> = serde_json::from_str("[1]").unwrap();
        assert_eq!(
            Fields::of(&arr, "property.Package")
                .err()
                .unwrap()
                .to_string(),
            "json: cannot unmarshal array into Go value of type property.Package"
        );
    }
}
