//! `olm.deployment-spec-hash` and the pure DeploymentSpec steps of docs/api-types.md §6.3 that come
//! after the certificate changes: CSV annotations on the pod template (step 2),
//! `OPERATOR_CONDITION_NAME` (step 4) and `revisionHistoryLimit` (step 5). Step 3 (Subscription
//! config overrides) belongs to the install code.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::go_json::{self, GoJsonError, GoType};
use super::sha224_base62;

/// Label on operator Deployments holding the hash of the desired DeploymentSpec.
pub const DEPLOYMENT_SPEC_HASH_LABEL: &str = "olm.deployment-spec-hash";

/// Variable OLM puts into every container so the operator finds its OperatorCondition.
pub const OPERATOR_CONDITION_NAME_ENV: &str = "OPERATOR_CONDITION_NAME";

/// Base 62 SHA-224 of the Go-JSON of the final DeploymentSpec plus `\n`. Pass the spec as the
/// API server returned it inside the CSV (pruned and defaulted, e.g. `protocol: TCP` on ports)
/// after all of docs/api-types.md §6.3 steps 1–5.
pub fn deployment_spec_hash(spec: &Value) -> Result<String, GoJsonError> {
    let text = go_json::encode_stream(spec, GoType::DEPLOYMENT_SPEC)?;
    Ok(sha224_base62(text.as_bytes()))
}

/// docs/api-types.md §6.3 step 2: the template's own annotations, then every CSV annotation on top (the CSV wins
/// on equal keys). Nothing is added when both are empty.
pub fn merge_csv_annotations(
    spec: &mut Value,
    csv_annotations: &BTreeMap<String, String>,
) -> Result<(), GoJsonError> {
    if csv_annotations.is_empty() {
        return Ok(());
    }
    let metadata = child_object(root_object(spec)?, "template", "DeploymentSpec")?;
    let metadata = child_object(metadata, "metadata", "DeploymentSpec.template")?;
    let annotations = child_object(metadata, "annotations", "DeploymentSpec.template.metadata")?;
    for (key, value) in csv_annotations {
        annotations.insert(key.clone(), Value::String(value.clone()));
    }
    Ok(())
}

/// docs/api-types.md §6.3 step 4: `OPERATOR_CONDITION_NAME=<csv name>` in every entry of `containers` (init
/// containers untouched). An existing variable of that name is replaced where it stands —
/// value set, any `valueFrom` dropped, since a variable cannot carry both — otherwise the
/// variable is appended last.
pub fn set_operator_condition_name(spec: &mut Value, csv_name: &str) -> Result<(), GoJsonError> {
    let template = child_object(root_object(spec)?, "template", "DeploymentSpec")?;
    let pod = child_object(template, "spec", "DeploymentSpec.template")?;
    let Some(containers) = pod.get_mut("containers").filter(|v| !v.is_null()) else {
        return Ok(());
    };
    let containers = containers.as_array_mut().ok_or_else(|| {
        wrong(
            "DeploymentSpec.template.spec.containers",
            "a list",
            "something else",
        )
    })?;
    for (i, container) in containers.iter_mut().enumerate() {
        let path = format!("DeploymentSpec.template.spec.containers[{i}]");
        let container = container
            .as_object_mut()
            .ok_or_else(|| wrong(&path, "an object", "something else"))?;
        let env = container.entry("env").or_insert(Value::Null);
        if env.is_null() {
            *env = Value::Array(Vec::new());
        }
        let env = env
            .as_array_mut()
            .ok_or_else(|| wrong(&format!("{path}.env"), "a list", "something else"))?;
        let wanted = || {
            let mut var = Map::new();
            var.insert(
                "name".to_owned(),
                Value::String(OPERATOR_CONDITION_NAME_ENV.to_owned()),
            );
            var.insert("value".to_owned(), Value::String(csv_name.to_owned()));
            Value::Object(var)
        };
        let mut found = false;
        for var in env.iter_mut() {
            if var.get("name").and_then(Value::as_str) == Some(OPERATOR_CONDITION_NAME_ENV) {
                *var = wanted();
                found = true;
            }
        }
        if !found {
            env.push(wanted());
        }
    }
    Ok(())
}

/// docs/api-types.md §6.3 step 5: `revisionHistoryLimit := 1`.
pub fn set_revision_history_limit(spec: &mut Value) -> Result<(), GoJsonError> {
    root_object(spec)?.insert("revisionHistoryLimit".to_owned(), Value::from(1));
    Ok(())
}

fn wrong(path: &str, expected: &'static str, found: &'static str) -> GoJsonError {
    GoJsonError::WrongType {
        path: path.to_owned(),
        expected,
        found,
    }
}

fn root_object(spec: &mut Value) -> Result<&mut Map<String, Value>, GoJsonError> {
    if spec.is_null() {
        *spec = Value::Object(Map::new());
    }
    spec.as_object_mut()
        .ok_or_else(|| wrong("DeploymentSpec", "an object", "something else"))
}

/// The object member `key` of `parent`, created when absent or null.
fn child_object<'a>(
    parent: &'a mut Map<String, Value>,
    key: &str,
    parent_path: &str,
) -> Result<&'a mut Map<String, Value>, GoJsonError> {
    let slot = parent.entry(key.to_owned()).or_insert(Value::Null);
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut().ok_or_else(|| GoJsonError::WrongType {
        path: format!("{parent_path}.{key}"),
        expected: "an object",
        found: "something else",
    })
}

#[cfg(test)]
mod tests;
