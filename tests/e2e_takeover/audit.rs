//! The API server's audit log (`ControlPlane::audit_log`: writes, lists, reads of Leases): what one user wrote
//! from a point in the log on, by kind and verb.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

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

/// How a controller's first moments on the other's objects are waited out: until `writer`'s
/// writes have stopped for `quiet`, but never less than `at_least` nor more than `at_most`.
#[derive(Debug, Clone, Copy)]
pub struct Settle {
    pub at_least: Duration,
    pub quiet: Duration,
    pub at_most: Duration,
}

/// Waits as `settle` says for the writes of `user` after `mark`, Leases aside (a leader renews
/// its Lease every few seconds, which says nothing about the objects compared), and those
/// `ignore` names (e.g. the node's programs, which share the admin's certificate). Returns how
/// long it waited and whether the writes had stopped (false: `at_most` was reached).
pub async fn settle(
    log: &Path,
    mark: u64,
    user: &str,
    ignore: impl Fn(&Write) -> bool,
    settle: Settle,
) -> anyhow::Result<(Duration, bool)> {
    let started = Instant::now();
    let mut seen = 0;
    let mut last_change = started;
    loop {
        let writes = writes_since(log, mark, user)?
            .into_iter()
            .filter(|w| w.resource != "leases" && !ignore(w))
            .count();
        if writes != seen {
            seen = writes;
            last_change = Instant::now();
        }
        let waited = started.elapsed();
        if waited >= settle.at_least && last_change.elapsed() >= settle.quiet {
            return Ok((waited, true));
        }
        if waited >= settle.at_most {
            return Ok((waited, false));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
