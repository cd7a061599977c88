//! What a Subscription would get, with the whole upgrade path it would then follow — the
//! preview behind `olm-rs resolve` (OLM never offered one).

use serde::Serialize;

use crate::api::Subscription;

use super::decide::decide_alone;
use super::input::NamespaceInput;
use super::outcome::{Outcome, Target, Why};
use super::version_request::{Held, VersionRequest, admits, version_request};

/// The decision for one Subscription, and where it leads.
#[derive(Debug, Clone, PartialEq)]
pub struct Preview {
    pub outcome: Outcome,
    /// The bundles installed one InstallPlan each, starting with the decided target and ending
    /// at the channel head (or where the path stops). Empty unless something is installed.
    pub path: Vec<PathStep>,
    /// Why the path ends before the channel head, if it does.
    pub stopped: Option<String>,
}

/// One InstallPlan along the way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PathStep {
    pub bundle: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// How it was reached: `channelHead`, `startingCSV`, `replaces`, `skips`, `skipRange`.
    pub via: String,
    /// The CSV it replaces, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    /// The bundle image that would be pulled (the catalog carries no manifests for it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

/// The image a bundle's manifests must be pulled from: set, and no inline objects.
fn image_to_pull(bundle: Option<&crate::catalog::IndexedBundle>) -> Option<String> {
    let b = bundle?.bundle();
    (b.objects.is_empty() && !b.image.is_empty()).then(|| b.image.clone())
}

/// Previews `sub` in the namespace `ns`.
pub fn preview(ns: &NamespaceInput<'_>, sub: &Subscription) -> Preview {
    let outcome = decide_alone(ns, sub);
    let (mut path, mut stopped) = match &outcome {
        Outcome::Install(target) => path_from(ns, target),
        _ => (Vec::new(), None),
    };
    // Later steps follow the range as the first did (docs/upgrades.md): the path ends at the
    // newest version in range, and says what it leaves out.
    if let Ok(Some(request)) = version_request(sub)
        && let Some(cut) = path
            .iter()
            .skip(1)
            .position(|step| !in_range(&request, step.version.as_deref()))
    {
        let left = path.split_off(cut + 1);
        if let (Some(last), Some(first_out)) = (path.last(), left.first()) {
            stopped = Some(
                Held::NewerOutsideRange {
                    range: request.range.to_string(),
                    installed: last.bundle.clone(),
                    bundle: first_out.bundle.clone(),
                    version: first_out.version.clone(),
                }
                .to_string(),
            );
        }
    }
    Preview {
        outcome,
        path,
        stopped,
    }
}

fn in_range(request: &VersionRequest, version: Option<&str>) -> bool {
    let version = version.and_then(|v| crate::catalog::semver_range::parse_tolerant(v).ok());
    admits(Some(request), version.as_ref())
}

pub fn why_name(why: Why) -> String {
    match why {
        Why::ChannelHead => "channelHead".into(),
        Why::StartingCsv => "startingCSV".into(),
        Why::Upgrade(edge) => edge.to_string(),
        Why::Downgrade => "downgrade".into(),
        Why::Rollback => "rollback".into(),
    }
}

fn path_from(ns: &NamespaceInput<'_>, target: &Target) -> (Vec<PathStep>, Option<String>) {
    let mut path = vec![PathStep {
        bundle: target.bundle.clone(),
        version: target.version.clone(),
        via: why_name(target.why),
        replaces: target.replaces.clone(),
        image: None,
    }];
    let graph = ns
        .catalog(&target.catalog)
        .and_then(|c| c.index())
        .and_then(|index| index.package(&target.package))
        .and_then(|p| p.channel(&target.channel).map(|c| (p, c)));
    let Some((package, channel)) = graph else {
        return (path, None);
    };
    path[0].image = image_to_pull(package.bundle(&target.bundle));
    let version = package.bundle(&target.bundle).and_then(|b| b.version());
    let walk = channel.graph().upgrade_path(&target.bundle, version);
    let mut previous = target.bundle.clone();
    for step in &walk.steps {
        let name = step.entry.name.clone();
        path.push(PathStep {
            version: package.bundle(&name).and_then(|b| b.version_string()),
            bundle: name.clone(),
            via: step.via.to_string(),
            replaces: Some(std::mem::replace(&mut previous, name.clone())),
            image: image_to_pull(package.bundle(&name)),
        });
    }
    // "At the head already" is where a path normally ends; anything else is worth saying.
    let stopped = walk.stopped.and_then(|why| match why {
        crate::catalog::upgrade_graph::NoUpdate::AtHead { .. } => None,
        other => Some(other.to_string()),
    });
    (path, stopped)
}
