//! Index → wire: how `opm serve` projects an FBC package and bundle onto `api.Package` and
//! `api.Bundle` (docs/catalog.md §5.2, §5.3).

use std::borrow::Cow;

use crate::catalog::properties;
use crate::catalog::{GraphEntry, IndexedBundle, PackageIndex, api_projection};
use crate::registry::proto;

/// How much of a bundle a message carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BundleView {
    /// ListBundles: one message per channel membership with the entry's upgrade edges; when the
    /// bundle has an image, `csvJson` and `object` are left out (clients pull the image).
    Listed,
    /// GetBundle and friends: the whole bundle, but `replaces` and `skips` empty (opm's
    /// "trimmed" bundle); `skipRange` stays.
    Full,
}

/// `api.Package`: channels by name, each with its head; deprecations from `olm.deprecations`.
pub fn package(pkg: &PackageIndex) -> proto::Package {
    proto::Package {
        name: pkg.name().to_owned(),
        channels: pkg
            .channels()
            .iter()
            .map(|c| proto::Channel {
                name: c.name().to_owned(),
                csv_name: c
                    .graph()
                    .channel_head()
                    .map(|head| head.name.clone())
                    .unwrap_or_default(),
                deprecation: deprecation(pkg.channel_deprecation(c.name())),
            })
            .collect(),
        default_channel_name: pkg.default_channel_name().unwrap_or_default().to_owned(),
        deprecation: deprecation(pkg.package_deprecation()),
    }
}

/// `api.ChannelEntry` for `entry` of `channel`, with `replaces` as given (opm reports the
/// entry's `replaces` or, for provider queries, one skipped name per message).
pub fn channel_entry(
    package: &str,
    channel: &str,
    bundle: &str,
    replaces: &str,
) -> proto::ChannelEntry {
    proto::ChannelEntry {
        package_name: package.to_owned(),
        channel_name: channel.to_owned(),
        bundle_name: bundle.to_owned(),
        replaces: replaces.to_owned(),
    }
}

/// `api.Bundle` for `bundle` as a member of `channel` (whose entry for it is `entry`). The
/// property, dependency and manifest projections are the catalog engine's
/// (`catalog::api_projection`); this adds the per-channel fields and the view's trimming.
pub fn bundle(
    pkg: &PackageIndex,
    channel: &str,
    entry: Option<&GraphEntry>,
    bundle: &IndexedBundle,
    view: BundleView,
) -> proto::Bundle {
    let image = bundle.image();
    // ListBundles leaves the manifests of a bundle with an image to the image.
    let inline = view == BundleView::Full || image.is_empty();
    let (csv_json, objects) = if inline {
        (
            api_projection::csv_json(pkg.package(), bundle).map(Cow::into_owned),
            api_projection::objects(pkg.package(), bundle)
                .into_iter()
                .map(Cow::into_owned)
                .collect(),
        )
    } else {
        (None, Vec::new())
    };
    let (replaces, skips) = match (view, entry) {
        (BundleView::Listed, Some(e)) => (e.replaces.clone().unwrap_or_default(), e.skips.clone()),
        _ => (String::new(), Vec::new()),
    };
    proto::Bundle {
        csv_name: bundle.name().to_owned(),
        package_name: pkg.name().to_owned(),
        channel_name: channel.to_owned(),
        csv_json: csv_json.unwrap_or_default(),
        object: objects,
        bundle_path: image.to_owned(),
        provided_apis: bundle.provided_gvks().map(gvk).collect(),
        required_apis: bundle.required_gvks().map(gvk).collect(),
        version: bundle.version_string().unwrap_or_default(),
        skip_range: entry.and_then(|e| e.skip_range.clone()).unwrap_or_default(),
        dependencies: api_projection::api_dependencies(bundle)
            .into_iter()
            .map(|(type_, value)| proto::Dependency {
                r#type: type_.to_owned(),
                value,
            })
            .collect(),
        properties: api_projection::api_properties(bundle)
            .map(|(type_, value)| proto::Property {
                r#type: type_.to_owned(),
                value: value.to_owned(),
            })
            .collect(),
        replaces,
        skips,
        deprecation: deprecation(pkg.bundle_deprecation(bundle.name())),
    }
}

fn gvk(g: properties::GvkValue) -> proto::GroupVersionKind {
    proto::GroupVersionKind {
        group: g.group,
        version: g.version,
        kind: g.kind,
        plural: String::new(),
    }
}

fn deprecation(message: Option<&str>) -> Option<proto::Deprecation> {
    message.map(|m| proto::Deprecation {
        message: m.to_owned(),
    })
}
