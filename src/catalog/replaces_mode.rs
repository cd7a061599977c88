//! A directory of bundle directories read as a catalog in "replaces mode" (the
//! community-operators layout `operators/<package>/<version>/`): channels come from each
//! bundle's annotations, edges from its CSV (`spec.replaces`, `spec.skips`, annotation
//! `olm.skipRange`), and the default channel from the annotations, or the only channel.
//!
//! When bundles disagree on the default channel, the one declared by the highest version wins
//! (what the last `opm index add` of a release sequence would leave; a decision, the sqlite
//! tooling this mimics is gone).

use std::collections::BTreeMap;
use std::path::Path;

use super::bundle_dir::{self, render};
use super::error::{CatalogError, Location, Problem, Rule};
use super::fbc::parallel_map;
use super::model::{Channel, ChannelEntry, DeclarativeConfig, Origin, Package};
use super::semver_range::{compare, parse_tolerant};

/// Whether `path` has at least one bundle directory directly under it.
pub fn has_bundle_dirs(path: &Path) -> Result<bool, CatalogError> {
    Ok(bundle_dirs(path)?
        .iter()
        .any(|d| bundle_dir::is_bundle_dir(d)))
}

fn bundle_dirs(path: &Path) -> Result<Vec<std::path::PathBuf>, CatalogError> {
    let io = |source| CatalogError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut dirs = Vec::new();
    for entry in std::fs::read_dir(path).map_err(io)? {
        let p = entry.map_err(io)?.path();
        if p.is_dir() {
            dirs.push(p);
        }
    }
    dirs.sort();
    Ok(dirs)
}

struct Member {
    bundle: super::model::Bundle,
    channels: Vec<String>,
    default_channel: Option<String>,
    entry: ChannelEntry,
}

/// Reads every bundle directory under `path` (or `path` itself if it is one) into a catalog.
/// Directories that are not bundles are ignored; bundles that fail to render are problems.
pub fn load(path: &Path) -> Result<(DeclarativeConfig, Vec<Problem>), CatalogError> {
    let dirs = if bundle_dir::is_bundle_dir(path) {
        vec![path.to_path_buf()]
    } else {
        bundle_dirs(path)?
            .into_iter()
            .filter(|d| bundle_dir::is_bundle_dir(d))
            .collect()
    };
    let rendered = parallel_map(&dirs, |d| {
        let dir = bundle_dir::read(d)?;
        let r = render::render(&dir, "")?;
        let csv = dir.csv();
        let entry = ChannelEntry {
            name: r.bundle.name.clone(),
            replaces: csv["spec"]["replaces"]
                .as_str()
                .filter(|s| !s.is_empty())
                .map(str::to_string),
            skips: csv["spec"]["skips"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect(),
            skip_range: csv["metadata"]["annotations"]["olm.skipRange"]
                .as_str()
                .filter(|s| !s.is_empty())
                .map(str::to_string),
        };
        Ok::<_, bundle_dir::BundleDirError>(Member {
            channels: dir.channels(),
            default_channel: dir.default_channel().map(str::to_string),
            entry,
            bundle: r.bundle,
        })
    });
    let mut problems = Vec::new();
    let mut packages: BTreeMap<String, Vec<Member>> = BTreeMap::new();
    for (dir, result) in dirs.iter().zip(rendered) {
        match result {
            Ok(m) => packages
                .entry(m.bundle.package.clone())
                .or_default()
                .push(m),
            Err(e) => problems.push(Problem::new(
                Rule::B1,
                Location::file(dir.display().to_string(), None),
                e.to_string(),
            )),
        }
    }
    let mut config = DeclarativeConfig::default();
    for (name, members) in packages {
        let mut channels: BTreeMap<String, Vec<ChannelEntry>> = BTreeMap::new();
        for m in &members {
            if m.channels.is_empty() {
                problems.push(Problem::new(
                    Rule::B1,
                    Location::from_origin(&m.bundle.origin)
                        .package(&name)
                        .bundle(&m.bundle.name),
                    format!(
                        "annotation {} is missing or empty",
                        bundle_dir::ANNOTATION_CHANNELS
                    ),
                ));
            }
            for c in &m.channels {
                channels.entry(c.clone()).or_default().push(m.entry.clone());
            }
        }
        let version = |m: &Member| {
            super::properties::packages(&m.bundle.properties)
                .next()
                .and_then(|p| parse_tolerant(&p.version).ok())
        };
        let mut by_version: Vec<&Member> = members.iter().collect();
        by_version.sort_by(|a, b| match (version(a), version(b)) {
            (Some(x), Some(y)) => compare(&x, &y),
            (x, y) => x.is_some().cmp(&y.is_some()),
        });
        let default_channel = by_version
            .iter()
            .rev()
            .find_map(|m| m.default_channel.clone())
            .or_else(|| {
                (channels.len() == 1)
                    .then(|| channels.keys().next().cloned())
                    .flatten()
            });
        let origin = Origin::new(path.display().to_string().into(), None);
        config.packages.push(Package {
            name: name.clone(),
            default_channel,
            origin: origin.clone(),
            ..Package::default()
        });
        for (channel, entries) in channels {
            config.channels.push(Channel {
                package: name.clone(),
                name: channel,
                entries,
                properties: Vec::new(),
                origin: origin.clone(),
            });
        }
        config.bundles.extend(members.into_iter().map(|m| m.bundle));
    }
    Ok((config, problems))
}
