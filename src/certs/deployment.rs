//! What a cert deployment's spec gains before it is hashed and applied (docs/certificates.md §5): the
//! Secret mounted twice (aggregated-API and controller-runtime webhook paths), a ServiceAccount,
//! and the `olmcahash` template annotation that rolls the pods when the CA changes. Any
//! Deployment serving with an olm-rs certificate: the spec and the Secret's name come in as
//! plain values (a CSV's cert deployments are named by `csv::certs`).

use k8s_openapi::api::apps::v1::DeploymentSpec;
use k8s_openapi::api::core::v1::{KeyToPath, SecretVolumeSource, Volume, VolumeMount};

use super::{OLM_CA_HASH_ANNOTATION, TLS_CRT_KEY, TLS_KEY_KEY};

/// Volume holding the cert as an aggregated API server expects it.
pub const APISERVICE_CERT_VOLUME: &str = "apiservice-cert";
/// Where an aggregated API server reads `apiserver.crt` / `apiserver.key`.
pub const APISERVICE_CERT_PATH: &str = "/apiserver.local.config/certificates";
/// Volume holding the cert as controller-runtime's webhook server expects it.
pub const WEBHOOK_CERT_VOLUME: &str = "webhook-cert";
/// controller-runtime's (and kubebuilder's) default serving-cert directory.
pub const WEBHOOK_CERT_PATH: &str = "/tmp/k8s-webhook-server/serving-certs";

/// ServiceAccount of a pod template that names none.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";

/// The ServiceAccount the deployment's pods run as (docs/certificates.md §3.3: `default` when empty).
pub fn service_account_of(spec: &DeploymentSpec) -> String {
    spec.template
        .spec
        .as_ref()
        .and_then(|p| p.service_account_name.clone())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| DEFAULT_SERVICE_ACCOUNT.to_owned())
}

/// Applies docs/certificates.md §5 to `spec`: both volumes on every cert deployment, mounts merged per
/// container (init containers untouched), `serviceAccountName` defaulted, and the template
/// annotation `olmcahash: <ca_hash>`.
pub fn add_cert_volumes(spec: &mut DeploymentSpec, secret_name: &str, ca_hash: &str) {
    let metadata = spec.template.metadata.get_or_insert_with(Default::default);
    metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(OLM_CA_HASH_ANNOTATION.to_owned(), ca_hash.to_owned());

    let pod = spec.template.spec.get_or_insert_with(Default::default);
    if pod
        .service_account_name
        .as_deref()
        .is_none_or(str::is_empty)
    {
        pod.service_account_name = Some(DEFAULT_SERVICE_ACCOUNT.to_owned());
    }
    let wanted = [
        (
            APISERVICE_CERT_VOLUME,
            APISERVICE_CERT_PATH,
            ["apiserver.crt", "apiserver.key"],
        ),
        (
            WEBHOOK_CERT_VOLUME,
            WEBHOOK_CERT_PATH,
            [TLS_CRT_KEY, TLS_KEY_KEY],
        ),
    ];
    for (volume_name, path, [crt_path, key_path]) in wanted {
        let volume = Volume {
            name: volume_name.to_owned(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret_name.to_owned()),
                items: Some(vec![
                    key_to_path(TLS_CRT_KEY, crt_path),
                    key_to_path(TLS_KEY_KEY, key_path),
                ]),
                ..Default::default()
            }),
            ..Default::default()
        };
        // Same name: replaced; otherwise appended.
        let volumes = pod.volumes.get_or_insert_with(Vec::new);
        match volumes.iter_mut().find(|v| v.name == volume_name) {
            Some(existing) => *existing = volume,
            None => volumes.push(volume),
        }
        let mount = VolumeMount {
            name: volume_name.to_owned(),
            mount_path: path.to_owned(),
            ..Default::default()
        };
        for container in &mut pod.containers {
            merge_mount(container.volume_mounts.get_or_insert_with(Vec::new), &mount);
        }
    }
}

fn key_to_path(key: &str, path: &str) -> KeyToPath {
    KeyToPath {
        key: key.to_owned(),
        path: path.to_owned(),
        mode: None,
    }
}

/// docs/certificates.md §5: a mount of the same name is the author's choice and stays; one at the same
/// path is replaced by OLM's; otherwise OLM's is appended.
fn merge_mount(mounts: &mut Vec<VolumeMount>, mount: &VolumeMount) {
    if mounts.iter().any(|m| m.name == mount.name) {
        return;
    }
    match mounts.iter_mut().find(|m| m.mount_path == mount.mount_path) {
        Some(existing) => *existing = mount.clone(),
        None => mounts.push(mount.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(value: serde_json::Value) -> DeploymentSpec {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn both_volumes_mounts_account_and_hash_are_added() {
        let mut s = spec(json!({
            "selector": {"matchLabels": {"app": "op"}},
            "template": {"spec": {
                "containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}],
                "initContainers": [{"name": "init", "image": "z"}]
            }}
        }));
        add_cert_volumes(&mut s, "op-service-cert", "abc");
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["template"]["metadata"]["annotations"]["olmcahash"], "abc");
        assert_eq!(v["template"]["spec"]["serviceAccountName"], "default");
        assert_eq!(
            v["template"]["spec"]["volumes"],
            json!([
                {"name": "apiservice-cert", "secret": {"secretName": "op-service-cert", "items": [
                    {"key": "tls.crt", "path": "apiserver.crt"}, {"key": "tls.key", "path": "apiserver.key"}]}},
                {"name": "webhook-cert", "secret": {"secretName": "op-service-cert", "items": [
                    {"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}]}}
            ])
        );
        for c in 0..2 {
            assert_eq!(
                v["template"]["spec"]["containers"][c]["volumeMounts"],
                json!([
                    {"name": "apiservice-cert", "mountPath": "/apiserver.local.config/certificates"},
                    {"name": "webhook-cert", "mountPath": "/tmp/k8s-webhook-server/serving-certs"}
                ])
            );
        }
        assert!(
            v["template"]["spec"]["initContainers"][0]
                .get("volumeMounts")
                .is_none()
        );
    }

    #[test]
    fn author_mounts_by_name_stay_and_same_path_mounts_are_replaced() {
        let mut s = spec(json!({
            "selector": {},
            "template": {"spec": {
                "serviceAccountName": "op-sa",
                "containers": [{"name": "a", "image": "x", "volumeMounts": [
                    {"name": "webhook-cert", "mountPath": "/certs"},
                    {"name": "mine", "mountPath": "/apiserver.local.config/certificates"}
                ]}],
                "volumes": [{"name": "webhook-cert", "emptyDir": {}}, {"name": "mine", "emptyDir": {}}]
            }}
        }));
        add_cert_volumes(&mut s, "op-service-cert", "abc");
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["template"]["spec"]["serviceAccountName"], "op-sa");
        assert_eq!(
            v["template"]["spec"]["containers"][0]["volumeMounts"],
            json!([
                {"name": "webhook-cert", "mountPath": "/certs"},
                {"name": "apiservice-cert", "mountPath": "/apiserver.local.config/certificates"}
            ])
        );
        let volumes = v["template"]["spec"]["volumes"].as_array().unwrap();
        assert_eq!(volumes.len(), 3, "same-name volume replaced, one appended");
        assert_eq!(volumes[0]["secret"]["secretName"], "op-service-cert");
        assert_eq!(volumes[2]["name"], "apiservice-cert");
    }
}
