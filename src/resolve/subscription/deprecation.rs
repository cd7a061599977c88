//! Deprecation conditions from the catalog's `olm.deprecations` (docs/install-plans.md §2):
//! `PackageDeprecated`, `ChannelDeprecated`, `BundleDeprecated` and the `Deprecated` roll-up.
//! They describe the installed bundle and never affect resolution.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::{
    ConditionStatus, Subscription, SubscriptionCondition, SubscriptionConditionType,
    SubscriptionStatus, remove_condition, set_condition,
};
use crate::catalog::CatalogIndex;

/// Updates the deprecation conditions of `status` for `sub`'s installed bundle; returns whether
/// anything changed. When the installed bundle is not (or no longer) an entry of the
/// Subscription's package and channel in `index`, the conditions are left as they are.
pub fn update_deprecations(
    status: &mut SubscriptionStatus,
    sub: &Subscription,
    index: &CatalogIndex,
    now: &Time,
) -> bool {
    let Some(installed) = status.installed_csv.clone().filter(|s| !s.is_empty()) else {
        return false;
    };
    let Some(package) = index.package(&sub.spec.name) else {
        return false;
    };
    let channel = sub.spec.channel.as_deref().filter(|c| !c.is_empty());
    let listed = match channel {
        Some(c) => package
            .channel(c)
            .is_some_and(|c| c.graph().entry(&installed).is_some()),
        None => package
            .channels()
            .iter()
            .any(|c| c.graph().entry(&installed).is_some()),
    };
    if !listed {
        return false;
    }
    let package_message = package
        .package_deprecation()
        .map(|m| format!("olm.package/{}: {m}", package.name()));
    // Not evaluated when the Subscription names no channel (OLM does the same).
    let channel_message = channel.and_then(|c| {
        package
            .channel_deprecation(c)
            .map(|m| format!("olm.channel/{c}: {m}"))
    });
    let bundle_message = package
        .bundle_deprecation(&installed)
        .map(|m| format!("olm.bundle/{installed}: {m}"));
    let mut conditions = status.conditions.take().unwrap_or_default();
    let mut changed = false;
    let mut all = Vec::new();
    for (kind, message) in [
        (
            SubscriptionConditionType::PackageDeprecated,
            package_message,
        ),
        (
            SubscriptionConditionType::ChannelDeprecated,
            channel_message,
        ),
        (SubscriptionConditionType::BundleDeprecated, bundle_message),
    ] {
        changed |= put(&mut conditions, kind, message.as_deref(), now);
        all.extend(message);
    }
    let roll_up = (!all.is_empty()).then(|| all.join("; "));
    changed |= put(
        &mut conditions,
        SubscriptionConditionType::Deprecated,
        roll_up.as_deref(),
        now,
    );
    status.conditions = Some(conditions);
    changed
}

fn put(
    conditions: &mut Vec<SubscriptionCondition>,
    kind: SubscriptionConditionType,
    message: Option<&str>,
    now: &Time,
) -> bool {
    match message {
        Some(m) => set_condition(
            conditions,
            SubscriptionCondition::new(kind, ConditionStatus::True, "", m),
            now,
        ),
        None => remove_condition(conditions, kind.as_str()),
    }
}
