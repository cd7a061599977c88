//! One document → one typed blob (docs/catalog.md §6.1, rules L1–L6).

use std::borrow::Cow;

use base64::Engine;
use serde_json::value::RawValue;

use super::super::csv_metadata;
use super::super::error::{Location, Problem, Rule};
use super::super::go_json::{self, Fields, UnmarshalError};
use super::super::model::{
    Bundle, Channel, ChannelEntry, DeprecationEntry, DeprecationReference, Deprecations, Icon,
    Origin, OtherBlob, Package, Property, RelatedImage, SCHEMA_BUNDLE, SCHEMA_CHANNEL,
    SCHEMA_DEPRECATIONS, SCHEMA_PACKAGE,
};
use super::super::properties::{BUNDLE_OBJECT, CSV_METADATA};
use super::documents;
use super::{CsvMetadataHold, LoadOptions};

/// A parsed document.
#[derive(Debug)]
pub enum Blob {
    Package(Package),
    Channel(Channel),
    Bundle(Bundle),
    Deprecations(Deprecations),
    Other(OtherBlob),
}

/// Parses one document; problems that only concern part of the blob (a bad property) are
/// returned alongside it.
pub fn parse(json: &str, origin: &Origin) -> Result<(Blob, Vec<Problem>), Box<Problem>> {
    parse_with(json, origin, LoadOptions::default())
}

/// `parse` with `options`.
pub fn parse_with(
    json: &str,
    origin: &Origin,
    options: LoadOptions,
) -> Result<(Blob, Vec<Problem>), Box<Problem>> {
    let at = || Location::from_origin(origin);
    // `properties` (nearly all of a blob's bytes) is read in the same pass as the blob; on any
    // error the general path below reads and words it.
    let fields = match go_json::parse_object_with_list(json, "properties") {
        Ok(fields) => fields,
        Err(_) => Fields::from_members(go_json::parse_members(json).map_err(|_| {
            let kind = serde_json::from_str::<&RawValue>(json)
                .map(go_json::kind)
                .unwrap_or("value");
            Problem::new(
                Rule::L1,
                at(),
                format!("error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}"),
            )
        })?),
    };
    let members = fields.members();
    check_folded_keys(members).map_err(|e| Problem::new(Rule::L2, at(), e.to_string()))?;
    let meta = |key: &str| -> Result<Option<String>, Box<Problem>> {
        let Some((_, raw)) = members
            .iter()
            .rev()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
        else {
            return Ok(None);
        };
        if go_json::kind(raw) == "string" {
            return Ok(serde_json::from_str(raw.get()).ok());
        }
        let value: serde_json::Value = serde_json::from_str(raw.get()).unwrap_or_default();
        Err(Box::new(Problem::new(
            Rule::L3,
            at(),
            format!(
                "expected value for key {key:?} to be a string, got {}: {}",
                go_json::go_format_t(&value),
                go_json::go_format_v(&value)
            ),
        )))
    };
    let schema = meta("schema")?.unwrap_or_default();
    let package = meta("package")?;
    let name = meta("name")?;
    if schema.is_empty() {
        let value: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
        return Err(Box::new(Problem::new(
            Rule::L4,
            at(),
            format!(
                "object '{}\n' is missing root schema field",
                go_json::marshal_sorted(&value)
            ),
        )));
    }
    let wrap = |what: &str, e: UnmarshalError| {
        let mut loc = at();
        loc.package = package.clone();
        Problem::new(Rule::L5, loc, format!("parse {what}: {e}"))
    };
    let mut extra = Vec::new();
    let blob = match schema.as_str() {
        SCHEMA_PACKAGE => {
            Blob::Package(parse_package(&fields, origin).map_err(|e| wrap("package", e))?)
        }
        SCHEMA_CHANNEL => {
            Blob::Channel(parse_channel(&fields, origin).map_err(|e| wrap("channel", e))?)
        }
        SCHEMA_BUNDLE => {
            let bundle = parse_bundle(&fields, origin, options, &mut extra)
                .map_err(|e| wrap("bundle", e))?;
            Blob::Bundle(bundle)
        }
        SCHEMA_DEPRECATIONS => Blob::Deprecations(
            parse_deprecations(&fields, origin).map_err(|e| wrap("deprecation", e))?,
        ),
        _ => Blob::Other(OtherBlob {
            schema,
            package,
            name,
            blob: serde_json::from_str::<Box<RawValue>>(json)
                .map_err(|e| Problem::new(Rule::L1, at(), e.to_string()))?,
            origin: origin.clone(),
        }),
    };
    Ok((blob, extra))
}

/// Two top-level keys of a blob that differ only in case (L2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("duplicate keys for key {folded:?}: [{}]", originals.join(" "))]
pub struct DuplicateKeys {
    /// The key case-folded.
    pub folded: String,
    /// The keys as written, sorted.
    pub originals: Vec<String>,
}

/// L2: top-level keys must stay distinct after case folding.
fn check_folded_keys(members: &[(Cow<'_, str>, &RawValue)]) -> Result<(), DuplicateKeys> {
    let mut folded: Vec<(String, &str)> = members
        .iter()
        .map(|(k, _)| (k.to_lowercase(), k.as_ref()))
        .collect();
    folded.sort();
    for pair in folded.windows(2) {
        if pair[0].0 == pair[1].0 {
            let mut originals: Vec<String> = folded
                .iter()
                .filter(|(f, _)| *f == pair[0].0)
                .map(|(_, k)| (*k).to_owned())
                .collect();
            originals.sort();
            return Err(DuplicateKeys {
                folded: pair[0].0.clone(),
                originals,
            });
        }
    }
    Ok(())
}

/// The properties of a blob, each with whether it has a value. `csv_metadata` is how a bundle
/// keeps its `olm.csv.metadata` values (`None`: as any other property, for non-bundles).
fn properties(
    fields: &Fields<'_>,
    owner: &str,
    csv_metadata: Option<CsvMetadataHold>,
) -> Result<Vec<(Property, bool)>, UnmarshalError> {
    let items = fields.object_list(
        "properties",
        owner,
        "[]property.Property",
        "property.Property",
    )?;
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let Some(f) = item else {
            out.push((Property::new("", RawValue::NULL.to_owned()), false));
            continue;
        };
        let type_ = f.string("type", "Property")?.unwrap_or_default();
        // A missing value is kept apart from an explicit `null` (opm: "unexpected end of JSON
        // input" for the former only).
        let value = f
            .members()
            .iter()
            .rev()
            .find(|(k, _)| k.eq_ignore_ascii_case("value"))
            .map(|(_, v)| *v);
        match value {
            Some(v) => match csv_metadata.filter(|_| type_ == CSV_METADATA) {
                Some(hold) => out.push((csv_metadata_property(type_, v, hold), true)),
                None => out.push((Property::new(type_, v.to_owned()), true)),
            },
            None => out.push((Property::new(type_, RawValue::NULL.to_owned()), false)),
        }
    }
    Ok(out)
}

fn plain_properties(fields: &Fields<'_>, owner: &str) -> Result<Vec<Property>, UnmarshalError> {
    Ok(properties(fields, owner, None)?
        .into_iter()
        .map(|(p, _)| p)
        .collect())
}

fn parse_package(f: &Fields<'_>, origin: &Origin) -> Result<Package, UnmarshalError> {
    let icon = match f.get("icon") {
        None => None,
        Some(raw) => match Fields::of(raw, "declcfg.Icon")? {
            None => None,
            Some(icon) => {
                let data = icon.string("base64data", "Icon")?.unwrap_or_default();
                decode_base64(&data)?;
                Some(Icon {
                    base64data: data,
                    mediatype: icon.string("mediatype", "Icon")?.unwrap_or_default(),
                })
            }
        },
    };
    Ok(Package {
        name: f.string("name", "Package")?.unwrap_or_default(),
        default_channel: f.string("defaultChannel", "Package")?,
        description: f.string("description", "Package")?,
        icon,
        properties: plain_properties(f, "Package")?,
        origin: origin.clone(),
    })
}

fn parse_channel(f: &Fields<'_>, origin: &Origin) -> Result<Channel, UnmarshalError> {
    let mut entries = Vec::new();
    if let Some(raw) = f.get("entries") {
        for item in
            go_json::array_items(raw, || "Channel.entries".into(), "[]declcfg.ChannelEntry")?
        {
            let Some(e) = Fields::of(item, "declcfg.ChannelEntry")? else {
                entries.push(ChannelEntry::default());
                continue;
            };
            entries.push(ChannelEntry {
                name: e.string("name", "Channel.entries")?.unwrap_or_default(),
                replaces: e
                    .string("replaces", "Channel.entries")?
                    .filter(|s| !s.is_empty()),
                skips: e.string_list("skips", "Channel.entries")?,
                skip_range: e
                    .string("skipRange", "Channel.entries")?
                    .filter(|s| !s.is_empty()),
            });
        }
    }
    Ok(Channel {
        package: f.string("package", "Channel")?.unwrap_or_default(),
        name: f.string("name", "Channel")?.unwrap_or_default(),
        entries,
        properties: plain_properties(f, "Channel")?,
        origin: origin.clone(),
    })
}

fn parse_bundle(
    f: &Fields<'_>,
    origin: &Origin,
    options: LoadOptions,
    problems: &mut Vec<Problem>,
) -> Result<Bundle, UnmarshalError> {
    let package = f.string("package", "Bundle")?.unwrap_or_default();
    let name = f.string("name", "Bundle")?.unwrap_or_default();
    let mut related_images = Vec::new();
    if let Some(raw) = f.get("relatedImages") {
        for item in go_json::array_items(
            raw,
            || "Bundle.relatedImages".into(),
            "[]declcfg.RelatedImage",
        )? {
            let Some(r) = Fields::of(item, "declcfg.RelatedImage")? else {
                related_images.push(RelatedImage::default());
                continue;
            };
            related_images.push(RelatedImage {
                name: r
                    .string("name", "Bundle.relatedImages")?
                    .unwrap_or_default(),
                image: r
                    .string("image", "Bundle.relatedImages")?
                    .unwrap_or_default(),
            });
        }
    }
    let at = || {
        Location::from_origin(origin)
            .package(&package)
            .bundle(&name)
    };
    let mut props = Vec::new();
    let mut objects = Vec::new();
    let hold = Some(options.csv_metadata);
    for (index, (property, has_value)) in properties(f, "Bundle", hold)?.into_iter().enumerate() {
        if !has_value {
            problems.push(Problem::new(
                Rule::C11,
                at(),
                format!(
                    "parse properties for bundle {name:?}: parse property[{index}] of type {:?}: unexpected end of JSON input",
                    property.type_
                ),
            ));
            continue;
        }
        if property.type_ != BUNDLE_OBJECT {
            props.push(property);
            continue;
        }
        match bundle_object(&property.value, index) {
            Ok(object) => objects.push(object),
            Err(e) => problems.push(Problem::new(
                Rule::L6,
                at(),
                format!("read bundle objects: package {package:?}, bundle {name:?}: {e}"),
            )),
        }
    }
    Ok(Bundle {
        image: f.string("image", "Bundle")?.unwrap_or_default(),
        package,
        name,
        properties: props,
        related_images,
        objects,
        origin: origin.clone(),
    })
}

/// A bundle's `olm.csv.metadata` property. C11 for its value is made here, while the value is
/// at hand (in cache), rather than in a later pass over every bundle: a value that passes is
/// held as `hold` says and marked checked, so validation does not read it again; one that fails
/// is kept as text, and validation words the error.
fn csv_metadata_property(type_: String, value: &RawValue, hold: CsvMetadataHold) -> Property {
    if csv_metadata::check(value).is_err() {
        return Property::new(type_, value.to_owned());
    }
    match hold {
        CsvMetadataHold::Text => {
            let mut property = Property::new(type_, value.to_owned());
            property.mark_checked();
            property
        }
        CsvMetadataHold::Packed => Property::packed(type_, value),
        CsvMetadataHold::CheckOnly => Property::checked_only(type_),
    }
}

/// Text that is not Go's standard base64.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("illegal base64 data at input byte {at}")]
pub struct Base64Error {
    /// The offset of the first byte that does not fit (line breaks removed).
    pub at: usize,
}

/// Go's `base64.StdEncoding` as used for `[]byte` JSON fields (line breaks ignored).
pub fn decode_base64(data: &str) -> Result<Vec<u8>, Base64Error> {
    let cleaned: Cow<'_, str> = if data.contains(['\r', '\n']) {
        Cow::Owned(data.replace(['\r', '\n'], ""))
    } else {
        Cow::Borrowed(data)
    };
    base64::engine::general_purpose::STANDARD
        .decode(cleaned.as_bytes())
        .map_err(|e| {
            let at = match e {
                base64::DecodeError::InvalidByte(i, _)
                | base64::DecodeError::InvalidLastSymbol(i, _) => i,
                base64::DecodeError::InvalidLength(n) => n,
                base64::DecodeError::InvalidPadding => cleaned.len(),
            };
            Base64Error { at }
        })
}

/// Why the `olm.bundle.object` property at `index` of a bundle could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BundleObjectError {
    #[error("parse property at index {index} as bundle object: {source}")]
    Parse {
        index: usize,
        #[source]
        source: UnmarshalError,
    },
    #[error("parse property at index {index} as bundle object: {source}")]
    Base64 {
        index: usize,
        #[source]
        source: Base64Error,
    },
    #[error(
        "bundle object at index {index} is a file reference (`ref`), which olm-rs does not read"
    )]
    FileReference { index: usize },
    #[error("convert bundle object property at index {index} to JSON: not UTF-8 text")]
    NotUtf8 { index: usize },
    #[error("convert bundle object property at index {index} to JSON: {source}")]
    Manifest {
        index: usize,
        #[source]
        source: ManifestError,
    },
}

/// Decodes an `olm.bundle.object` value (`{"data": base64}`), the property at `index`, into
/// the manifest's JSON.
fn bundle_object(value: &RawValue, index: usize) -> Result<Box<RawValue>, BundleObjectError> {
    let parse = |source| BundleObjectError::Parse { index, source };
    let fields = Fields::of(value, "property.BundleObject").map_err(parse)?;
    let data = match &fields {
        Some(f) => f.string("data", "BundleObject").map_err(parse)?,
        None => None,
    };
    let Some(data) = data else {
        if fields.as_ref().and_then(|f| f.get("ref")).is_some() {
            return Err(BundleObjectError::FileReference { index });
        }
        return Ok(RawValue::NULL.to_owned());
    };
    let bytes =
        decode_base64(&data).map_err(|source| BundleObjectError::Base64 { index, source })?;
    let text = String::from_utf8(bytes).map_err(|_| BundleObjectError::NotUtf8 { index })?;
    manifest_to_json(&text).map_err(|source| BundleObjectError::Manifest { index, source })
}

/// A manifest that is neither JSON nor YAML.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Yaml(#[from] documents::SyntaxError),
}

/// A manifest in JSON or YAML → compact JSON (JSON input is kept as written, like k8s
/// `yaml.ToJSON`).
pub fn manifest_to_json(text: &str) -> Result<Box<RawValue>, ManifestError> {
    let trimmed = text.trim();
    if trimmed.starts_with('{') {
        return Ok(serde_json::from_str::<Box<RawValue>>(trimmed)?);
    }
    let docs = documents::split_yaml_slow(text)?;
    let json = docs
        .into_iter()
        .next()
        .map(|d| d.json.into_owned())
        .unwrap_or_else(|| "null".into());
    Ok(RawValue::from_string(json)?)
}

fn parse_deprecations(f: &Fields<'_>, origin: &Origin) -> Result<Deprecations, UnmarshalError> {
    let mut entries = Vec::new();
    if let Some(raw) = f.get("entries") {
        for item in go_json::array_items(
            raw,
            || "Deprecation.entries".into(),
            "[]declcfg.DeprecationEntry",
        )? {
            let Some(e) = Fields::of(item, "declcfg.DeprecationEntry")? else {
                entries.push(DeprecationEntry::default());
                continue;
            };
            let reference = match e.get("reference") {
                Some(r) => match Fields::of(r, "declcfg.PackageScopedReference")? {
                    Some(r) => DeprecationReference {
                        schema: r
                            .string("schema", "Deprecation.entries.reference")?
                            .unwrap_or_default(),
                        name: r
                            .string("name", "Deprecation.entries.reference")?
                            .unwrap_or_default(),
                    },
                    None => DeprecationReference::default(),
                },
                None => DeprecationReference::default(),
            };
            entries.push(DeprecationEntry {
                reference,
                message: e
                    .string("message", "Deprecation.entries")?
                    .unwrap_or_default(),
            });
        }
    }
    Ok(Deprecations {
        package: f.string("package", "Deprecation")?.unwrap_or_default(),
        entries,
        origin: origin.clone(),
    })
}
