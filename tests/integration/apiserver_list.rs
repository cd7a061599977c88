//! Lists: label selectors (equality and set-based), field selectors, paging, metadata-only
//! lists, and the errors for bad selectors.

use crate::apiserver_common;

use apiserver_common::status;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use olm_rs::sandbox::ApiServer;
use serde_json::json;

async fn seeded() -> (ApiServer, Api<ConfigMap>) {
    let server = ApiServer::new();
    let client = server.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let specs = [
        ("web", json!({"app": "web", "tier": "front"})),
        ("api", json!({"app": "api", "tier": "back"})),
        ("db", json!({"app": "db"})),
        ("plain", json!({})),
    ];
    for (name, labels) in specs {
        let c: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
        cms.create(&PostParams::default(), &c).await.unwrap();
    }
    let other: Api<ConfigMap> = Api::namespaced(client, "kube-system");
    let c: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "web", "labels": {"app": "web"}}}))
            .unwrap();
    other.create(&PostParams::default(), &c).await.unwrap();
    (server, cms)
}

async fn names(api: &Api<ConfigMap>, lp: &ListParams) -> Vec<String> {
    api.list(lp)
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| c.metadata.name.unwrap())
        .collect()
}

#[tokio::test]
async fn label_selectors() {
    let (_server, cms) = seeded().await;
    let cases: [(&str, &[&str]); 8] = [
        ("app=web", &["web"]),
        ("app==web", &["web"]),
        ("app!=web", &["api", "db", "plain"]),
        ("app in (web,api)", &["api", "web"]),
        ("app notin (web,api)", &["db", "plain"]),
        ("tier", &["api", "web"]),
        ("!tier", &["db", "plain"]),
        ("app,tier=back", &["api"]),
    ];
    for (sel, want) in cases {
        assert_eq!(
            names(&cms, &ListParams::default().labels(sel)).await,
            want,
            "{sel}"
        );
    }
    let err = status(cms.list(&ListParams::default().labels("app in web")).await);
    assert_eq!(err.code, 400);
}

#[tokio::test]
async fn field_selectors_on_name_and_namespace() {
    let (server, cms) = seeded().await;
    assert_eq!(
        names(&cms, &ListParams::default().fields("metadata.name=db")).await,
        ["db"]
    );
    assert_eq!(
        names(
            &cms,
            &ListParams::default().fields("metadata.name!=db,metadata.name!=plain")
        )
        .await,
        ["api", "web"]
    );
    let all: Api<ConfigMap> = Api::all(server.client());
    let in_system = all
        .list(&ListParams::default().fields("metadata.namespace=kube-system"))
        .await
        .unwrap();
    assert_eq!(in_system.items.len(), 1);
    let err = status(cms.list(&ListParams::default().fields("data.k=v")).await);
    assert_eq!(err.code, 400);
    assert!(
        err.message.contains("field label not supported"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn all_namespaces_list_and_paging() {
    let (server, _) = seeded().await;
    let all: Api<ConfigMap> = Api::all(server.client());
    let mut lp = ListParams::default().limit(2);
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let page = all.list(&lp).await.unwrap();
        pages += 1;
        assert!(page.items.len() <= 2);
        seen.extend(page.items.into_iter().map(|c| {
            format!(
                "{}/{}",
                c.metadata.namespace.unwrap(),
                c.metadata.name.unwrap()
            )
        }));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => lp = lp.continue_token(&token),
            _ => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(
        seen,
        [
            "default/api",
            "default/db",
            "default/plain",
            "default/web",
            "kube-system/web"
        ]
    );
}

#[tokio::test]
async fn list_carries_a_resource_version_and_metadata_lists_work() {
    let (_server, cms) = seeded().await;
    let list = cms.list(&ListParams::default()).await.unwrap();
    let rv: u64 = list.metadata.resource_version.unwrap().parse().unwrap();
    assert!(list.items.iter().all(|c| {
        c.metadata
            .resource_version
            .as_ref()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            <= rv
    }));
    let meta = cms
        .list_metadata(&ListParams::default().labels("app=db"))
        .await
        .unwrap();
    assert_eq!(meta.items.len(), 1);
    assert_eq!(meta.items[0].metadata.name.as_deref(), Some("db"));
}
