//! Checks one OLM object the way a cluster would see it: admitted by our CRD schema (what the
//! API server would store) and read back through our Rust types (what olm-rs would write).
//!
//! "Same JSON value" means: the typed round trip of the document equals the document as the
//! API server would store it — explicit nulls dropped, undeclared fields pruned (both listed in
//! the report, never silently) — with one normalisation of our typed model, also listed: a YAML
//! number where a Quantity is expected becomes its decimal string (OLM's Go types do the same,
//! in canonical form). The check is made twice: without schema defaults (the file as written)
//! and with them (the object as read back from the API server).

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use olm_rs::api::crd::{self, QUANTITY_PATTERN, validate::Admission};
use olm_rs::api::operator_group::v1alpha2;
use olm_rs::api::{
    CatalogSource, ClusterServiceVersion, InstallPlan, OlmConfig, OperatorGroup, Subscription,
};

type RoundTrip = fn(&Value) -> Result<Value, String>;

/// One served (kind, apiVersion) with its schema and Rust type.
pub struct Served {
    pub kind: &'static str,
    pub api_version: &'static str,
    schema: Value,
    round_trip: RoundTrip,
}

/// Everything needed to check documents of any OLM kind.
pub struct Kinds {
    served: Vec<Served>,
    object_meta: Value,
}

fn round_trip<T: DeserializeOwned + Serialize>(value: &Value) -> Result<Value, String> {
    let typed: T = olm_rs::api::decode(value).map_err(|e| format!("{}: {}", e.path, e.message))?;
    serde_json::to_value(&typed).map_err(|e| format!("serialising: {e}"))
}

fn schema_of(
    crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    version: &str,
) -> Value {
    let v = crd
        .spec
        .versions
        .iter()
        .find(|v| v.name == version)
        .expect("served version");
    serde_json::to_value(
        v.schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref()),
    )
    .expect("schema serialises")
}

impl Kinds {
    pub fn new() -> Self {
        let csv = crd::cluster_service_version().expect("CSV CRD");
        let og = crd::operator_group().expect("OperatorGroup CRD");
        let sub = crd::subscription().expect("Subscription CRD");
        let ip = crd::install_plan().expect("InstallPlan CRD");
        let cs = crd::catalog_source().expect("CatalogSource CRD");
        let config = crd::olm_config().expect("OLMConfig CRD");
        let served = |kind, api_version, schema, round_trip| Served {
            kind,
            api_version,
            schema,
            round_trip,
        };
        Self {
            served: vec![
                served(
                    "ClusterServiceVersion",
                    "operators.coreos.com/v1alpha1",
                    schema_of(&csv, "v1alpha1"),
                    round_trip::<ClusterServiceVersion>,
                ),
                served(
                    "OperatorGroup",
                    "operators.coreos.com/v1",
                    schema_of(&og, "v1"),
                    round_trip::<OperatorGroup>,
                ),
                served(
                    "OperatorGroup",
                    "operators.coreos.com/v1alpha2",
                    schema_of(&og, "v1alpha2"),
                    round_trip::<v1alpha2::OperatorGroup>,
                ),
                served(
                    "Subscription",
                    "operators.coreos.com/v1alpha1",
                    schema_of(&sub, "v1alpha1"),
                    round_trip::<Subscription>,
                ),
                served(
                    "InstallPlan",
                    "operators.coreos.com/v1alpha1",
                    schema_of(&ip, "v1alpha1"),
                    round_trip::<InstallPlan>,
                ),
                served(
                    "CatalogSource",
                    "operators.coreos.com/v1alpha1",
                    schema_of(&cs, "v1alpha1"),
                    round_trip::<CatalogSource>,
                ),
                served(
                    "OLMConfig",
                    "operators.coreos.com/v1",
                    schema_of(&config, "v1"),
                    round_trip::<OlmConfig>,
                ),
            ],
            object_meta: crd::object_meta_schema().expect("ObjectMeta schema"),
        }
    }

    /// Whether documents of this kind can be checked.
    pub fn handles(&self, kind: &str) -> bool {
        self.served.iter().any(|s| s.kind == kind)
    }

    /// Checks one document; `None` when its kind is not an OLM kind.
    pub fn check(&self, label: &str, raw: &Value) -> Option<DocCheck> {
        let kind = raw.get("kind")?.as_str()?;
        let mut check = DocCheck {
            label: label.to_owned(),
            kind: kind.to_owned(),
            ..DocCheck::default()
        };
        let mut doc = raw.clone();
        let storage = self.served.iter().find(|s| s.kind == kind)?.api_version;
        let api_version = match raw.get("apiVersion").and_then(Value::as_str) {
            Some(v) if kind == "ClusterServiceVersion" && v != storage => {
                // OLM reads bundle CSVs by kind and creates them as v1alpha1 whatever the file
                // says (the community catalog has `binding.operators.coreos.com/v1alpha1`).
                check
                    .normalised
                    .push(format!(".apiVersion: {v} replaced by {storage}"));
                doc.as_object_mut()?
                    .insert("apiVersion".into(), Value::String(storage.into()));
                storage.to_owned()
            }
            Some(v) => v.to_owned(),
            None => {
                // Whoever creates the object (kubectl, an InstallPlan) must name the version; the
                // storage version is what OLM would use.
                check
                    .normalised
                    .push(format!(".apiVersion: absent, set to {storage}"));
                doc.as_object_mut()?
                    .insert("apiVersion".into(), Value::String(storage.into()));
                storage.to_owned()
            }
        };
        let Some(served) = self
            .served
            .iter()
            .find(|s| s.kind == kind && s.api_version == api_version)
        else {
            check.violations.push(format!(
                ".apiVersion: {api_version} is not served for {kind}"
            ));
            return Some(check);
        };

        let admission = Admission {
            whole_object: true,
            object_meta: Some(&self.object_meta),
            apply_defaults: false,
            ..Admission::new(&served.schema)
        };

        // 1. olm-rs must read the file, as OLM does.
        let typed = match (served.round_trip)(&doc) {
            Ok(typed) => typed,
            Err(e) => {
                check.decode_errors.push(e);
                return Some(check);
            }
        };

        // 2. What olm-rs writes for it must be accepted and kept whole by the API server.
        let mut written = typed.clone();
        let report = admission.run(&mut written);
        check
            .failures_of_written
            .extend(report.violations.iter().map(|v| format!("rejected: {v}")));
        check.failures_of_written.extend(
            report
                .pruned
                .iter()
                .map(|p| format!("{p}: sent but pruned")),
        );
        check.failures_of_written.extend(
            report
                .nulls_dropped
                .iter()
                .map(|p| format!("{p}: sent as null")),
        );

        // 3. The file as the API server would store it vs. its typed round trip.
        let mut stored = doc;
        let report = admission.run(&mut stored);
        check.pruned = report.pruned;
        check.nulls_dropped = report.nulls_dropped;
        check.rejected_as_written = report.violations;
        normalise_quantities(&served.schema, &mut stored, "", &mut check.normalised);
        let mut diffs = Vec::new();
        diff("", &stored, &typed, &mut diffs);
        for d in diffs {
            // Go writes fields without `omitempty` even when the file lacks them, and so do we.
            let missing = format!("{}: required field is missing", d.path);
            match &d.kind {
                DiffKind::Invented(v)
                    if is_zero(v) && check.rejected_as_written.contains(&missing) =>
                {
                    check
                        .zero_filled
                        .push(format!("{}: absent, written as {v}", d.path))
                }
                // OperatorGroup and OLMConfig may omit `spec`; like OLM's Go types we always write
                // it (the v1 OperatorGroup schema defaults it anyway).
                DiffKind::Invented(v) if d.path == ".spec" && v == &serde_json::json!({}) => {
                    check.normalised.push(".spec: absent, written as {}".into())
                }
                _ => check.diffs.push(d.to_string()),
            }
        }

        // 4. Read back from the API server (defaults applied), the object must round-trip exactly.
        let mut read_back = written;
        let report = Admission {
            apply_defaults: true,
            ..admission
        }
        .run(&mut read_back);
        check.defaulted = report.defaulted;
        match (served.round_trip)(&read_back) {
            Ok(again) => {
                let mut diffs = Vec::new();
                diff("", &read_back, &again, &mut diffs);
                check.diffs.extend(
                    diffs
                        .into_iter()
                        .map(|d| format!("{d} (object read back with server defaults)")),
                );
            }
            Err(e) => check
                .decode_errors
                .push(format!("{e} (object read back with server defaults)")),
        }
        Some(check)
    }
}

fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.values().all(is_zero),
    }
}

/// The outcome for one document.
#[derive(Debug, Default)]
pub struct DocCheck {
    pub label: String,
    pub kind: String,
    /// Not served (wrong apiVersion).
    pub violations: Vec<String>,
    /// The file as written would be rejected by the API server (OLM never applies it raw: it
    /// decodes it into Go types first, which fill in required fields with zero values).
    pub rejected_as_written: Vec<String>,
    /// Required fields absent from the file that the typed model writes as zero values.
    pub zero_filled: Vec<String>,
    /// Fields the schema does not declare (the API server drops them).
    pub pruned: Vec<String>,
    /// Explicit nulls (the API server drops them).
    pub nulls_dropped: Vec<String>,
    /// Fields the API server adds from schema defaults to what olm-rs writes.
    pub defaulted: Vec<String>,
    /// Documented normalisations of the typed model.
    pub normalised: Vec<String>,
    /// The Rust type could not read the document.
    pub decode_errors: Vec<String>,
    /// What olm-rs would write is rejected or partly dropped by the API server.
    pub failures_of_written: Vec<String>,
    /// Unexplained differences between the stored document and its typed round trip.
    pub diffs: Vec<String>,
}

impl DocCheck {
    /// Problems that make the check fail (unreadable, unwritable, lossy).
    pub fn failures(&self) -> Vec<String> {
        let tag = |prefix: &str, items: &[String]| {
            items
                .iter()
                .map(|i| format!("{prefix} {i}"))
                .collect::<Vec<_>>()
        };
        [
            tag("not served:", &self.violations),
            tag("cannot read:", &self.decode_errors),
            tag(
                "olm-rs would write a bad object:",
                &self.failures_of_written,
            ),
            tag("round trip differs:", &self.diffs),
        ]
        .concat()
    }
}

/// A YAML number where the schema expects a Quantity becomes the string our type holds.
fn normalise_quantities(schema: &Value, value: &mut Value, path: &str, notes: &mut Vec<String>) {
    let Some(schema) = schema.as_object() else {
        return;
    };
    if schema.get("pattern").and_then(Value::as_str) == Some(QUANTITY_PATTERN) {
        if let Value::Number(n) = value {
            let text = n.to_string();
            notes.push(format!(
                "{path}: Quantity {text} written as a number, read as the string \"{text}\""
            ));
            *value = Value::String(text);
        }
        return;
    }
    match value {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            for (key, child) in map.iter_mut() {
                if let Some(child_schema) = props.and_then(|p| p.get(key)).or(additional) {
                    normalise_quantities(child_schema, child, &format!("{path}.{key}"), notes);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    normalise_quantities(item_schema, item, &format!("{path}[{i}]"), notes);
                }
            }
        }
        _ => {}
    }
}

/// One difference between the stored value and the typed round trip.
pub struct Diff {
    pub path: String,
    pub kind: DiffKind,
}

pub enum DiffKind {
    Dropped(Value),
    Invented(Value),
    Changed(Value, Value),
}

impl std::fmt::Display for Diff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            DiffKind::Dropped(v) => write!(
                f,
                "{}: dropped by the typed round trip ({})",
                self.path,
                short(v)
            ),
            DiffKind::Invented(v) => write!(
                f,
                "{}: invented by the typed round trip ({})",
                self.path,
                short(v)
            ),
            DiffKind::Changed(a, b) => {
                write!(
                    f,
                    "{}: stored {} but typed round trip gives {}",
                    self.path,
                    short(a),
                    short(b)
                )
            }
        }
    }
}

/// Differences between the stored value and the typed round trip, by path.
pub fn diff(path: &str, stored: &Value, typed: &Value, out: &mut Vec<Diff>) {
    match (stored, typed) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, value) in a {
                match b.get(key) {
                    Some(other) => diff(&format!("{path}.{key}"), value, other, out),
                    None => out.push(Diff {
                        path: format!("{path}.{key}"),
                        kind: DiffKind::Dropped(value.clone()),
                    }),
                }
            }
            for (key, value) in b.iter().filter(|(k, _)| !a.contains_key(*k)) {
                out.push(Diff {
                    path: format!("{path}.{key}"),
                    kind: DiffKind::Invented(value.clone()),
                });
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff(&format!("{path}[{i}]"), x, y, out);
            }
        }
        (a, b) if a == b => {}
        (a, b) => out.push(Diff {
            path: path.to_owned(),
            kind: DiffKind::Changed(a.clone(), b.clone()),
        }),
    }
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 80 {
        format!("{}…", text.chars().take(80).collect::<String>())
    } else {
        text
    }
}

/// `[3]` → `[]`, so paths aggregate across documents.
pub fn generalise(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => {
                in_index = true;
                out.push('[');
            }
            ']' => {
                in_index = false;
                out.push(']');
            }
            _ if in_index => {}
            c => out.push(c),
        }
    }
    out
}
