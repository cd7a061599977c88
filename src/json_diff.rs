//! Where two JSON documents differ, as JSON-pointer paths with both values: what
//! `olm-rs takeover --dry-run` prints for an object olm-rs would change (docs/migrating-from-olm.md
//! §3), and what the takeover test prints for an object that moved.

use serde_json::Value;

/// Longest value printed; longer ones are cut with `…`.
const SHORT: usize = 160;

/// The paths where `a` and `b` differ, each as `path: a → b`. Maps are walked key by key (an
/// absent or null map counts as an empty one, so a label added where there was none is named by
/// its key); lists of the same length item by item; a list that grows or shrinks is one line
/// naming the items only one side has.
pub fn paths(a: &Value, b: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk("", a, b, &mut out);
    out
}

/// [`paths`], each prefixed with `prefix` (a pointer such as `/status`).
pub fn paths_under(prefix: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    walk(prefix, a, b, out);
}

fn walk(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    let empty = Value::Object(serde_json::Map::new());
    let (a, b) = match (a, b) {
        (Value::Null, Value::Object(_)) => (&empty, b),
        (Value::Object(_), Value::Null) => (a, &empty),
        _ => (a, b),
    };
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for key in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                walk(
                    &format!("{path}/{key}"),
                    x.get(key).unwrap_or(&Value::Null),
                    y.get(key).unwrap_or(&Value::Null),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                walk(&format!("{path}/{i}"), p, q, out);
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            let only = |a: &[Value], b: &[Value]| -> String {
                let items: Vec<String> = a.iter().filter(|i| !b.contains(i)).map(short).collect();
                items.join(", ")
            };
            out.push(format!(
                "{path}: {} → {} items, dropped [{}], added [{}]",
                x.len(),
                y.len(),
                only(x, y),
                only(y, x)
            ));
        }
        _ if a != b => out.push(format!("{path}: {} → {}", short(a), short(b))),
        _ => {}
    }
}

/// `value` as JSON, cut after [`SHORT`] characters.
pub fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > SHORT {
        format!("{}…", text.chars().take(SHORT).collect::<String>())
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn differences_are_named_by_path() {
        let before = json!({"metadata": {"name": "a", "labels": null},
                            "spec": {"ports": [1, 2], "args": ["x"]}});
        let after = json!({"metadata": {"name": "a", "labels": {"olm.managed": "true"}},
                           "spec": {"ports": [1, 3], "args": ["x", "y"]}});
        assert_eq!(
            paths(&before, &after),
            [
                "/metadata/labels/olm.managed: null → \"true\"",
                "/spec/ports/1: 2 → 3",
                "/spec/args: 1 → 2 items, dropped [], added [\"y\"]",
            ]
        );
        assert!(paths(&before, &before).is_empty());
        let long = Value::String("x".repeat(300));
        assert!(short(&long).ends_with('…'));
    }
}
