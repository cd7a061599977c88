use super::*;
use crate::api::keys::POD_SPEC_HASH_LABEL;
use crate::catalog_source::memo::{CreatedPod, LoadedConfigMap};
use crate::catalog_source::registry::{self, RegistryObserved};
use crate::catalog_source::registry_objects::RegistryObjects;
use crate::catalog_source::registry_objects::{
    IMAGE_DIGEST_ANNOTATION, RegistryPodOptions, registry_objects,
};
use crate::k8s::effects::{EventOn, Write};
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

const NOW: &str = "2026-01-01T01:00:00Z";

fn catalog(spec: serde_json::Value, status: serde_json::Value) -> CatalogSource {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "CatalogSource",
        "metadata": {"name": "ops", "namespace": "olm", "uid": "u1", "resourceVersion": "5",
            "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": spec,
        "status": status,
    }))
    .unwrap()
}

fn image_catalog(status: serde_json::Value) -> CatalogSource {
    catalog(
        serde_json::json!({"sourceType": "grpc", "image": "quay.io/org/catalog:1",
            "updateStrategy": {"registryPoll": {"interval": "10m"}}}),
        status,
    )
}

/// Nothing remembered: the first sync of a catalog.
static NO_MEMO: Memo = Memo {
    created_pod: None,
    serving_pods: None,
    config_map: None,
    served: None,
    failing_since: None,
    fallback: None,
};

fn observed<'a>(
    cs: &'a CatalogSource,
    connection: Option<&'a LinkView>,
    source: SourceSeen<'a>,
) -> Observed<'a> {
    observed_with(cs, connection, source, &NO_MEMO)
}

fn observed_with<'a>(
    cs: &'a CatalogSource,
    connection: Option<&'a LinkView>,
    source: SourceSeen<'a>,
    memo: &'a Memo,
) -> Observed<'a> {
    static OVERRIDES: std::sync::LazyLock<BTreeMap<String, String>> =
        std::sync::LazyLock::new(|| {
            BTreeMap::from([("reg:50051".to_owned(), "127.0.0.1:9000".to_owned())])
        });
    Observed {
        catalog: cs,
        now: t(NOW),
        instant: Instant::now(),
        address_overrides: &OVERRIDES,
        serving_default: ServingMode::Pod,
        fallback_retry: crate::catalog_source::fallback::RETRY_IN_PROCESS,
        connection,
        memo,
        source,
    }
}

/// The status the decision writes (`None`: no status write).
fn written_status(outcome: &Outcome) -> Option<serde_json::Value> {
    outcome.effects.writes.iter().find_map(|w| match w {
        Write::Status { status, .. } => Some(status.to_json().unwrap()),
        _ => None,
    })
}

fn events(outcome: &Outcome) -> Vec<String> {
    outcome
        .effects
        .events
        .iter()
        .map(|EventOn { event, .. }| format!("{}: {}", event.reason, event.message))
        .collect()
}

fn link(address: &str, state: ConnectionState, error: Option<&str>) -> LinkView {
    LinkView {
        address: address.to_owned(),
        state,
        since: t("2026-01-01T00:30:00Z"),
        error: error.map(str::to_owned),
        content_error: None,
    }
}

#[test]
fn an_invalid_spec_closes_the_connection_and_says_why() {
    let cs = catalog(
        serde_json::json!({"sourceType": "grpc"}),
        serde_json::json!({}),
    );
    let error = spec::source(&cs.spec).unwrap_err();
    let decision = decide(&observed(&cs, None, SourceSeen::Invalid(error)));
    let outcome = &decision.outcome;
    assert!(decision.registry.is_empty());
    assert_eq!(outcome.link, Link::Close);
    let status = written_status(outcome).unwrap();
    assert_eq!(status["reason"], "SpecInvalidError");
    assert_eq!(
        status["message"],
        "image and address unset: at least one must be set for sourcetype: grpc"
    );
    assert!(matches!(
        &outcome.cache[0],
        CacheUpdate::Unhealthy { reason: Unhealthy::SpecInvalid, message, drop_index: true }
            if message == "catalog olm/ops has an invalid spec: image and address unset: at least one must be set for sourcetype: grpc"
    ));
    assert_eq!(
        events(outcome),
        [
            "SpecInvalidError: image and address unset: at least one must be set for sourcetype: grpc"
        ]
    );
    assert_eq!(outcome.effects.requeue, Some(RESYNC));
}

#[test]
fn address_catalogs_mirror_their_connection() {
    let cs = catalog(
        serde_json::json!({"sourceType": "grpc", "address": "reg:50051"}),
        serde_json::json!({}),
    );
    let address = || SourceSeen::Address("reg:50051".into());
    // (what, connection, state written, lastConnect, reason, message)
    let ready = link("127.0.0.1:9000", ConnectionState::Ready, None);
    let failing = link(
        "127.0.0.1:9000",
        ConnectionState::TransientFailure,
        Some("connection refused"),
    );
    let elsewhere = link("10.0.0.1:50051", ConnectionState::Ready, None);
    let mut refused = ready.clone();
    refused.content_error = Some("catalog invalid: 2 problems".into());
    type Case<'a> = (
        &'a str,
        Option<&'a LinkView>,
        &'a str,
        &'a str,
        Option<&'a str>,
        Option<&'a str>,
    );
    let cases: [Case<'_>; 5] = [
        (
            "none open yet: dialled, IDLE from now",
            None,
            "IDLE",
            "2026-01-01T01:00:00Z",
            None,
            None,
        ),
        (
            "READY since it connected",
            Some(&ready),
            "READY",
            "2026-01-01T00:30:00Z",
            None,
            None,
        ),
        (
            "unreachable",
            Some(&failing),
            "TRANSIENT_FAILURE",
            "2026-01-01T00:30:00Z",
            Some("RegistryServerError"),
            Some("couldn't connect to registry - connection refused"),
        ),
        (
            "open to another address: dialled anew",
            Some(&elsewhere),
            "IDLE",
            "2026-01-01T01:00:00Z",
            None,
            None,
        ),
        (
            "content refused",
            Some(&refused),
            "READY",
            "2026-01-01T00:30:00Z",
            Some("RegistryServerError"),
            Some("catalog invalid: 2 problems"),
        ),
    ];
    for (what, connection, state, since, reason, message) in cases {
        let decision = decide(&observed(&cs, connection, address()));
        let outcome = &decision.outcome;
        assert_eq!(
            outcome.link,
            Link::Ensure("127.0.0.1:9000".into()),
            "{what}"
        );
        let status = written_status(outcome).unwrap();
        let conn = &status["connectionState"];
        assert_eq!(conn["address"], "reg:50051", "{what}");
        assert_eq!(conn["lastObservedState"], state, "{what}");
        assert_eq!(conn["lastConnect"], since, "{what}");
        assert_eq!(status["registryService"]["protocol"], "grpc", "{what}");
        assert_eq!(status["reason"].as_str(), reason, "{what}");
        assert_eq!(status["message"].as_str(), message, "{what}");
        assert_eq!(outcome.ready, state == "READY", "{what}");
    }
    let decision = decide(&observed(&cs, Some(&ready), address()));
    assert_eq!(
        events(&decision.outcome),
        ["RegistryReady: connected to the registry at reg:50051"]
    );
}

#[test]
fn a_status_that_did_not_change_is_not_written() {
    let cs = catalog(
        serde_json::json!({"sourceType": "grpc", "address": "reg:50051"}),
        serde_json::json!({
            "connectionState": {"address": "reg:50051", "lastObservedState": "READY",
                "lastConnect": "2026-01-01T00:30:00Z"},
            "registryService": {"protocol": "grpc", "createdAt": "2026-01-01T00:00:00Z"},
        }),
    );
    let ready = link("127.0.0.1:9000", ConnectionState::Ready, None);
    let decision = decide(&observed(
        &cs,
        Some(&ready),
        SourceSeen::Address("reg:50051".into()),
    ));
    assert!(decision.outcome.effects.writes.is_empty());
    assert!(decision.outcome.effects.events.is_empty());
    assert_eq!(decision.outcome.effects.requeue, Some(RESYNC));
}

#[test]
fn a_spec_valid_again_starts_from_a_clean_status() {
    let cs = catalog(
        serde_json::json!({"sourceType": "grpc", "address": "reg:50051"}),
        serde_json::json!({"reason": "SpecInvalidError", "message": "bad",
            "latestImageRegistryPoll": "2026-01-01T00:00:00Z"}),
    );
    let decision = decide(&observed(
        &cs,
        None,
        SourceSeen::Address("reg:50051".into()),
    ));
    let status = written_status(&decision.outcome).unwrap();
    assert!(status.get("reason").is_none() && status.get("message").is_none());
    assert!(status.get("latestImageRegistryPoll").is_none());
}

#[test]
fn configmap_catalogs_put_their_content_in_the_cache() {
    let cs = catalog(
        serde_json::json!({"sourceType": "configmap", "configMap": "cm"}),
        serde_json::json!({"connectionState": {"lastObservedState": "READY"}}),
    );
    let read = |content| ConfigMapSeen::Read {
        uid: Some("cm-uid".into()),
        resource_version: Some("9".into()),
        content,
    };
    let index = Arc::new(CatalogIndex::new(Default::default()));
    // (what, seen, reason, message, cache update)
    let cases = [
        (
            "missing",
            ConfigMapSeen::Unreadable(
                "failed to get catalog config map cm: configmaps \"cm\" not found".into(),
            ),
            Some("failed to get catalog config map cm: configmaps \"cm\" not found"),
            Some("SpecInvalid"),
        ),
        (
            "loaded",
            read(ConfigMapContent::Loaded(index)),
            None,
            Some("Index"),
        ),
        (
            "refused",
            read(ConfigMapContent::Refused(
                "catalog config map cm is invalid: no packages".into(),
            )),
            Some("catalog config map cm is invalid: no packages"),
            Some("Invalid"),
        ),
        (
            "refused before, unchanged",
            read(ConfigMapContent::Unchanged {
                refused: Some("catalog config map cm is invalid: no packages".into()),
            }),
            Some("catalog config map cm is invalid: no packages"),
            None,
        ),
        (
            "loaded before, unchanged",
            read(ConfigMapContent::Unchanged { refused: None }),
            None,
            None,
        ),
        (
            "loading stopped",
            ConfigMapSeen::Stopped("loading config map cm stopped: cancelled".into()),
            Some("loading config map cm stopped: cancelled"),
            None,
        ),
    ];
    for (what, seen, message, update) in cases {
        let readable = matches!(seen, ConfigMapSeen::Read { .. });
        let decision = decide(&observed(
            &cs,
            None,
            SourceSeen::ConfigMap {
                name: "cm".into(),
                seen,
            },
        ));
        let outcome = &decision.outcome;
        assert_eq!(outcome.link, Link::Close, "{what}");
        let status = written_status(outcome).unwrap();
        assert!(status.get("connectionState").is_none(), "{what}");
        assert_eq!(status["message"].as_str(), message, "{what}");
        if message.is_some() {
            assert_eq!(status["reason"], "ConfigMapError", "{what}");
        }
        if readable {
            assert_eq!(
                status["configMapReference"]["resourceVersion"], "9",
                "{what}"
            );
            assert_eq!(
                status["configMapReference"]["lastUpdateTime"], "2026-01-01T01:00:00Z",
                "{what}"
            );
        }
        let got = outcome.cache.first().map(|u| match u {
            CacheUpdate::Index(_) => "Index",
            CacheUpdate::Unhealthy {
                reason: Unhealthy::SpecInvalid,
                ..
            } => "SpecInvalid",
            CacheUpdate::Unhealthy {
                reason: Unhealthy::Invalid,
                ..
            } => "Invalid",
            _ => "other",
        });
        assert_eq!(got, update, "{what}");
    }
}

/// Image catalogs served by registry pods: rollout, registry failures, polling, digests.
mod pod_mode;

/// The memo of the ConfigMap loaded is input and output: the next sync parses the ConfigMap
/// again only when its version differs from the one remembered (docs/catalog.md §4).
#[test]
fn configmap_catalogs_remember_the_version_loaded() {
    let cs = catalog(
        serde_json::json!({"sourceType": "configmap", "configMap": "cm"}),
        serde_json::json!({}),
    );
    let read = |rv: &str, content| ConfigMapSeen::Read {
        uid: Some("cm-uid".into()),
        resource_version: Some(rv.into()),
        content,
    };
    let loaded = |rv: &str, refused: Option<&str>| LoadedConfigMap {
        uid: Some("cm-uid".into()),
        resource_version: Some(rv.into()),
        refused: refused.map(str::to_owned),
    };
    let index = Arc::new(CatalogIndex::new(Default::default()));
    let refusal = "catalog config map cm is invalid: no packages";
    // (what, remembered before, seen, remembered after)
    let cases = vec![
        (
            "first load",
            None,
            read("9", ConfigMapContent::Loaded(Arc::clone(&index))),
            Some(loaded("9", None)),
        ),
        (
            "a new version refused",
            Some(loaded("9", None)),
            read("10", ConfigMapContent::Refused(refusal.into())),
            Some(loaded("10", Some(refusal))),
        ),
        (
            "unchanged: the memo stays",
            Some(loaded("10", Some(refusal))),
            read(
                "10",
                ConfigMapContent::Unchanged {
                    refused: Some(refusal.into()),
                },
            ),
            Some(loaded("10", Some(refusal))),
        ),
        (
            "gone: forgotten",
            Some(loaded("10", None)),
            ConfigMapSeen::Unreadable("configmaps \"cm\" not found".into()),
            None,
        ),
        (
            "loading stopped: the memo stays",
            Some(loaded("9", None)),
            ConfigMapSeen::Stopped("loading config map cm stopped: cancelled".into()),
            Some(loaded("9", None)),
        ),
    ];
    for (what, before, seen, after) in cases {
        let memo = Memo {
            config_map: before,
            ..Memo::default()
        };
        let source = SourceSeen::ConfigMap {
            name: "cm".into(),
            seen,
        };
        let decision = decide(&observed_with(&cs, None, source, &memo));
        assert_eq!(decision.memo.config_map, after, "{what}");
        assert!(decision.registry.clone().into_writes().is_empty(), "{what}");
    }
}
