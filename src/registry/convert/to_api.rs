//! Index → wire: how `opm serve` projects an FBC package and bundle onto `api.Package` and
//! `api.Bundle` (spec/catalog.md §6.2, §6.3).

use crate::catalog::properties::{self, TypedProperty};
use crate::catalog::{GraphEntry, IndexedBundle, PackageIndex};
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

/// `api.Bundle` for `bundle` as a member of `channel` (whose entry for it is `entry`).
pub fn bundle(
    pkg: &PackageIndex,
    channel: &str,
    entry: Option<&GraphEntry>,
    bundle: &IndexedBundle,
    view: BundleView,
) -> proto::Bundle {
    let mut provided_apis = Vec::new();
    let mut required_apis = Vec::new();
    let mut dependencies = Vec::new();
    let mut api_properties = Vec::new();
    let mut csv_metadata = Vec::new();
    for p in bundle.properties() {
        // Only the types projected here are parsed: `olm.csv.metadata` values are large and are
        // only needed raw, for the stub CSV.
        let typed = match p.type_.as_str() {
            properties::GVK | properties::GVK_REQUIRED | properties::PACKAGE_REQUIRED => p.typed().ok(),
            properties::CSV_METADATA => {
                csv_metadata.push(&*p.value);
                None
            }
            _ => None,
        };
        match typed {
            Some(TypedProperty::Gvk(g)) => provided_apis.push(gvk(g)),
            Some(TypedProperty::GvkRequired(g)) => {
                dependencies.push(proto::Dependency {
                    r#type: properties::GVK.to_owned(),
                    value: p.value.get().to_owned(),
                });
                required_apis.push(gvk(g));
            }
            Some(TypedProperty::PackageRequired(req)) => {
                // opm re-encodes the requirement as a legacy `olm.package` dependency, the range
                // under `version` (spec/catalog.md §6.3).
                dependencies.push(proto::Dependency {
                    r#type: properties::PACKAGE.to_owned(),
                    value: super::go_json_text(&serde_json::json!({
                        "packageName": req.package_name,
                        "version": req.version_range,
                    })),
                });
            }
            _ => {}
        }
        // Manifests are never repeated as properties: a CSV annotation projection of them would
        // blow etcd's object size limit (opm's reason for the filter).
        if p.type_ != properties::CSV_METADATA && p.type_ != properties::BUNDLE_OBJECT {
            api_properties.push(proto::Property {
                r#type: p.type_.clone(),
                value: p.value.get().to_owned(),
            });
        }
    }

    let version = bundle.version_string();
    let image = bundle.image();
    // ListBundles leaves the manifests of a bundle with an image to the image.
    let inline = view == BundleView::Full || image.is_empty();
    let mut objects: Vec<String> = Vec::new();
    let mut csv_json = None;
    if inline {
        objects = bundle.objects().map(str::to_owned).collect();
        csv_json = bundle.csv_json().map(str::to_owned);
        if csv_json.is_none()
            && let [metadata] = csv_metadata.as_slice()
        {
            let stub = super::csv_stub::csv_from_metadata(
                bundle.name(),
                metadata,
                pkg.package(),
                version.as_deref(),
                &bundle.bundle().related_images,
            );
            if objects.is_empty() {
                objects.push(stub.clone());
            }
            csv_json = Some(stub);
        }
    }

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
        provided_apis,
        required_apis,
        version: version.unwrap_or_default(),
        skip_range: entry.and_then(|e| e.skip_range.clone()).unwrap_or_default(),
        dependencies,
        properties: api_properties,
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
