//! `status.catalogHealth` and the `CatalogSourcesUnhealthy` condition
//! (docs/install-plans.md §3).

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::CatalogRef;
use crate::api::subscription::reason;
use crate::api::{
    ConditionStatus, SubscriptionCatalogHealth, SubscriptionCondition, SubscriptionConditionType,
    SubscriptionStatus, set_condition,
};
use crate::resolve::input::{CatalogContent, CatalogInput};

const CATALOG_API_VERSION: &str = "operators.coreos.com/v1alpha1";

/// Updates the health list and condition of `status` from the visible `catalogs`; returns
/// whether anything changed. The list is rewritten only when an entry's catalog, UID or health
/// changed, so an unchanged world never rewrites the Subscription.
pub fn update_catalog_health(
    status: &mut SubscriptionStatus,
    targeted: &CatalogRef,
    catalogs: &[CatalogInput],
    now: &Time,
) -> bool {
    let previous = status.catalog_health.clone().unwrap_or_default();
    // A catalog still loading has no known health yet: what the Subscription last recorded for
    // it stands (after a controller restart, or a move from OLM, a catalog is not reported
    // unhealthy for the seconds its first connection takes, then healthy again).
    let known: Vec<CatalogInput> = catalogs
        .iter()
        .map(|c| {
            let mut c = c.clone();
            if matches!(c.content, CatalogContent::Loading(_))
                && let Some(recorded) = previous.iter().find(|h| {
                    let r = &h.catalog_source_ref;
                    r.name.as_deref() == Some(c.key.name.as_str())
                        && r.namespace.as_deref() == Some(c.key.namespace.as_str())
                        && r.uid == c.uid
                })
            {
                c.healthy = recorded.healthy;
            }
            c
        })
        .collect();
    let mut sorted: Vec<&CatalogInput> = known.iter().collect();
    sorted.sort_by(|a, b| a.key.cmp(&b.key));
    let health: Vec<SubscriptionCatalogHealth> = sorted
        .iter()
        .map(|c| SubscriptionCatalogHealth {
            catalog_source_ref: ObjectReference {
                api_version: Some(CATALOG_API_VERSION.into()),
                kind: Some("CatalogSource".into()),
                name: Some(c.key.name.clone()),
                namespace: Some(c.key.namespace.clone()),
                uid: c.uid.clone(),
                ..ObjectReference::default()
            },
            last_updated: now.clone(),
            healthy: c.healthy,
        })
        .collect();
    let same_list = previous.len() == health.len()
        && previous.iter().zip(&health).all(|(a, b)| same_entry(a, b));

    let targeted_entry = sorted.iter().find(|c| &c.key == targeted);
    let unhealthy: Vec<&CatalogRef> = sorted
        .iter()
        .filter(|c| !c.healthy)
        .map(|c| &c.key)
        .collect();
    let (state, mut why, mut message) = match targeted_entry {
        None => (
            ConditionStatus::True,
            reason::UNHEALTHY_CATALOG_SOURCE_FOUND,
            format!("targeted catalogsource {targeted} missing"),
        ),
        Some(t) if !t.healthy => (
            ConditionStatus::True,
            reason::UNHEALTHY_CATALOG_SOURCE_FOUND,
            format!("targeted catalogsource {targeted} unhealthy"),
        ),
        // OLM keeps whatever message was there before here (a quirk); say which ones instead.
        Some(_) if !unhealthy.is_empty() => (
            ConditionStatus::True,
            reason::UNHEALTHY_CATALOG_SOURCE_FOUND,
            format!(
                "catalogsource{} {} unhealthy; targeted catalogsource {targeted} is healthy",
                if unhealthy.len() == 1 { "" } else { "s" },
                unhealthy
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        Some(_) => (
            ConditionStatus::False,
            reason::ALL_CATALOG_SOURCES_HEALTHY,
            "all available catalogsources are healthy".to_owned(),
        ),
    };
    if health.len() > previous.len() {
        why = reason::CATALOG_SOURCES_ADDED;
    } else if health.len() < previous.len() {
        why = reason::CATALOG_SOURCES_DELETED;
    } else if health.is_empty() {
        why = reason::NO_CATALOG_SOURCES_FOUND;
        message = "dependency resolution requires at least one catalogsource".to_owned();
    } else if !same_list {
        why = reason::CATALOG_SOURCES_UPDATED;
    }
    let mut changed = false;
    if !same_list || status.catalog_health.is_none() {
        status.catalog_health = Some(health);
        changed = true;
    }
    let mut conditions = status.conditions.take().unwrap_or_default();
    changed |= set_condition(
        &mut conditions,
        SubscriptionCondition::new(
            SubscriptionConditionType::CatalogSourcesUnhealthy,
            state,
            why,
            &message,
        ),
        now,
    );
    status.conditions = Some(conditions);
    changed
}

fn same_entry(a: &SubscriptionCatalogHealth, b: &SubscriptionCatalogHealth) -> bool {
    let id = |h: &SubscriptionCatalogHealth| {
        (
            h.catalog_source_ref.namespace.clone(),
            h.catalog_source_ref.name.clone(),
            h.catalog_source_ref.uid.clone(),
            h.healthy,
        )
    };
    id(a) == id(b)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use jiff::Timestamp;

    use super::*;
    use crate::catalog::CatalogIndex;

    fn catalog(content: CatalogContent, healthy: bool) -> CatalogInput {
        CatalogInput {
            key: CatalogRef {
                name: "ops".into(),
                namespace: "olm".into(),
            },
            priority: 0,
            uid: Some("uid-ops".into()),
            content,
            healthy,
        }
    }

    fn at(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap())
    }

    /// After a restart, or a move from OLM, the catalog is still loading: what the Subscription
    /// recorded stands, and nothing is written until the load says otherwise.
    #[test]
    fn a_catalog_still_loading_keeps_the_health_the_subscription_recorded() {
        let targeted = catalog(
            CatalogContent::Ready(Arc::new(CatalogIndex::default())),
            true,
        )
        .key;
        let mut status = SubscriptionStatus::new(at(0));
        let ready = catalog(
            CatalogContent::Ready(Arc::new(CatalogIndex::default())),
            true,
        );
        assert!(update_catalog_health(
            &mut status,
            &targeted,
            std::slice::from_ref(&ready),
            &at(1)
        ));
        // `CatalogSourcesAdded`, then `AllCatalogSourcesHealthy`: settled.
        update_catalog_health(&mut status, &targeted, std::slice::from_ref(&ready), &at(1));
        let recorded = status.clone();

        let loading = catalog(CatalogContent::Loading("not loaded yet".into()), false);
        assert!(!update_catalog_health(
            &mut status,
            &targeted,
            &[loading],
            &at(2)
        ));
        assert_eq!(status, recorded);
        assert!(!update_catalog_health(
            &mut status,
            &targeted,
            &[ready],
            &at(3)
        ));

        // A load that fails is news.
        let down = catalog(
            CatalogContent::Unavailable("connection refused".into()),
            false,
        );
        assert!(update_catalog_health(
            &mut status,
            &targeted,
            &[down],
            &at(4)
        ));
        assert!(!status.catalog_health.unwrap()[0].healthy);

        // Never recorded: loading is not healthy.
        let mut fresh = SubscriptionStatus::new(at(0));
        let loading = catalog(CatalogContent::Loading("not loaded yet".into()), false);
        update_catalog_health(&mut fresh, &targeted, &[loading], &at(1));
        assert!(!fresh.catalog_health.unwrap()[0].healthy);
    }
}
