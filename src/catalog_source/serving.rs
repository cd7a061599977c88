//! How a `spec.image` catalog is served (docs/catalog-images.md §1): in-process by default —
//! the controller pulls the image and serves its file-based catalog from memory — or by a
//! registry pod, as OLM does, when the CatalogSource's annotation or the controller's
//! `--catalog-serving` flag asks for it. Pure.

use std::collections::BTreeMap;

/// The annotation choosing the serving mode of one CatalogSource.
pub const SERVING_ANNOTATION: &str = "olm-rs.io/catalog-serving";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ServingMode {
    /// Pull the image and serve its catalog from the controller: no pod, no Service.
    #[default]
    InProcess,
    /// Run OLM's registry pod and Service and read the catalog over gRPC.
    Pod,
}

impl ServingMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ServingMode::InProcess => "in-process",
            ServingMode::Pod => "pod",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("serving mode {given:?} is not one of \"in-process\", \"pod\"")]
pub struct UnknownServingMode {
    pub given: String,
}

impl std::str::FromStr for ServingMode {
    type Err = UnknownServingMode;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "in-process" => Ok(ServingMode::InProcess),
            "pod" => Ok(ServingMode::Pod),
            other => Err(UnknownServingMode {
                given: other.to_owned(),
            }),
        }
    }
}

/// The mode of one catalog: its annotation when set, else the controller's default. An
/// annotation that names no mode is reported and the default used.
pub fn serving_mode(
    annotations: &BTreeMap<String, String>,
    default: ServingMode,
) -> (ServingMode, Option<UnknownServingMode>) {
    match annotations.get(SERVING_ANNOTATION).map(|v| v.parse()) {
        None => (default, None),
        Some(Ok(mode)) => (mode, None),
        Some(Err(e)) => (default, Some(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_annotation_wins_over_the_default() {
        let with = |v: &str| BTreeMap::from([(SERVING_ANNOTATION.to_owned(), v.to_owned())]);
        let none = BTreeMap::new();
        let cases = [
            (&none, ServingMode::InProcess, ServingMode::InProcess, false),
            (&none, ServingMode::Pod, ServingMode::Pod, false),
            (
                &with("pod"),
                ServingMode::InProcess,
                ServingMode::Pod,
                false,
            ),
            (
                &with("in-process"),
                ServingMode::Pod,
                ServingMode::InProcess,
                false,
            ),
            (&with("sidecar"), ServingMode::Pod, ServingMode::Pod, true),
        ];
        for (annotations, default, expected, reported) in cases {
            let (mode, problem) = serving_mode(annotations, default);
            assert_eq!(mode, expected, "{annotations:?}");
            assert_eq!(problem.is_some(), reported, "{annotations:?}");
        }
    }
}
