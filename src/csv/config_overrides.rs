//! Subscription `spec.config` applied to a strategy Deployment (docs/install-plans.md §4),
//! merge rule by merge rule as OLM's injector does them.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DeploymentSpec;
use k8s_openapi::api::core::v1::{Affinity, EnvVar, PodSpec};

use crate::api::SubscriptionConfig;

/// Applies `config` to `spec` (pod template) and returns the annotations to add to the
/// Deployment's own metadata.
pub fn apply_config(
    spec: &mut DeploymentSpec,
    config: &SubscriptionConfig,
) -> BTreeMap<String, String> {
    let pod = spec.template.spec.get_or_insert_with(PodSpec::default);
    if let Some(env) = config.env.as_deref().filter(|e| !e.is_empty()) {
        for container in &mut pod.containers {
            container.env = Some(merge_env(container.env.take().unwrap_or_default(), env));
        }
    }
    if let Some(env_from) = config.env_from.as_deref() {
        for container in &mut pod.containers {
            let list = container.env_from.get_or_insert_with(Vec::new);
            for item in env_from {
                if !list.contains(item) {
                    list.push(item.clone());
                }
            }
            if list.is_empty() {
                container.env_from = None;
            }
        }
    }
    if let Some(volumes) = config.volumes.as_deref().filter(|v| !v.is_empty()) {
        let list = pod.volumes.get_or_insert_with(Vec::new);
        for volume in volumes {
            match list.iter_mut().find(|v| v.name == volume.name) {
                Some(existing) => *existing = volume.clone(),
                None => list.push(volume.clone()),
            }
        }
    }
    if let Some(mounts) = config.volume_mounts.as_deref().filter(|m| !m.is_empty()) {
        for container in &mut pod.containers {
            let list = container.volume_mounts.get_or_insert_with(Vec::new);
            for mount in mounts {
                match list.iter_mut().find(|m| m.name == mount.name) {
                    Some(existing) => *existing = mount.clone(),
                    None => list.push(mount.clone()),
                }
            }
        }
    }
    if let Some(tolerations) = config.tolerations.as_deref().filter(|t| !t.is_empty()) {
        let list = pod.tolerations.get_or_insert_with(Vec::new);
        for toleration in tolerations {
            if !list.contains(toleration) {
                list.push(toleration.clone());
            }
        }
    }
    if let Some(resources) = &config.resources {
        for container in &mut pod.containers {
            container.resources = Some(resources.clone());
        }
    }
    if let Some(node_selector) = &config.node_selector {
        pod.node_selector = Some(node_selector.clone());
    }
    if let Some(affinity) = &config.affinity {
        override_affinity(pod, affinity);
    }
    let mut deployment_annotations = BTreeMap::new();
    if let Some(extra) = &config.annotations {
        // Existing keys win: config annotations only add.
        let metadata = spec.template.metadata.get_or_insert_with(Default::default);
        let template = metadata.annotations.get_or_insert_with(BTreeMap::new);
        for (k, v) in extra {
            template.entry(k.clone()).or_insert_with(|| v.clone());
            deployment_annotations.insert(k.clone(), v.clone());
        }
    }
    deployment_annotations
}

/// Same name → replaced where it stands; new names appended in config order.
fn merge_env(mut current: Vec<EnvVar>, overrides: &[EnvVar]) -> Vec<EnvVar> {
    for var in overrides {
        match current.iter_mut().find(|c| c.name == var.name) {
            Some(existing) => *existing = var.clone(),
            None => current.push(var.clone()),
        }
    }
    current
}

fn is_empty_affinity(a: &Affinity) -> bool {
    a.node_affinity.is_none() && a.pod_affinity.is_none() && a.pod_anti_affinity.is_none()
}

/// `{}` removes the pod's affinity; otherwise each given part replaces the pod's, an empty part
/// removes it — except an empty `podAntiAffinity`, which (OLM quirk) removes the whole affinity.
fn override_affinity(pod: &mut PodSpec, affinity: &Affinity) {
    let current_empty = pod.affinity.as_ref().is_none_or(is_empty_affinity);
    if current_empty || is_empty_affinity(affinity) {
        pod.affinity = (!is_empty_affinity(affinity)).then(|| affinity.clone());
        return;
    }
    let Some(current) = pod.affinity.as_mut() else {
        return;
    };
    if let Some(node) = &affinity.node_affinity {
        current.node_affinity = (*node != Default::default()).then(|| node.clone());
    }
    if let Some(pod_affinity) = &affinity.pod_affinity {
        current.pod_affinity = (*pod_affinity != Default::default()).then(|| pod_affinity.clone());
    }
    let mut drop_all = false;
    if let Some(anti) = &affinity.pod_anti_affinity {
        if *anti == Default::default() {
            drop_all = true;
        } else {
            current.pod_anti_affinity = Some(anti.clone());
        }
    }
    if drop_all || is_empty_affinity(current) {
        pod.affinity = None;
    }
}

#[cfg(test)]
mod tests;
