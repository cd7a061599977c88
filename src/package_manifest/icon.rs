//! The `packagemanifests/icon` subresource: the default channel head's first icon as raw
//! bytes with its media type and an `ETag`; a built-in SVG when the package has none
//! (docs/packagemanifests.md §7).

use base64::Engine as _;

use super::build::PackageIcon;

/// Served when a package has no icon (olm-rs's own drawing: a grey ring around a box).
pub const DEFAULT_ICON_SVG: &str = r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64"><circle cx="32" cy="32" r="29" fill="none" stroke="#d1d1d1" stroke-width="5"/><path d="M20 24l12-6 12 6v16l-12 6-12-6z" fill="#8d8d8f"/></svg>
"##;
pub const DEFAULT_ICON_MEDIA_TYPE: &str = "image/svg+xml";

/// An icon response body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IconResponse {
    pub bytes: Vec<u8>,
    pub media_type: String,
    /// Empty for the built-in icon (OLM sends an empty `ETag` then).
    pub etag: String,
}

/// The response for a package's icon. An icon whose data does not decode is served as the
/// bytes that did decode, as OLM's streaming decoder does: here, none, so the default icon.
pub fn icon_response(icon: Option<&PackageIcon>) -> IconResponse {
    let decoded = icon.and_then(|i| {
        base64::engine::general_purpose::STANDARD
            .decode(i.base64data.trim())
            .ok()
            .map(|bytes| (bytes, i))
    });
    match decoded {
        Some((bytes, i)) => IconResponse {
            bytes,
            media_type: i.mediatype.clone(),
            etag: i.etag.clone(),
        },
        None => IconResponse {
            bytes: DEFAULT_ICON_SVG.as_bytes().to_vec(),
            media_type: DEFAULT_ICON_MEDIA_TYPE.into(),
            etag: String::new(),
        },
    }
}
