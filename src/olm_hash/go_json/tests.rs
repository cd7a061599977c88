use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn enc(value: serde_json::Value, ty: GoType) -> String {
    encode(&value, ty).expect("encodes")
}

#[test]
fn empty_deployment_spec_bytes() {
    let text = enc(json!({}), GoType::DEPLOYMENT_SPEC);
    assert_eq!(
        text,
        r#"{"selector":null,"template":{"metadata":{"creationTimestamp":null},"spec":{"containers":null}},"strategy":{}}"#
    );
}

#[test]
fn members_are_reordered_and_unknown_members_dropped() {
    let spec = json!({
        "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}, "type": "RollingUpdate"},
        "unknownField": 1,
        "replicas": 3,
        "template": {"spec": {"containers": [{"image": "x", "name": "c", "bogus": true}]}},
        "selector": {"matchLabels": {"b": "2", "a": "1"}},
    });
    assert_eq!(
        enc(spec, GoType::DEPLOYMENT_SPEC),
        concat!(
            r#"{"replicas":3,"selector":{"matchLabels":{"a":"1","b":"2"}},"#,
            r#""template":{"metadata":{"creationTimestamp":null},"spec":{"containers":[{"name":"c","image":"x","resources":{}}]}},"#,
            r#""strategy":{"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":1,"maxSurge":"25%"}}}"#
        )
    );
}

#[test]
fn omitempty_and_pointer_rules() {
    let spec = json!({
        "replicas": 0,                 // ?* pointer: explicit 0 is written
        "minReadySeconds": 0,          // ?: 0 is left out
        "paused": false,               // ?: false is left out
        "revisionHistoryLimit": null,  // ?* null is left out
        "template": {"spec": {
            "containers": [],          // no omitempty: empty list is []
            "volumes": [],             // ?: empty list left out
            "nodeSelector": {},        // ?: empty map left out
            "securityContext": {},     // ? pointer struct: explicit {} is written
            "automountServiceAccountToken": false, // ?*: explicit false written
            "hostNetwork": false,      // ?: left out
            "serviceAccountName": "",  // ?: left out
        }},
    });
    assert_eq!(
        enc(spec, GoType::DEPLOYMENT_SPEC),
        concat!(
            r#"{"replicas":0,"selector":null,"template":{"metadata":{"creationTimestamp":null},"#,
            r#""spec":{"containers":[],"automountServiceAccountToken":false,"securityContext":{}}},"strategy":{}}"#
        )
    );
}

#[test]
fn lists_keep_order_duplicates_and_single_empty_string() {
    let rules =
        json!([{"apiGroups": [""], "resources": ["pods", "pods", "a"], "verbs": ["get"]}, {}]);
    assert_eq!(
        enc(rules, GoType::POLICY_RULES),
        r#"[{"verbs":["get"],"apiGroups":[""],"resources":["pods","pods","a"]},{"verbs":null}]"#
    );
}

#[test]
fn null_rules_list_is_the_four_bytes_null() {
    assert_eq!(enc(serde_json::Value::Null, GoType::POLICY_RULES), "null");
}

#[test]
fn quantities_are_canonicalised_and_numbers_become_strings() {
    let template = json!({"spec": {"containers": [{"name": "m", "resources": {
        "limits": {"memory": "1024Mi", "cpu": 0.1},
        "requests": {"cpu": "1000m", "memory": 64}
    }}]}});
    assert_eq!(
        enc(template, GoType::POD_TEMPLATE_SPEC),
        concat!(
            r#"{"metadata":{"creationTimestamp":null},"spec":{"containers":[{"name":"m","resources":"#,
            r#"{"limits":{"cpu":"100m","memory":"1Gi"},"requests":{"cpu":"1","memory":"64"}}}]}}"#
        )
    );
}

#[test]
fn int_or_string_keeps_its_json_type_and_divisor_defaults_to_zero() {
    let template = json!({"spec": {"containers": [{
        "name": "m",
        "livenessProbe": {"httpGet": {"port": 8081, "path": "/healthz"}},
        "readinessProbe": {"tcpSocket": {"port": "http"}},
        "startupProbe": {"grpc": {"port": 9000}},
        "env": [{"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory"}}}]
    }]}});
    assert_eq!(
        enc(template, GoType::POD_TEMPLATE_SPEC),
        concat!(
            r#"{"metadata":{"creationTimestamp":null},"spec":{"containers":[{"name":"m","#,
            r#""env":[{"name":"MEM","valueFrom":{"resourceFieldRef":{"resource":"limits.memory","divisor":"0"}}}],"#,
            r#""resources":{},"livenessProbe":{"httpGet":{"path":"/healthz","port":8081}},"#,
            r#""readinessProbe":{"tcpSocket":{"port":"http"}},"startupProbe":{"grpc":{"port":9000,"service":null}}}]}}"#
        )
    );
}

#[test]
fn creation_timestamp_is_normalised_to_utc_seconds() {
    let template =
        json!({"metadata": {"creationTimestamp": "2025-01-01T01:00:00.5+01:00", "name": "x"}});
    assert_eq!(
        enc(template, GoType::POD_TEMPLATE_SPEC),
        r#"{"metadata":{"name":"x","creationTimestamp":"2025-01-01T00:00:00Z"},"spec":{"containers":null}}"#
    );
}

#[test]
fn strings_use_go_escaping_and_map_keys_are_sorted_bytewise() {
    let template = json!({"metadata": {"annotations": {"b": "<x&y>", "B": "\u{2028}", "a": "é"}}});
    assert_eq!(
        enc(template, GoType::POD_TEMPLATE_SPEC),
        concat!(
            r#"{"metadata":{"creationTimestamp":null,"annotations":{"B":"\u2028","a":"é","b":"\u003cx\u0026y\u003e"}},"#,
            r#""spec":{"containers":null}}"#
        )
    );
}

#[test]
fn keys_match_case_insensitively_like_go() {
    let rules = json!([{"Verbs": ["get"], "APIGroups": ["apps"]}]);
    assert_eq!(
        enc(rules, GoType::POLICY_RULES),
        r#"[{"verbs":["get"],"apiGroups":["apps"]}]"#
    );
}

#[test]
fn wrong_types_are_reported_with_their_path() {
    let spec = json!({"template": {"spec": {"containers": [{"name": "m", "ports": [{"containerPort": "80"}]}]}}});
    let err = encode(&spec, GoType::DEPLOYMENT_SPEC).expect_err("string port is refused");
    assert_eq!(
        err.to_string(),
        "DeploymentSpec.template.spec.containers[0].ports[0].containerPort: expected an integer, found a string"
    );
    let spec = json!({"replicas": 1.5});
    assert!(matches!(
        encode(&spec, GoType::DEPLOYMENT_SPEC),
        Err(GoJsonError::WrongType { .. })
    ));
}

#[test]
fn bad_quantities_are_reported_with_their_path() {
    let template =
        json!({"spec": {"containers": [{"name": "m", "resources": {"limits": {"cpu": "lots"}}}]}});
    let err = encode(&template, GoType::POD_TEMPLATE_SPEC).expect_err("bad quantity");
    assert!(
        err.to_string()
            .starts_with("PodTemplateSpec.spec.containers[0].resources.limits.cpu: quantity"),
        "{err}"
    );
}

#[test]
fn volumes_follow_go_declaration_order() {
    let template = json!({"spec": {"volumes": [
        {"secret": {"optional": false, "items": [{"path": "p", "key": "k"}], "secretName": "s"}, "name": "v"},
        {"name": "p", "projected": {"sources": [{"serviceAccountToken": {"path": "t", "expirationSeconds": 3600}}]}},
        {"name": "e", "emptyDir": {}}
    ]}});
    assert_eq!(
        enc(template, GoType::POD_TEMPLATE_SPEC),
        concat!(
            r#"{"metadata":{"creationTimestamp":null},"spec":{"volumes":["#,
            r#"{"name":"v","secret":{"secretName":"s","items":[{"key":"k","path":"p"}],"optional":false}},"#,
            r#"{"name":"p","projected":{"sources":[{"serviceAccountToken":{"expirationSeconds":3600,"path":"t"}}]}},"#,
            r#"{"name":"e","emptyDir":{}}],"containers":null}}"#
        )
    );
}

#[test]
fn stream_form_appends_one_newline() {
    let text = encode_stream(&json!([]), GoType::POLICY_RULES).expect("encodes");
    assert_eq!(text, "[]\n");
}
