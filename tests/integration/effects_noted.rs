//! The executor reporting write by write (`k8s::effects::execute_noted`), against the embedded
//! API server: what an InstallPlan pass records per step (docs/install-plans.md §7.3).

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use olm_rs::k8s::effects::{Body, Write, execute_noted};
use olm_rs::k8s::warnings::{WarningLog, recording};
use olm_rs::k8s::write::{ObjectKey, Ownership};
use olm_rs::sandbox::{ApiServer, ApiServerOptions};
use serde_json::json;

fn config_map(name: &str) -> (ObjectKey, Body) {
    (
        ObjectKey::new::<ConfigMap>(Some("default"), name),
        Body::new(json!({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": name, "namespace": "default"}})),
    )
}

#[tokio::test]
async fn a_taken_name_is_no_failure_for_create_if_absent_and_a_failure_stops_the_rest() {
    let server = ApiServer::with_options(ApiServerOptions {
        simulate_workloads: false,
        ..Default::default()
    });
    let client = server.client();
    let log = WarningLog::default();
    let (key, object) = config_map("a");
    let (other_key, other) = config_map("b");
    let writes = [
        Write::CreateIfAbsent {
            key: key.clone(),
            object: object.clone(),
        },
        Write::CreateIfAbsent {
            key: key.clone(),
            object: object.clone(),
        },
        // A plain create of a taken name fails: nothing after it is written.
        Write::Create {
            key: key.clone(),
            object,
        },
        Write::Create {
            key: other_key,
            object: other,
        },
    ];
    let noted = execute_noted(&client, &log, &writes).await;
    assert_eq!(noted.done.len(), 2);
    let created = noted.done[0].answer.as_ref().expect("the first creates");
    assert!(created.metadata.uid.is_some());
    assert!(noted.done[1].answer.is_none(), "the name was taken");
    let failure = noted.failed.expect("the plain create fails");
    assert!(failure.error.is_conflict(), "{}", failure.error);
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    assert!(
        cms.get_opt("b").await.unwrap().is_none(),
        "stopped at the failure"
    );
}

#[tokio::test]
async fn each_write_carries_its_own_api_server_warnings() {
    let server = ApiServer::with_options(ApiServerOptions {
        simulate_workloads: false,
        ..Default::default()
    });
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget", "listKind": "GadgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true, "deprecated": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    });
    crds.create(
        &PostParams::default(),
        &serde_json::from_value(crd).unwrap(),
    )
    .await
    .expect("create the CRD");
    let log = WarningLog::default();
    let client = recording(&server.client(), &log);
    let (key, object) = config_map("plain");
    let gadgets = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Gadget"),
        "gadgets",
    );
    let gadget = ObjectKey {
        resource: gadgets,
        namespace: Some("default".into()),
        name: "g".into(),
    };
    let writes = [
        Write::Apply {
            key,
            object,
            ownership: Ownership::Force,
        },
        Write::CreateIfAbsent {
            key: gadget,
            object: Body::new(json!({"apiVersion": "example.com/v1", "kind": "Gadget",
                                     "metadata": {"name": "g", "namespace": "default"}})),
        },
    ];
    let noted = execute_noted(&client, &log, &writes).await;
    assert!(noted.failed.is_none(), "{:?}", noted.failed);
    assert_eq!(noted.done[0].warnings, Vec::<String>::new());
    assert_eq!(
        noted.done[1].warnings,
        ["example.com/v1 Gadget is deprecated"]
    );
}
