//! Semantic versions and version ranges with the exact grammar OLM uses (blang/semver v4).
//! docs/catalog.md §9.3.

mod range;
mod version;

pub use range::{RangeError, VersionRange};
pub use semver::Version;
pub use version::{VersionError, compare, parse_strict, parse_tolerant};
