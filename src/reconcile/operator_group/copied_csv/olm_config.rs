//! The OLMConfig side of copied CSVs (docs/operator-groups.md §10 "Disabling"): the `DisabledCopiedCSVs`
//! condition on OLMConfig `cluster`, and the Warning event kept on each all-namespaces CSV while
//! copying is off.

use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use super::super::shared::{NamespacedName, RACE_RETRY, Shared};
use crate::api::olm_config::CONDITION_DISABLED_COPIED_CSVS;
use crate::api::{ClusterServiceVersion, OlmConfigStatus, find_condition, set_condition};
use crate::k8s::effects::{Effects, Write, execute};
use crate::k8s::read;
use crate::k8s::write::{self, DeleteOptions, ObjectKey};
use crate::operator_group::copied_csv::{CopyWrite, RemovalReason};
use crate::operator_group::copy_decision::targets_all;
use crate::operator_group::olm_config::{
    CopyCensus, DISABLED_COPIED_CSVS_EVENT_REASON, disabled_copied_csvs_condition,
    disabled_event_message,
};
use crate::reconcile::work_queue::Next;

use super::{CopyLoopState, CopySyncError, copy_settings, decide_for, lock};

/// Writes the `DisabledCopiedCSVs` condition of OLMConfig `cluster`, if that object exists.
/// This loop alone writes that status; the write is guarded by the version it was computed
/// from.
pub async fn sync_olm_config(shared: &Shared) -> Result<Next, CopySyncError> {
    let Some(config) = shared.stores.olm_config() else {
        return Ok(Next::Done);
    };
    let settings = copy_settings(shared);
    let mut census = CopyCensus {
        disabled: settings.disabled,
        unexpected_copies: false,
        missing_copies: false,
    };
    for csv in shared.stores.csvs.all() {
        if !targets_all(&csv) {
            continue;
        }
        let key = NamespacedName::new(
            csv.metadata.namespace.as_deref().unwrap_or_default(),
            &csv.name_any(),
        );
        let plan = decide_for(shared, &key, Some(&csv), &settings).plan;
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
    let mut effects = Effects::default();
    if let Some(write) = Write::status(config.as_ref(), status) {
        effects.write(write);
    }
    match execute(&shared.ctx.client, &shared.ctx.events, &effects).await {
        Ok(_) => Ok(Next::Done),
        // Computed from an older copy (or the object went): again on fresh data.
        Err(err) if err.is_conflict() || err.is_not_found() => Ok(Next::After(RACE_RETRY)),
        Err(source) => Err(CopySyncError::Api {
            original: NamespacedName::new("", &config.name_any()),
            source,
        }),
    }
}

/// Keeps exactly one `DisabledCopiedCSVs` Warning event on an all-namespaces CSV while copying
/// is disabled (`warn`), and removes it once copying is back.
pub async fn note_disabled(
    shared: &Shared,
    state: &CopyLoopState,
    key: &NamespacedName,
    csv: &ClusterServiceVersion,
    warn: bool,
) {
    let warned = lock(&state.warned).contains(key);
    if warn && !warned {
        shared
            .ctx
            .events
            .warning(
                &crate::k8s::effects::reference_of(csv),
                DISABLED_COPIED_CSVS_EVENT_REASON,
                disabled_event_message(&key.namespace, &key.name),
            )
            .await;
        lock(&state.warned).insert(key.clone());
        lock(&state.events_cleared).remove(key);
    } else if !warn && (warned || !lock(&state.events_cleared).contains(key)) {
        // Also once after a restart, when nothing is remembered: an event left over from an
        // earlier run must go as well.
        if delete_disabled_events(shared, key).await {
            lock(&state.warned).remove(key);
            lock(&state.events_cleared).insert(key.clone());
        }
    }
}

/// Deletes the `DisabledCopiedCSVs` events about `key`; false when that failed. Events are not
/// kept in a store (there are many, and this runs once per original while copying is back on),
/// so this reads them live.
async fn delete_disabled_events(shared: &Shared, key: &NamespacedName) -> bool {
    let api: Api<Event> = Api::namespaced(shared.ctx.client.clone(), &key.namespace);
    let events = match read::list(&api, &ListParams::default()).await {
        Ok(list) => list,
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
        let event_key = ObjectKey::of(&event);
        if let Err(err) =
            write::delete(&shared.ctx.client, &event_key, &DeleteOptions::default()).await
        {
            tracing::warn!(csv = %key, error = %err, "cannot delete DisabledCopiedCSVs event");
            ok = false;
        }
    }
    ok
}
