//! `olm.webhook-description-hash` (docs/api-types.md §6, docs/certificates.md §4.2).

use serde_json::Value;

use super::go_json::{self, GoJsonError, GoType};
use super::sha224_base62;

/// Label on webhook configurations holding the hash of the CSV's WebhookDescription.
pub const WEBHOOK_DESCRIPTION_HASH_LABEL: &str = "olm.webhook-description-hash";

/// Base 62 SHA-224 of the Go-JSON of one `spec.webhookdefinitions[i]` entry plus `\n`. Pass the
/// entry as read back from the API server (schema default `containerPort: 443` applied).
pub fn webhook_description_hash(description: &Value) -> Result<String, GoJsonError> {
    let text = go_json::encode_stream(description, GoType::WEBHOOK_DESCRIPTION)?;
    Ok(sha224_base62(text.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn encoding_follows_the_webhook_description_order() {
        let description = json!({
            "webhookPath": "/validate",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "rules": [{"scope": "*", "resources": ["demos"], "apiVersions": ["v1alpha1"],
                       "apiGroups": ["example.com"], "operations": ["CREATE", "UPDATE"]}],
            "failurePolicy": "Fail",
            "containerPort": 443,
            "deploymentName": "demo-controller-manager",
            "type": "ValidatingAdmissionWebhook",
            "generateName": "vdemo.example.com",
            "timeoutSeconds": 0,
            "targetPort": 9443
        });
        let text = go_json::encode(&description, GoType::WEBHOOK_DESCRIPTION).expect("encodes");
        assert_eq!(
            text,
            concat!(
                r#"{"generateName":"vdemo.example.com","type":"ValidatingAdmissionWebhook","#,
                r#""deploymentName":"demo-controller-manager","containerPort":443,"targetPort":9443,"#,
                r#""rules":[{"operations":["CREATE","UPDATE"],"apiGroups":["example.com"],"apiVersions":["v1alpha1"],"resources":["demos"],"scope":"*"}],"#,
                r#""failurePolicy":"Fail","sideEffects":"None","timeoutSeconds":0,"admissionReviewVersions":["v1"],"webhookPath":"/validate"}"#
            )
        );
        let hash = webhook_description_hash(&description).expect("hash");
        assert_eq!(hash, sha224_base62(format!("{text}\n").as_bytes()));
    }

    #[test]
    fn missing_required_pointers_are_null() {
        let text = go_json::encode(
            &json!({"type": "MutatingAdmissionWebhook"}),
            GoType::WEBHOOK_DESCRIPTION,
        )
        .expect("encodes");
        assert_eq!(
            text,
            r#"{"generateName":"","type":"MutatingAdmissionWebhook","sideEffects":null,"admissionReviewVersions":null}"#
        );
    }

    #[test]
    fn the_defaulted_port_changes_the_hash() {
        let bare = json!({"generateName": "m.example.com", "type": "MutatingAdmissionWebhook",
                          "sideEffects": "None", "admissionReviewVersions": ["v1"]});
        let mut defaulted = bare.clone();
        defaulted["containerPort"] = json!(443);
        assert_ne!(
            webhook_description_hash(&bare).expect("hash"),
            webhook_description_hash(&defaulted).expect("hash")
        );
    }
}
