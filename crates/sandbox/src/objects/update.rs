//! Update (PUT, and the result of every patch): optimistic concurrency on `resourceVersion`,
//! status-subresource separation, `generation` bumps on spec changes only, finalizer rules,
//! and no-op writes that change nothing (no new `resourceVersion`, no watch event).

use std::sync::Arc;

use serde_json::Value;

use super::create::validate_kind;
use super::{
    Part, WriteOptions, apply_schema, check_type, commit, defaults, same_but_manager_times,
    spec_changed,
};
use crate::error::ApiError;
use crate::meta;
use crate::resources::ResourceInfo;
use crate::state::State;

/// Metadata only the server sets; kept from the stored object whatever the client sends.
const IMMUTABLE_META: &[&str] = &[
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "namespace",
    "name",
];

pub fn update(
    state: &mut State,
    res: &ResourceInfo,
    path_ns: Option<&str>,
    name: &str,
    new: Value,
    part: Part,
    opts: &WriteOptions,
) -> Result<Arc<Value>, ApiError> {
    check_type(&new, res)?;
    let new = crate::conversion::to_storage(new, res);
    let ns = if res.namespaced {
        path_ns.unwrap_or_default()
    } else {
        ""
    };
    if let Some(body_name) = meta::name(&new)
        && body_name != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    if res.namespaced
        && let Some(body_ns) = meta::namespace(&new)
        && body_ns != ns
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let Some(current) = state.store.get(&res.group_resource(), ns, name).cloned() else {
        return Err(ApiError::not_found(res, name));
    };
    if let Some(rv) = meta::resource_version(&new)
        && Some(rv) != meta::resource_version(&current)
    {
        return Err(ApiError::stale(res, name));
    }

    let mut next = merge_part(&current, new, part, res);
    if let Value::Object(root) = &mut next {
        let (api_version, kind) = crate::conversion::storage_type(res);
        root.insert("apiVersion".into(), Value::String(api_version));
        root.insert("kind".into(), Value::String(kind));
    }
    defaults::apply(state, res, &mut next, Some(&current));
    apply_schema(&mut next, res);
    check_finalizers(&current, &next, res, name)?;
    if res.tracks_generation && spec_changed(&next, &current, res) {
        let generation = meta::generation(&current).unwrap_or(0) + 1;
        meta::metadata_mut(&mut next).insert("generation".into(), Value::from(generation));
    }
    if let Some(rv) = meta::resource_version(&current) {
        meta::set_str(&mut next, "resourceVersion", rv);
    }
    if same_but_manager_times(&next, &current) {
        // As the real server: a write whose only effect would be newer `managedFields`
        // timestamps stores nothing (no new resourceVersion, no watch event).
        return Ok(current);
    }
    validate_kind(res, &next, name)?;
    Ok(commit(state, res, next, opts))
}

/// Builds the object to store from the stored one and the client's version of `part`.
fn merge_part(current: &Value, mut new: Value, part: Part, res: &ResourceInfo) -> Value {
    match part {
        Part::Status => {
            let mut next = current.clone();
            match new.get_mut("status").map(Value::take) {
                Some(status) => next["status"] = status,
                None => {
                    if let Value::Object(m) = &mut next {
                        m.shift_remove("status");
                    }
                }
            }
            carry_managed_fields(&new, &mut next);
            next
        }
        Part::Finalize => {
            let mut next = current.clone();
            let fins = new
                .pointer("/spec/finalizers")
                .cloned()
                .unwrap_or(Value::Array(Vec::new()));
            if !next.get("spec").is_some_and(Value::is_object) {
                next["spec"] = serde_json::json!({});
            }
            next["spec"]["finalizers"] = fins;
            next
        }
        Part::Main => {
            let cur_meta = meta::metadata(current).cloned().unwrap_or_default();
            let new_meta = meta::metadata_mut(&mut new);
            for field in IMMUTABLE_META {
                match cur_meta.get(*field) {
                    Some(v) => new_meta.insert(field.to_string(), v.clone()),
                    None => new_meta.shift_remove(*field),
                };
            }
            // A PUT without managedFields keeps the recorded ones (as the real server does).
            if !new_meta.contains_key("managedFields")
                && let Some(mf) = cur_meta.get("managedFields")
            {
                new_meta.insert("managedFields".into(), mf.clone());
            }
            if res.status_subresource {
                keep_from(current, &mut new, "status");
            }
            if res.group.is_empty() && res.kind == "Namespace" {
                // spec.finalizers only change through /finalize.
                let fins = current.pointer("/spec/finalizers").cloned();
                if let Some(f) = fins {
                    if !new.get("spec").is_some_and(Value::is_object) {
                        new["spec"] = serde_json::json!({});
                    }
                    new["spec"]["finalizers"] = f;
                }
            }
            new
        }
    }
}

fn keep_from(current: &Value, next: &mut Value, key: &str) {
    let Value::Object(m) = next else { return };
    match current.get(key) {
        Some(v) => {
            m.insert(key.into(), v.clone());
        }
        None => {
            m.shift_remove(key);
        }
    }
}

fn carry_managed_fields(from: &Value, to: &mut Value) {
    if let Some(mf) = meta::metadata(from).and_then(|m| m.get("managedFields")) {
        meta::metadata_mut(to).insert("managedFields".into(), mf.clone());
    }
}

/// No finalizer may be added once deletion has started.
fn check_finalizers(
    current: &Value,
    next: &Value,
    res: &ResourceInfo,
    name: &str,
) -> Result<(), ApiError> {
    if !meta::is_deleting(current) {
        return Ok(());
    }
    let old = meta::finalizers(current);
    let added: Vec<String> = meta::finalizers(next)
        .into_iter()
        .filter(|f| !old.contains(f))
        .collect();
    if added.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(
        res,
        name,
        "metadata.finalizers",
        &format!(
            "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::create;
    use crate::resources::ResourceInfo;
    use serde_json::json;

    fn custom_without_status() -> ResourceInfo {
        ResourceInfo {
            group: "example.com".into(),
            version: "v1".into(),
            kind: "Thing".into(),
            plural: "things".into(),
            singular: "thing".into(),
            namespaced: true,
            status_subresource: false,
            tracks_generation: true,
            short_names: vec![],
            categories: vec![],
            columns: vec![],
            schema: None,
            custom: true,
            deprecation_warning: None,
        }
    }

    fn setup() -> (State, ResourceInfo, Arc<Value>) {
        let mut state = State::new(100);
        let res = custom_without_status();
        let obj = json!({"metadata": {"name": "t"}, "spec": {"a": 1, "b": 2}});
        let created = create(
            &mut state,
            &res,
            Some("default"),
            obj,
            &WriteOptions::default(),
        )
        .unwrap();
        (state, res, created)
    }

    #[test]
    fn reordered_keys_are_no_change() {
        let (mut state, res, created) = setup();
        let mut same = (*created).clone();
        same["spec"] = json!({"b": 2, "a": 1});
        let out = update(
            &mut state,
            &res,
            Some("default"),
            "t",
            same,
            Part::Main,
            &WriteOptions::default(),
        )
        .unwrap();
        assert!(
            Arc::ptr_eq(&out, &created),
            "no new resourceVersion for a no-op"
        );
    }

    #[test]
    fn a_write_that_only_moves_manager_timestamps_is_no_change() {
        let (mut state, res, created) = setup();
        let mut stamped = (*created).clone();
        stamped["metadata"]["managedFields"] =
            json!([{"manager": "m", "operation": "Update", "time": "2020-01-01T00:00:00Z"}]);
        let first = update(
            &mut state,
            &res,
            Some("default"),
            "t",
            stamped.clone(),
            Part::Main,
            &WriteOptions::default(),
        )
        .unwrap();
        stamped["metadata"]["resourceVersion"] = first["metadata"]["resourceVersion"].clone();
        stamped["metadata"]["managedFields"][0]["time"] = json!("2030-01-01T00:00:00Z");
        let second = update(
            &mut state,
            &res,
            Some("default"),
            "t",
            stamped,
            Part::Main,
            &WriteOptions::default(),
        )
        .unwrap();
        assert!(Arc::ptr_eq(&first, &second));
    }

    #[test]
    fn without_a_status_subresource_status_changes_bump_generation() {
        let (mut state, res, created) = setup();
        let mut next = (*created).clone();
        next["status"] = json!({"phase": "Ready"});
        let out = update(
            &mut state,
            &res,
            Some("default"),
            "t",
            next,
            Part::Main,
            &WriteOptions::default(),
        )
        .unwrap();
        assert_eq!(meta::generation(&out), Some(2));
        assert_eq!(out["status"]["phase"], "Ready");
    }

    #[test]
    fn removing_the_last_finalizer_of_a_deleting_object_removes_it() {
        let (mut state, res, created) = setup();
        let mut held = (*created).clone();
        meta::set_finalizers(&mut held, &["x".to_string()]);
        update(
            &mut state,
            &res,
            Some("default"),
            "t",
            held,
            Part::Main,
            &WriteOptions::default(),
        )
        .unwrap();
        crate::objects::delete(&mut state, &res, Some("default"), "t", &Default::default())
            .unwrap();
        let deleting = state
            .store
            .get(&res.group_resource(), "default", "t")
            .unwrap()
            .clone();
        assert!(meta::is_deleting(&deleting));
        let mut released = (*deleting).clone();
        meta::set_finalizers(&mut released, &[]);
        update(
            &mut state,
            &res,
            Some("default"),
            "t",
            released,
            Part::Main,
            &WriteOptions::default(),
        )
        .unwrap();
        assert!(
            state
                .store
                .get(&res.group_resource(), "default", "t")
                .is_none()
        );
    }
}
