//! Reading and writing `metadata` of objects held as `serde_json::Value`.
//!
//! Objects in the sandbox are untyped JSON so that any CRD's objects can be stored; these helpers
//! keep the field names in one place.

use serde_json::{Map, Value};

pub fn metadata(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata")?.as_object()
}

/// `metadata` as a mutable map, created (and a non-object replaced) when missing.
pub fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let Value::Object(root) = obj else {
        unreachable!("replaced by an object above")
    };
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    match meta {
        Value::Object(m) => m,
        _ => unreachable!("replaced by an object above"),
    }
}

pub fn str_field<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    metadata(obj)?
        .get(field)?
        .as_str()
        .filter(|s| !s.is_empty())
}

pub fn name(obj: &Value) -> Option<&str> {
    str_field(obj, "name")
}

pub fn namespace(obj: &Value) -> Option<&str> {
    str_field(obj, "namespace")
}

pub fn uid(obj: &Value) -> Option<&str> {
    str_field(obj, "uid")
}

pub fn resource_version(obj: &Value) -> Option<&str> {
    str_field(obj, "resourceVersion")
}

pub fn deletion_timestamp(obj: &Value) -> Option<&str> {
    str_field(obj, "deletionTimestamp")
}

pub fn is_deleting(obj: &Value) -> bool {
    deletion_timestamp(obj).is_some()
}

pub fn generation(obj: &Value) -> Option<i64> {
    metadata(obj)?.get("generation")?.as_i64()
}

pub fn set_str(obj: &mut Value, field: &str, value: &str) {
    metadata_mut(obj).insert(field.to_string(), Value::String(value.to_string()));
}

pub fn label<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    metadata(obj)?.get("labels")?.get(key)?.as_str()
}

pub fn finalizers(obj: &Value) -> Vec<String> {
    metadata(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

pub fn set_finalizers(obj: &mut Value, finalizers: &[String]) {
    let meta = metadata_mut(obj);
    if finalizers.is_empty() {
        meta.remove("finalizers");
    } else {
        meta.insert("finalizers".into(), Value::from(finalizers.to_vec()));
    }
}

/// One `metadata.ownerReferences` entry, as far as garbage collection needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct OwnerRef {
    pub uid: String,
    pub kind: String,
    pub name: String,
    pub block_owner_deletion: bool,
}

pub fn owner_refs(obj: &Value) -> Vec<OwnerRef> {
    let Some(refs) = metadata(obj)
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    refs.iter()
        .filter_map(|r| {
            Some(OwnerRef {
                uid: r.get("uid")?.as_str()?.to_string(),
                kind: r
                    .get("kind")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                name: r
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                block_owner_deletion: r
                    .get("blockOwnerDeletion")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            })
        })
        .collect()
}

/// Drops the owner references to any of `uids`; removes the field when none are left.
pub fn remove_owner_refs(obj: &mut Value, uids: &[&str]) {
    let meta = metadata_mut(obj);
    let Some(Value::Array(refs)) = meta.get_mut("ownerReferences") else {
        return;
    };
    refs.retain(|r| {
        !r.get("uid")
            .and_then(Value::as_str)
            .is_some_and(|u| uids.contains(&u))
    });
    if refs.is_empty() {
        meta.remove("ownerReferences");
    }
}

/// Current time as the API server writes it (`metav1.Time`: RFC 3339, whole seconds, UTC).
pub fn now_rfc3339() -> String {
    let now = jiff::Timestamp::now();
    match jiff::Timestamp::from_second(now.as_second()) {
        Ok(ts) => ts.to_string(),
        Err(_) => now.to_string(),
    }
}

/// A random RFC 4122 version-4 UUID, the shape of `metadata.uid`.
pub fn new_uid() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The five-character suffix the API server appends to `generateName` (its alphabet avoids
/// vowels and look-alike characters so names never spell words).
pub fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn uid_has_uuid_v4_shape() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert_ne!(u, new_uid());
    }

    #[test]
    fn removing_owner_refs_drops_empty_field() {
        let mut o =
            json!({"metadata": {"ownerReferences": [{"uid": "a", "kind": "K", "name": "n"}]}});
        assert_eq!(owner_refs(&o).len(), 1);
        remove_owner_refs(&mut o, &["a"]);
        assert!(o["metadata"].get("ownerReferences").is_none());
    }

    #[test]
    fn timestamps_have_whole_seconds() {
        let t = now_rfc3339();
        assert!(t.ends_with('Z') && !t.contains('.'), "{t}");
    }
}
