//! Watch semantics: resuming from a resourceVersion, selectors turning changes into
//! ADDED/DELETED, bookmarks, 410 Gone, timeouts, and kube-runtime's watcher on top.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube_runtime::watcher;
use olm_rs::sandbox::{ApiServer, ApiServerOptions};
use serde_json::json;

fn cm(name: &str, labels: serde_json::Value) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}),
    )
    .unwrap()
}

fn name_of(ev: &WatchEvent<ConfigMap>) -> (String, String) {
    let (kind, obj) = match ev {
        WatchEvent::Added(o) => ("ADDED", o),
        WatchEvent::Modified(o) => ("MODIFIED", o),
        WatchEvent::Deleted(o) => ("DELETED", o),
        WatchEvent::Bookmark(b) => return ("BOOKMARK".into(), b.metadata.resource_version.clone()),
        WatchEvent::Error(e) => return ("ERROR".into(), e.code.to_string()),
    };
    (kind.into(), obj.metadata.name.clone().unwrap_or_default())
}

async fn next<S>(stream: &mut S) -> (String, String)
where
    S: futures::Stream<Item = Result<WatchEvent<ConfigMap>, kube::Error>> + Unpin,
{
    let ev = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("watch event within 5s")
        .expect("stream open")
        .expect("event decodes");
    name_of(&ev)
}

#[tokio::test]
async fn watch_from_a_version_replays_later_changes_in_order() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let first = cms
        .create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let rv = first.metadata.resource_version.clone().unwrap();
    cms.create(&PostParams::default(), &cm("b", json!({})))
        .await
        .unwrap();
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "2"}})),
    )
    .await
    .unwrap();
    cms.delete("b", &DeleteParams::default()).await.unwrap();

    let mut stream = cms
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    assert_eq!(next(&mut stream).await, ("ADDED".into(), "b".into()));
    assert_eq!(next(&mut stream).await, ("MODIFIED".into(), "a".into()));
    assert_eq!(next(&mut stream).await, ("DELETED".into(), "b".into()));
    // Live changes arrive too.
    cms.create(&PostParams::default(), &cm("c", json!({})))
        .await
        .unwrap();
    assert_eq!(next(&mut stream).await, ("ADDED".into(), "c".into()));
}

#[tokio::test]
async fn watch_without_version_starts_with_the_current_state() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    cms.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let mut stream = cms
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    assert_eq!(next(&mut stream).await, ("ADDED".into(), "a".into()));
}

#[tokio::test]
async fn label_selected_watch_sees_objects_enter_and_leave_the_selection() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let start = cms
        .create(&PostParams::default(), &cm("other", json!({})))
        .await
        .unwrap();
    let rv = start.metadata.resource_version.unwrap();
    let wp = WatchParams::default().labels("team in (a,b)");
    let mut stream = cms.watch(&wp, &rv).await.unwrap().boxed();
    cms.create(&PostParams::default(), &cm("x", json!({"team": "c"})))
        .await
        .unwrap();
    cms.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": "a"}}})),
    )
    .await
    .unwrap();
    cms.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "2"}})),
    )
    .await
    .unwrap();
    cms.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": null}}})),
    )
    .await
    .unwrap();
    assert_eq!(next(&mut stream).await, ("ADDED".into(), "x".into()));
    assert_eq!(next(&mut stream).await, ("MODIFIED".into(), "x".into()));
    assert_eq!(next(&mut stream).await, ("DELETED".into(), "x".into()));
}

#[tokio::test]
async fn field_selected_watch_follows_one_object() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let wp = WatchParams::default().fields("metadata.name=b");
    let mut stream = cms.watch(&wp, "0").await.unwrap().boxed();
    cms.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &cm("b", json!({})))
        .await
        .unwrap();
    assert_eq!(next(&mut stream).await, ("ADDED".into(), "b".into()));
}

#[tokio::test]
async fn too_old_resource_version_is_410_gone() {
    let server = ApiServer::with_options(ApiServerOptions {
        watch_log_capacity: 3,
        ..Default::default()
    });
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let first = cms
        .create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let old_rv = first.metadata.resource_version.unwrap();
    for i in 0..5 {
        cms.patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": i.to_string()}})),
        )
        .await
        .unwrap();
    }
    let mut stream = cms
        .watch(&WatchParams::default(), &old_rv)
        .await
        .unwrap()
        .boxed();
    let ev = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    match ev {
        WatchEvent::Error(status) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
            assert!(
                status.message.contains("too old resource version"),
                "{}",
                status.message
            );
        }
        other => panic!("expected 410, got {other:?}"),
    }
    assert!(stream.next().await.is_none(), "the watch ends after Gone");
}

#[tokio::test]
async fn bookmarks_carry_the_latest_version() {
    let server = ApiServer::with_options(ApiServerOptions {
        bookmark_interval: Duration::from_millis(50),
        ..Default::default()
    });
    let client = server.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let a = cms
        .create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let mut stream = cms
        .watch(
            &WatchParams {
                bookmarks: true,
                ..Default::default()
            },
            &a.metadata.resource_version.unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    // A change to another resource moves the store's version; the bookmark reports it.
    let secret: Api<k8s_openapi::api::core::v1::Secret> = Api::default_namespaced(client);
    let s = secret
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "s"}})).unwrap(),
        )
        .await
        .unwrap();
    let want: u64 = s.metadata.resource_version.unwrap().parse().unwrap();
    loop {
        let (kind, rv) = next(&mut stream).await;
        if kind == "BOOKMARK" && rv.parse::<u64>().unwrap() >= want {
            break;
        }
    }
}

#[tokio::test]
async fn timeout_seconds_ends_the_watch_after_a_final_bookmark() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let started = std::time::Instant::now();
    let stream = cms
        .watch(&WatchParams::default().timeout(1), "0")
        .await
        .unwrap();
    let events: Vec<_> = tokio::time::timeout(Duration::from_secs(5), stream.collect::<Vec<_>>())
        .await
        .expect("the watch ends within 5s");
    assert!(started.elapsed() >= Duration::from_secs(1));
    let kinds: Vec<_> = events
        .iter()
        .map(|e| name_of(e.as_ref().unwrap()).0)
        .collect();
    assert_eq!(kinds, ["BOOKMARK"]);
}

#[tokio::test]
async fn kube_runtime_watcher_lists_follows_and_relists_after_gone() {
    let server = ApiServer::with_options(ApiServerOptions {
        watch_log_capacity: 2,
        ..Default::default()
    });
    let client = server.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    for n in ["a", "b", "c"] {
        cms.create(&PostParams::default(), &cm(n, json!({})))
            .await
            .unwrap();
    }
    // Page size 2 exercises limit/continue in the initial list.
    let cfg = watcher::Config::default().page_size(2);
    let mut events = watcher(cms.clone(), cfg).boxed();
    let mut initial = Vec::new();
    loop {
        match events.try_next().await.unwrap().unwrap() {
            watcher::Event::InitApply(o) => initial.push(o.metadata.name.unwrap()),
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(initial, ["a", "b", "c"]);
    cms.create(&PostParams::default(), &cm("d", json!({})))
        .await
        .unwrap();
    let applied = loop {
        if let watcher::Event::Apply(o) = events.try_next().await.unwrap().unwrap() {
            break o.metadata.name.unwrap();
        }
    };
    assert_eq!(applied, "d");

    // After a restart with compaction the watcher's version is gone: it re-lists and carries on.
    cms.create(&PostParams::default(), &cm("e", json!({})))
        .await
        .unwrap();
    server.restart_watches();
    let (mut relisted, mut saw_gone) = (false, false);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while tokio::time::Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_secs(5), events.next())
            .await
            .unwrap()
            .unwrap()
        {
            Ok(watcher::Event::InitDone) => relisted = true,
            Ok(watcher::Event::Apply(o)) if relisted && o.metadata.name.as_deref() == Some("f") => {
                break;
            }
            Ok(_) => {}
            Err(watcher::Error::WatchError(status)) => {
                assert_eq!(status.code, 410);
                saw_gone = true;
            }
            Err(other) => panic!("unexpected watcher error {other:?}"),
        }
        if relisted {
            cms.create(&PostParams::default(), &cm("f", json!({})))
                .await
                .ok();
        }
    }
    assert!(saw_gone && relisted, "the watcher got 410 and re-listed");
}

#[tokio::test]
async fn kube_runtime_streaming_list_gets_initial_events_end_bookmark() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    cms.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let mut events = watcher(cms.clone(), watcher::Config::default().streaming_lists()).boxed();
    let mut seen = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(5), events.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            watcher::Event::InitApply(o) => seen.push(o.metadata.name.unwrap()),
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(seen, ["a"]);
}
