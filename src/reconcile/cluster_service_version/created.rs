//! Webhook configurations this controller created from a `generateName` and its stores have not
//! seen yet. Such a configuration is found again only by its labels (its name is made by the
//! API server), so a sync that ran before the watch delivered it would see none and create a
//! second one. Observation adds these to what the stores hold until the stores have them
//! (docs/certificates.md §4.2).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::ResourceExt;
use kube::core::DynamicObject;

/// Longer than any watch lag: a configuration the store has still not seen by then was deleted
/// meanwhile, and the store's answer is the truth again.
const KEPT_FOR: Duration = Duration::from_secs(120);

/// One kind's configurations created but not yet seen.
struct Pending<K> {
    created: Mutex<Vec<(Instant, Arc<K>)>>,
}

impl<K> Default for Pending<K> {
    fn default() -> Self {
        Self {
            created: Mutex::new(Vec::new()),
        }
    }
}

impl<K: kube::Resource> Pending<K> {
    fn record(&self, object: K) {
        let mut created = self.created.lock().unwrap_or_else(|p| p.into_inner());
        created.push((Instant::now(), Arc::new(object)));
    }

    /// `stored`, plus every recent creation the store does not hold yet; forgets those it holds
    /// and those older than [`KEPT_FOR`].
    fn with(&self, mut stored: Vec<Arc<K>>) -> Vec<Arc<K>> {
        let mut created = self.created.lock().unwrap_or_else(|p| p.into_inner());
        created.retain(|(at, object)| {
            at.elapsed() < KEPT_FOR && !stored.iter().any(|s| s.name_any() == object.name_any())
        });
        stored.extend(created.iter().map(|(_, object)| Arc::clone(object)));
        stored
    }
}

/// Both kinds.
#[derive(Default)]
pub struct CreatedWebhooks {
    validating: Pending<ValidatingWebhookConfiguration>,
    mutating: Pending<MutatingWebhookConfiguration>,
}

impl CreatedWebhooks {
    /// Records what a create answered, if it is a webhook configuration.
    pub fn record(&self, answer: Option<DynamicObject>) {
        let Some(answer) = answer else { return };
        let kind = answer.types.as_ref().map(|t| t.kind.as_str());
        let Ok(json) = serde_json::to_value(&answer) else {
            return;
        };
        match kind {
            Some("ValidatingWebhookConfiguration") => {
                if let Ok(config) = serde_json::from_value(json) {
                    self.validating.record(config);
                }
            }
            Some("MutatingWebhookConfiguration") => {
                if let Ok(config) = serde_json::from_value(json) {
                    self.mutating.record(config);
                }
            }
            _ => {}
        }
    }

    pub fn validating(
        &self,
        stored: Vec<Arc<ValidatingWebhookConfiguration>>,
    ) -> Vec<Arc<ValidatingWebhookConfiguration>> {
        self.validating.with(stored)
    }

    pub fn mutating(
        &self,
        stored: Vec<Arc<MutatingWebhookConfiguration>>,
    ) -> Vec<Arc<MutatingWebhookConfiguration>> {
        self.mutating.with(stored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(kind: &str, name: &str) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": name, "resourceVersion": "7"},
        }))
        .unwrap()
    }

    fn names<K: kube::Resource>(objects: &[Arc<K>]) -> Vec<String> {
        objects.iter().map(|o| o.name_any()).collect()
    }

    #[test]
    fn a_created_configuration_is_seen_until_the_store_has_it() {
        let created = CreatedWebhooks::default();
        created.record(Some(answer("ValidatingWebhookConfiguration", "v-abcde")));
        created.record(Some(answer("MutatingWebhookConfiguration", "m-fghij")));
        created.record(Some(answer("Secret", "not-a-webhook")));
        created.record(None);
        assert_eq!(names(&created.validating(Vec::new())), ["v-abcde"]);
        assert_eq!(names(&created.mutating(Vec::new())), ["m-fghij"]);

        let stored: ValidatingWebhookConfiguration =
            serde_json::from_value(json!({"metadata": {"name": "v-abcde"}})).unwrap();
        let seen = created.validating(vec![Arc::new(stored)]);
        assert_eq!(names(&seen), ["v-abcde"], "not twice once the store has it");
        assert!(
            created.validating(Vec::new()).is_empty(),
            "forgotten once the store held it"
        );
    }
}
