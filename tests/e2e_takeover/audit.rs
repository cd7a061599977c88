//! The API server's audit log (`ControlPlane::audit_log`: writes, lists, reads of Leases): what one user wrote
//! from a point in the log on, by kind and verb.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

/// One write the log records.
#[derive(Debug, Clone)]
pub struct Write {
    pub verb: String,
    /// `resource` or `resource/subresource`.
    pub resource: String,
    pub namespace: String,
    pub name: String,
    pub code: i64,
    pub uri: String,
    pub user_agent: String,
}

/// The log's length now: where a later [`writes_since`] starts.
pub fn mark(log: &Path) -> u64 {
    std::fs::metadata(log).map(|m| m.len()).unwrap_or(0)
}

/// The writes `user` made after `mark` (completed requests only).
pub fn writes_since(log: &Path, mark: u64, user: &str) -> anyhow::Result<Vec<Write>> {
    let bytes = std::fs::read(log)?;
    let start = usize::try_from(mark).unwrap_or(0).min(bytes.len());
    let mut out = Vec::new();
    for line in bytes[start..].split(|b| *b == b'\n') {
        let Ok(event) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        // The log also records lists and reads of Leases (tests/real_control_plane/mod.rs).
        if event["stage"] != "ResponseComplete"
            || event["user"]["username"] != user
            || event["verb"] == "get"
            || event["verb"] == "list"
        {
            continue;
        }
        let object = &event["objectRef"];
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let mut resource = text(&object["resource"]);
        if let Some(sub) = object["subresource"].as_str() {
            resource = format!("{resource}/{sub}");
        }
        out.push(Write {
            verb: text(&event["verb"]),
            resource,
            namespace: text(&object["namespace"]),
            name: text(&object["name"]),
            code: event["responseStatus"]["code"].as_i64().unwrap_or(0),
            uri: text(&event["requestURI"]),
            user_agent: text(&event["userAgent"]),
        });
    }
    Ok(out)
}

/// `resource verb` → count.
pub fn by_kind_and_verb(writes: &[Write]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for write in writes {
        *out.entry(format!("{} {}", write.resource, write.verb))
            .or_insert(0) += 1;
    }
    out
}
