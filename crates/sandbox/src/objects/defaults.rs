//! Defaults and server-allocated values the real API server fills in for built-in kinds. Only
//! those a controller or `kubectl` user would notice are set; see the module doc of `sandbox`.

use serde_json::{Map, Value, json};

use crate::crd_registry::CLEANUP_FINALIZER;
use crate::meta;
use crate::resources::ResourceInfo;
use crate::state::State;

fn obj_mut<'a>(v: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    let map = v.as_object_mut()?;
    let entry = map.entry(key).or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    entry.as_object_mut()
}

fn default_field(map: &mut Map<String, Value>, key: &str, value: Value) {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.into(), value);
    }
}

/// Defaults applied on every write (create and update), like the server's defaulting on decode.
pub fn apply(state: &mut State, res: &ResourceInfo, obj: &mut Value, old: Option<&Value>) {
    match (res.group.as_str(), res.kind.as_str()) {
        ("", "Namespace") => {
            let name = meta::name(obj).unwrap_or_default().to_string();
            if let Some(labels) = obj_mut(meta_value(obj), "labels") {
                // The server keeps this label equal to the name (NamespaceDefaultLabelName).
                labels.insert("kubernetes.io/metadata.name".into(), Value::String(name));
            }
        }
        ("", "Secret") => {
            if let Some(m) = obj.as_object_mut() {
                default_field(m, "type", json!("Opaque"));
            }
        }
        ("", "Service") => service(state, obj, old),
        ("apps", "Deployment") => deployment(obj),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            if let Some(spec) = obj_mut(obj, "spec") {
                default_field(spec, "conversion", json!({"strategy": "None"}));
            }
        }
        _ => {}
    }
}

fn meta_value(obj: &mut Value) -> &mut Value {
    meta::metadata_mut(obj);
    &mut obj["metadata"]
}

/// Defaults set only when an object is created.
pub fn on_create(res: &ResourceInfo, obj: &mut Value) {
    match (res.group.as_str(), res.kind.as_str()) {
        ("", "Namespace") => {
            if let Some(spec) = obj_mut(obj, "spec") {
                spec.insert("finalizers".into(), json!(["kubernetes"]));
            }
            obj["status"] = json!({"phase": "Active"});
        }
        ("", "Pod") => obj["status"] = json!({"phase": "Pending"}),
        _ => {}
    }
}

/// The CRD deletion marker the real server sets in its Delete handler.
pub fn on_crd_delete(crd: &mut Value) {
    let mut fins = meta::finalizers(crd);
    if !fins.iter().any(|f| f == CLEANUP_FINALIZER) {
        fins.push(CLEANUP_FINALIZER.into());
        meta::set_finalizers(crd, &fins);
    }
    crate::conditions::set(
        crd,
        "Terminating",
        "True",
        "InstanceDeletionPending",
        "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
    );
}

fn service(state: &mut State, obj: &mut Value, old: Option<&Value>) {
    let old_spec = old.and_then(|o| o.get("spec"));
    let Some(spec) = obj_mut(obj, "spec") else {
        return;
    };
    default_field(spec, "type", json!("ClusterIP"));
    default_field(spec, "sessionAffinity", json!("None"));
    let headless_or_external = spec.get("type").and_then(Value::as_str) == Some("ExternalName");
    if !headless_or_external {
        // Allocated values survive updates that omit them, as on the real server.
        let old_ip = old_spec.and_then(|s| s.get("clusterIP")).cloned();
        let ip = match (spec.get("clusterIP").and_then(Value::as_str), old_ip) {
            (Some(ip), _) if !ip.is_empty() => Value::String(ip.to_string()),
            (_, Some(old)) => old,
            _ => Value::String(state.allocate_cluster_ip()),
        };
        spec.insert("clusterIP".into(), ip.clone());
        default_field(spec, "clusterIPs", json!([ip]));
        default_field(spec, "ipFamilies", json!(["IPv4"]));
        default_field(spec, "ipFamilyPolicy", json!("SingleStack"));
        default_field(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if let Some(Value::Array(ports)) = spec.get_mut("ports") {
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            default_field(port, "protocol", json!("TCP"));
            if let Some(p) = port.get("port").cloned() {
                default_field(port, "targetPort", p);
            }
        }
    }
}

fn deployment(obj: &mut Value) {
    let Some(spec) = obj_mut(obj, "spec") else {
        return;
    };
    default_field(spec, "replicas", json!(1));
    default_field(spec, "revisionHistoryLimit", json!(10));
    default_field(spec, "progressDeadlineSeconds", json!(600));
    default_field(
        spec,
        "strategy",
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtins;

    fn res(kind: &str) -> ResourceInfo {
        (*builtins().into_iter().find(|r| r.kind == kind).unwrap()).clone()
    }

    #[test]
    fn service_gets_a_cluster_ip_that_survives_updates() {
        let mut state = State::new(10);
        let mut svc = json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 443}]}});
        apply(&mut state, &res("Service"), &mut svc, None);
        let ip = svc["spec"]["clusterIP"].clone();
        assert!(ip.as_str().unwrap().starts_with("10.96."));
        assert_eq!(svc["spec"]["ports"][0]["targetPort"], 443);
        let mut updated = json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}});
        apply(&mut state, &res("Service"), &mut updated, Some(&svc));
        assert_eq!(updated["spec"]["clusterIP"], ip);
    }

    #[test]
    fn deployment_defaults_keep_given_values() {
        let mut state = State::new(10);
        let mut d = json!({"spec": {"replicas": 3}});
        apply(&mut state, &res("Deployment"), &mut d, None);
        assert_eq!(d["spec"]["replicas"], 3);
        assert_eq!(d["spec"]["progressDeadlineSeconds"], 600);
    }
}
