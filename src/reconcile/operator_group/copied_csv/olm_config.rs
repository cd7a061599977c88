//! The OLMConfig side of copied CSVs (docs/operator-groups.md §10 "Disabling"): the `DisabledCopiedCSVs`
//! condition on OLMConfig `cluster`, and the Warning event kept on each all-namespaces CSV while
//! copying is off.

use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, ListParams};
use kube::{Resource, ResourceExt};

use super::super::{ObjectKey, Shared};
use crate::api::keys::TARGET_NAMESPACES_ANNOTATION;
use crate::api::olm_config::CONDITION_DISABLED_COPIED_CSVS;
use crate::api::{
    ClusterServiceVersion, OlmConfig, OlmConfigStatus, find_condition, set_condition,
};
use crate::k8s::apply::apply_status;
use crate::operator_group::copied_csv::{
    CopySettings, CopyWrite, RemovalReason, copy_hashes, copy_prototype,
};
use crate::operator_group::olm_config::{
    CopyCensus, DISABLED_COPIED_CSVS_EVENT_REASON, disabled_copied_csvs_condition,
    disabled_event_message,
};
use crate::operator_group::targets::TargetNamespaces;
use crate::reconcile::work_queue::Next;

use super::{CopySyncError, copy_settings, lock, plan_for};

fn targets_all(csv: &ClusterServiceVersion) -> bool {
    csv.annotations()
        .get(TARGET_NAMESPACES_ANNOTATION)
        .and_then(|t| TargetNamespaces::from_annotation(t).ok())
        .is_some_and(|t| t.is_all())
}

/// Writes the `DisabledCopiedCSVs` condition of OLMConfig `cluster`, if that object exists.
pub async fn sync_olm_config(shared: &Shared) -> Result<Next, CopySyncError> {
    let Some(config) = shared.caches.olm_config() else {
        return Ok(Next::Done);
    };
    let settings = copy_settings(shared);
    let mut census = CopyCensus {
        disabled: settings.disabled,
        unexpected_copies: false,
        missing_copies: false,
    };
    for csv in shared.caches.csvs.state() {
        if !targets_all(&csv) {
            continue;
        }
        let key = ObjectKey::new(
            csv.metadata.namespace.as_deref().unwrap_or_default(),
            &csv.name_any(),
        );
        let desired = copy_hashes(&copy_prototype(&csv));
        let plan = plan_for(shared, &key, Some(&csv), Some(desired), &settings);
        census.unexpected_copies |= plan
            .deletes
            .iter()
            .any(|d| d.reason == RemovalReason::CopiesDisabled);
        census.missing_copies |= plan
            .writes
            .iter()
            .any(|w| matches!(w, CopyWrite::Create { .. }));
    }
    let now = Time(shared.ctx.clock.now());
    let condition = disabled_copied_csvs_condition(census, config.metadata.generation, &now);
    let mut conditions = config
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    if !set_condition(&mut conditions, condition, &now) {
        return Ok(Next::Done);
    }
    debug_assert!(find_condition(&conditions, CONDITION_DISABLED_COPIED_CSVS).is_some());
    let status = OlmConfigStatus {
        conditions: Some(conditions),
    };
    let api: Api<OlmConfig> = Api::all(shared.ctx.client.clone());
    apply_status(&api, &config.name_any(), &status)
        .await
        .map_err(|source| CopySyncError::Api {
            original: ObjectKey::new("", &config.name_any()),
            action: "write the OLMConfig status".into(),
            source,
        })?;
    Ok(Next::Done)
}

/// Keeps exactly one `DisabledCopiedCSVs` Warning event on an all-namespaces CSV while copying
/// is disabled, and removes it once copying is back.
pub async fn note_disabled(
    shared: &Shared,
    key: &ObjectKey,
    csv: &ClusterServiceVersion,
    settings: &CopySettings,
) {
    let applies = settings.disabled && targets_all(csv);
    let state = &shared.copy_state;
    let warned = lock(&state.warned).contains(key);
    if applies && !warned {
        shared
            .ctx
            .events
            .warning(
                &csv.object_ref(&()),
                DISABLED_COPIED_CSVS_EVENT_REASON,
                disabled_event_message(&key.namespace, &key.name),
            )
            .await;
        lock(&state.warned).insert(key.clone());
        lock(&state.events_cleared).remove(key);
    } else if !applies && (warned || !lock(&state.events_cleared).contains(key)) {
        // Also once after a restart, when nothing is remembered: an event left over from an
        // earlier run must go as well.
        if delete_disabled_events(shared, key).await {
            lock(&state.warned).remove(key);
            lock(&state.events_cleared).insert(key.clone());
        }
    }
}

/// Deletes the `DisabledCopiedCSVs` events about `key`; false when that failed.
async fn delete_disabled_events(shared: &Shared, key: &ObjectKey) -> bool {
    let api: Api<Event> = Api::namespaced(shared.ctx.client.clone(), &key.namespace);
    let events = match api.list(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(err) => {
            tracing::warn!(csv = %key, error = %err, "cannot list events to clear DisabledCopiedCSVs");
            return false;
        }
    };
    let mut ok = true;
    for event in events {
        let about = event.regarding.as_ref();
        let ours = event.reason.as_deref() == Some(DISABLED_COPIED_CSVS_EVENT_REASON)
            && about.is_some_and(|r| {
                r.kind.as_deref() == Some("ClusterServiceVersion")
                    && r.name.as_deref() == Some(&key.name)
            });
        if !ours {
            continue;
        }
        if let Err(err) = api
            .delete(&event.name_any(), &DeleteParams::default())
            .await
        {
            tracing::warn!(csv = %key, error = %err, "cannot delete DisabledCopiedCSVs event");
            ok = false;
        }
    }
    ok
}
