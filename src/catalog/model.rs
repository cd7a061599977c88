//! The declarative-config model: what a file-based catalog (FBC) holds, one struct per schema.
//! docs/catalog.md §6.2. Big values (property values, inline manifests) are kept as raw JSON
//! text and parsed only when someone asks (see `properties.rs`).

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::value::RawValue;

use super::packed::PackedJson;

pub const SCHEMA_PACKAGE: &str = "olm.package";
pub const SCHEMA_CHANNEL: &str = "olm.channel";
pub const SCHEMA_BUNDLE: &str = "olm.bundle";
pub const SCHEMA_DEPRECATIONS: &str = "olm.deprecations";

/// Where a blob was read from: file (relative to the catalog root) and the line its document
/// starts on, when known.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    pub file: Option<Arc<str>>,
    pub line: Option<u32>,
}

impl Origin {
    pub fn new(file: Arc<str>, line: Option<u32>) -> Origin {
        Origin {
            file: Some(file),
            line,
        }
    }
}

/// One `{type, value}` property; `value` is the raw JSON text as found in the catalog, except
/// for a packed property (`packed`), whose `value` is `null`: read values with `json()`
/// (or `typed()`) to see both. A property made by `checked_only` has no value left (`null`).
/// Outside the catalog engine, which knows which properties it packs, `json()` is the only way
/// to read a value, so no reader can take a packed property's placeholder for its value.
#[derive(Debug, Clone)]
pub struct Property {
    pub type_: String,
    pub(in crate::catalog) value: Box<RawValue>,
    held: Held,
}

/// What the loader already knows about a property's value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
enum Held {
    /// As read; nothing checked yet.
    #[default]
    Raw,
    /// The value passed its type's shape check (`typed()` need not check it again).
    Checked,
    /// Checked, and kept compressed; `value` is `null`.
    Packed(PackedJson),
    /// Checked, and the value not kept; `value` is `null`.
    CheckedOnly,
}

impl Property {
    pub fn new(type_: impl Into<String>, value: Box<RawValue>) -> Property {
        Property {
            type_: type_.into(),
            value,
            held: Held::Raw,
        }
    }

    /// A property whose value passed its type's shape check, kept compressed (`PackedJson`):
    /// for the big values a long-lived process rarely reads (`olm.csv.metadata` in `catalog
    /// serve`).
    pub fn packed(type_: impl Into<String>, value: &RawValue) -> Property {
        Property {
            type_: type_.into(),
            value: RawValue::NULL.to_owned(),
            held: Held::Packed(PackedJson::pack(value)),
        }
    }

    /// A property whose value passed its type's shape check and is not kept: for a one-shot
    /// validation, which needs to know only that (`fbc::CsvMetadataHold::CheckOnly`). Its
    /// `value` and `json()` are `null`.
    pub fn checked_only(type_: impl Into<String>) -> Property {
        Property {
            type_: type_.into(),
            value: RawValue::NULL.to_owned(),
            held: Held::CheckedOnly,
        }
    }

    /// The value as JSON text, unpacked if needed.
    pub fn json(&self) -> Cow<'_, RawValue> {
        match &self.held {
            Held::Packed(packed) => Cow::Owned(packed.unpack()),
            Held::Raw | Held::Checked | Held::CheckedOnly => Cow::Borrowed(&self.value),
        }
    }

    /// Whether the value is known to have its type's shape (see `mark_checked`).
    pub fn is_checked(&self) -> bool {
        self.held != Held::Raw
    }

    /// Records that the value passed its type's shape check, so `typed()` skips it. For
    /// checks the loader makes while the value is at hand (`fbc::blob`, C11).
    pub fn mark_checked(&mut self) {
        if self.held == Held::Raw {
            self.held = Held::Checked;
        }
    }

    /// Builds a property from any serialisable value.
    pub fn from_value<T: serde::Serialize>(
        type_: impl Into<String>,
        value: &T,
    ) -> Result<Property, serde_json::Error> {
        Ok(Property::new(
            type_,
            serde_json::value::to_raw_value(value)?,
        ))
    }
}

impl PartialEq for Property {
    fn eq(&self, other: &Property) -> bool {
        self.type_ == other.type_ && self.json().get() == other.json().get()
    }
}

/// `olm.package`.
#[derive(Debug, Clone, Default)]
pub struct Package {
    pub name: String,
    pub default_channel: Option<String>,
    pub description: Option<String>,
    pub icon: Option<Icon>,
    pub properties: Vec<Property>,
    pub origin: Origin,
}

/// Package icon; `base64data` is kept encoded (it was checked to decode at load).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Icon {
    pub base64data: String,
    pub mediatype: String,
}

/// `olm.channel`.
#[derive(Debug, Clone, Default)]
pub struct Channel {
    pub package: String,
    pub name: String,
    pub entries: Vec<ChannelEntry>,
    pub properties: Vec<Property>,
    pub origin: Origin,
}

/// One entry of a channel: the upgrade edges *into* bundle `name`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChannelEntry {
    pub name: String,
    pub replaces: Option<String>,
    pub skips: Vec<String>,
    pub skip_range: Option<String>,
}

/// `olm.bundle`. Inline manifests (`olm.bundle.object` properties) are decoded at load and kept
/// as JSON in `objects`, in property order; they are not repeated in `properties`.
#[derive(Debug, Clone, Default)]
pub struct Bundle {
    pub package: String,
    pub name: String,
    pub image: String,
    pub properties: Vec<Property>,
    pub related_images: Vec<RelatedImage>,
    pub objects: Vec<Box<RawValue>>,
    pub origin: Origin,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RelatedImage {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub image: String,
}

/// `olm.deprecations` (at most one per package).
#[derive(Debug, Clone, Default)]
pub struct Deprecations {
    pub package: String,
    pub entries: Vec<DeprecationEntry>,
    pub origin: Origin,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeprecationEntry {
    pub reference: DeprecationReference,
    pub message: String,
}

/// What a deprecation entry points at: `schema` is `olm.package`, `olm.channel` or `olm.bundle`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct DeprecationReference {
    pub schema: String,
    pub name: String,
}

/// A blob with a schema olm-rs does not interpret; kept verbatim.
#[derive(Debug, Clone)]
pub struct OtherBlob {
    pub schema: String,
    pub package: Option<String>,
    pub name: Option<String>,
    pub blob: Box<RawValue>,
    pub origin: Origin,
}

/// Everything a catalog directory holds, in load order.
#[derive(Debug, Clone, Default)]
pub struct DeclarativeConfig {
    pub packages: Vec<Package>,
    pub channels: Vec<Channel>,
    pub bundles: Vec<Bundle>,
    pub deprecations: Vec<Deprecations>,
    pub others: Vec<OtherBlob>,
}

impl DeclarativeConfig {
    pub fn merge(&mut self, other: DeclarativeConfig) {
        self.packages.extend(other.packages);
        self.channels.extend(other.channels);
        self.bundles.extend(other.bundles);
        self.deprecations.extend(other.deprecations);
        self.others.extend(other.others);
    }
}
