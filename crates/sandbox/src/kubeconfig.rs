//! A kubeconfig pointing `kubectl` (or any client) at a sandbox served over HTTP.

/// Cluster, user and context are all named `olm-rs-sandbox`; plain HTTP, no credentials (the
/// sandbox does no authentication).
pub fn kubeconfig_yaml(server_url: &str, namespace: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: olm-rs-sandbox
  cluster:
    server: {server_url}
contexts:
- name: olm-rs-sandbox
  context:
    cluster: olm-rs-sandbox
    user: olm-rs-sandbox
    namespace: {namespace}
current-context: olm-rs-sandbox
users:
- name: olm-rs-sandbox
  user: {{}}
preferences: {{}}
"
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn kubeconfig_is_valid_yaml_with_the_server() {
        let y = super::kubeconfig_yaml("http://127.0.0.1:1234", "default");
        let v: serde_json::Value = serde_yaml_ng::from_str(&y).unwrap();
        assert_eq!(
            v["clusters"][0]["cluster"]["server"],
            "http://127.0.0.1:1234"
        );
        assert_eq!(v["current-context"], "olm-rs-sandbox");
    }
}
