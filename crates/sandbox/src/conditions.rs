//! `status.conditions` maintenance for the conditions the sandbox's own controllers write
//! (CRD Established, Deployment Available, APIService Available, Namespace Terminating).

use serde_json::{Value, json};

use super::meta;

pub fn find<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
}

pub fn status_of<'a>(obj: &'a Value, type_: &str) -> Option<&'a str> {
    find(obj, type_)?.get("status")?.as_str()
}

/// Sets one condition; `lastTransitionTime` only moves when `status` changes.
pub fn set(obj: &mut Value, type_: &str, status: &str, reason: &str, message: &str) {
    let now = meta::now_rfc3339();
    let previous = find(obj, type_).cloned();
    let transition = match &previous {
        Some(p) if p.get("status").and_then(Value::as_str) == Some(status) => p
            .get("lastTransitionTime")
            .cloned()
            .unwrap_or_else(|| json!(now)),
        _ => json!(now),
    };
    let cond = json!({
        "type": type_,
        "status": status,
        "lastTransitionTime": transition,
        "reason": reason,
        "message": message,
    });
    if !obj.get("status").is_some_and(Value::is_object) {
        obj["status"] = json!({});
    }
    let conds = &mut obj["status"]["conditions"];
    if !conds.is_array() {
        *conds = json!([]);
    }
    if let Some(list) = conds.as_array_mut() {
        match list
            .iter_mut()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
        {
            Some(slot) => *slot = cond,
            None => list.push(cond),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_kept_while_status_is_unchanged() {
        let mut o = json!({"status": {"conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z", "reason": "A", "message": ""}
        ]}});
        set(&mut o, "Ready", "True", "B", "m");
        assert_eq!(
            find(&o, "Ready").unwrap()["lastTransitionTime"],
            "2020-01-01T00:00:00Z"
        );
        assert_eq!(find(&o, "Ready").unwrap()["reason"], "B");
        set(&mut o, "Ready", "False", "C", "m");
        assert_ne!(
            find(&o, "Ready").unwrap()["lastTransitionTime"],
            "2020-01-01T00:00:00Z"
        );
        set(&mut o, "Other", "True", "D", "");
        assert_eq!(o["status"]["conditions"].as_array().unwrap().len(), 2);
    }
}
