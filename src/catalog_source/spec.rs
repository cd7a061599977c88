//! Stage 1 of a CatalogSource sync (docs/catalog.md §1): what kind of catalog the spec
//! describes, or why it describes none; and the poll interval. Pure.

use std::time::Duration;

use crate::api::{CatalogSourceSpec, SourceType};
use crate::go_duration::parse_go_duration;

/// Where a catalog's content comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `grpc` + `address`: dial it. Wins over `image` when both are set, as OLM dials it
    /// (docs/catalog.md §2); olm-rs then creates no registry pod either.
    Address(String),
    /// `grpc` + `image`: run the registry pod and dial its Service.
    Image(String),
    /// `configmap` / `internal`: read the named ConfigMap.
    ConfigMap(String),
}

/// A spec OLM rejects with `SpecInvalidError`; the message is OLM's `status.message`
/// (docs/api-types.md §4.1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("image and address unset: at least one must be set for sourcetype: grpc")]
    GrpcWithoutSource,
    #[error("configmap name unset: must be set for sourcetype: {source_type}")]
    ConfigMapUnset { source_type: String },
    #[error("unknown sourcetype: {source_type}")]
    UnknownSourceType { source_type: String },
}

/// What kind of catalog `spec` describes.
pub fn source(spec: &CatalogSourceSpec) -> Result<Source, SpecError> {
    let set = |v: &Option<String>| v.as_deref().filter(|s| !s.is_empty()).map(str::to_owned);
    match &spec.source_type {
        SourceType::Grpc => match (set(&spec.address), set(&spec.image)) {
            (Some(address), _) => Ok(Source::Address(address)),
            (None, Some(image)) => Ok(Source::Image(image)),
            (None, None) => Err(SpecError::GrpcWithoutSource),
        },
        SourceType::ConfigMap | SourceType::Internal => match set(&spec.config_map) {
            Some(name) => Ok(Source::ConfigMap(name)),
            None => Err(SpecError::ConfigMapUnset {
                source_type: spec.source_type.to_string(),
            }),
        },
        other => Err(SpecError::UnknownSourceType {
            source_type: other.to_string(),
        }),
    }
}

/// OLM's default poll interval.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(15 * 60);

/// The poll interval, when polling applies (grpc image catalogs with `registryPoll`):
/// `Ok` when it parses, `Err((fallback, status message))` when it does not.
pub fn poll_interval(
    spec: &CatalogSourceSpec,
    source: &Source,
) -> Option<Result<Duration, (Duration, String)>> {
    let poll = spec.update_strategy.as_ref()?.registry_poll.as_ref()?;
    if !matches!(source, Source::Image(_)) {
        return None;
    }
    let text = poll.interval.as_deref().unwrap_or_default();
    Some(match parse_go_duration(text) {
        Ok(d) if d > Duration::ZERO => Ok(d),
        Ok(_) => Err((
            DEFAULT_POLL_INTERVAL,
            invalid_interval_message(&format!("time: interval {text:?} must be positive")),
        )),
        Err(e) => Err((
            DEFAULT_POLL_INTERVAL,
            invalid_interval_message(&e.to_string()),
        )),
    })
}

fn invalid_interval_message(error: &str) -> String {
    format!(
        "error parsing spec.updateStrategy.registryPoll.interval. Using the default value of 15m0s instead. Error: {error}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: serde_json::Value) -> CatalogSourceSpec {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn source_kinds_and_olm_messages() {
        let cases = [
            (
                serde_json::json!({"sourceType": "grpc", "address": "r:50051"}),
                Ok(Source::Address("r:50051".into())),
            ),
            (
                serde_json::json!({"sourceType": "grpc", "address": "r:50051", "image": "quay.io/x:1"}),
                Ok(Source::Address("r:50051".into())),
            ),
            (
                serde_json::json!({"sourceType": "grpc", "image": "quay.io/x:1", "address": ""}),
                Ok(Source::Image("quay.io/x:1".into())),
            ),
            (
                serde_json::json!({"sourceType": "configmap", "configMap": "cm"}),
                Ok(Source::ConfigMap("cm".into())),
            ),
            (
                serde_json::json!({"sourceType": "internal", "configMap": "cm"}),
                Ok(Source::ConfigMap("cm".into())),
            ),
            (
                serde_json::json!({"sourceType": "grpc"}),
                Err(
                    "image and address unset: at least one must be set for sourcetype: grpc"
                        .to_owned(),
                ),
            ),
            (
                serde_json::json!({"sourceType": "internal"}),
                Err("configmap name unset: must be set for sourcetype: internal".to_owned()),
            ),
            (
                serde_json::json!({"sourceType": "ftp"}),
                Err("unknown sourcetype: ftp".to_owned()),
            ),
        ];
        for (json, expected) in cases {
            assert_eq!(
                source(&spec(json.clone())).map_err(|e| e.to_string()),
                expected,
                "{json}"
            );
        }
    }

    #[test]
    fn poll_interval_applies_to_image_catalogs_only() {
        let image = Source::Image("quay.io/x:1".into());
        let s = spec(
            serde_json::json!({"sourceType": "grpc", "image": "quay.io/x:1",
            "updateStrategy": {"registryPoll": {"interval": "10m"}}}),
        );
        assert_eq!(
            poll_interval(&s, &image),
            Some(Ok(Duration::from_secs(600)))
        );
        assert_eq!(poll_interval(&s, &Source::Address("a:1".into())), None);
        let no_poll = spec(serde_json::json!({"sourceType": "grpc", "image": "quay.io/x:1"}));
        assert_eq!(poll_interval(&no_poll, &image), None);

        let bad = spec(
            serde_json::json!({"sourceType": "grpc", "image": "quay.io/x:1",
            "updateStrategy": {"registryPoll": {"interval": "soon"}}}),
        );
        assert_eq!(
            poll_interval(&bad, &image),
            Some(Err((
                DEFAULT_POLL_INTERVAL,
                "error parsing spec.updateStrategy.registryPoll.interval. Using the default value of 15m0s instead. Error: time: invalid duration \"soon\"".to_owned()
            )))
        );
        let empty = spec(
            serde_json::json!({"sourceType": "grpc", "image": "quay.io/x:1",
            "updateStrategy": {"registryPoll": {}}}),
        );
        assert!(matches!(poll_interval(&empty, &image), Some(Err(_))));
    }
}
