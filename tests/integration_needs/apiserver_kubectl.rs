//! The sandbox over real HTTP: a `kube::Client` built from the generated kubeconfig, and the
//! real `kubectl` binary (get with server-side tables, apply client- and server-side, patch,
//! wait, delete, get -w). The kubectl tests need `kubectl` on PATH; without it they say so on
//! stderr and pass.

use crate::apiserver_common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use apiserver_common::eventually;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use olm_rs::sandbox::{ApiServer, ServingHandle};
use serde_json::json;
use tokio::process::Command;

async fn serve() -> (ApiServer, ServingHandle) {
    let server = ApiServer::new();
    let handle = server.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    (server, handle)
}

async fn kube_client_over_http_from_the_generated_kubeconfig() {
    let (_server, handle) = serve().await;
    assert!(handle.addr().ip().is_loopback() && handle.addr().port() != 0);
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&handle.kubeconfig_yaml()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let mut events = cms
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let c: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "over-http"}})).unwrap();
    cms.create(&PostParams::default(), &c).await.unwrap();
    let ev = tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(ev, WatchEvent::Added(c) if c.metadata.name.as_deref() == Some("over-http")));
    // Shutting down closes open watches too.
    handle.shutdown().await;
    let end = tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .expect("watch closed");
    assert!(end.is_none() || end.unwrap().is_err());
}

/// How to get kubectl, in a skipped test's reason.
pub const KUBECTL_INSTALL: &str = "Debian: apt-get install kubernetes-client";

/// `kubectl` with a private kubeconfig, cache and HOME.
struct Kubectl {
    dir: tempfile::TempDir,
}

impl Kubectl {
    /// kubectl for `handle`'s server; the test is skipped without kubectl on PATH.
    fn find(handle: &ServingHandle) -> Self {
        crate::common::skip::require_program("kubectl", KUBECTL_INSTALL);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("kubeconfig"), handle.kubeconfig_yaml()).unwrap();
        Kubectl { dir }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig")
            .arg(self.dir.path().join("kubeconfig"))
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .args(args)
            .env("HOME", self.dir.path())
            .env_remove("KUBECONFIG");
        cmd
    }

    /// Runs kubectl; returns stdout, panicking with stderr on failure.
    async fn run(&self, args: &[&str]) -> String {
        let out = self.command(args).output().await.unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(
            out.status.success(),
            "kubectl {args:?} failed:\n{stderr}\n{stdout}"
        );
        stdout.into_owned()
    }

    fn file(&self, name: &str, content: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, content).unwrap();
        p
    }
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A CRD shaped like OLM's ClusterServiceVersion CRD as far as `kubectl get` is concerned.
const CSV_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: clusterserviceversions.operators.coreos.com
spec:
  group: operators.coreos.com
  scope: Namespaced
  names: {kind: ClusterServiceVersion, plural: clusterserviceversions, singular: clusterserviceversion, shortNames: [csv, csvs], categories: [olm]}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Display, type: string, jsonPath: .spec.displayName}
    - {name: Version, type: string, jsonPath: .spec.version}
    - {name: Release, type: string, jsonPath: .spec.release}
    - {name: Replaces, type: string, jsonPath: .spec.replaces}
    - {name: Phase, type: string, jsonPath: .status.phase}
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#;

const CSV: &str = r#"
apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata: {name: etcd.v0.9.4, namespace: default}
spec: {displayName: etcd, version: 0.9.4, replaces: etcd.v0.9.2}
"#;

fn columns(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

async fn kubectl_get_apply_patch_wait_delete() {
    let (server, handle) = serve().await;
    let k = Kubectl::find(&handle);

    let ns = k.run(&["get", "namespaces"]).await;
    let lines: Vec<_> = ns.lines().collect();
    assert_eq!(columns(lines[0]), ["NAME", "STATUS", "AGE"]);
    assert!(
        lines
            .iter()
            .any(|l| columns(l)[..2] == ["default", "Active"]),
        "{ns}"
    );

    let crd = k.file("crd.yaml", CSV_CRD);
    assert!(
        k.run(&["apply", "-f", path(&crd)])
            .await
            .contains("created")
    );
    let csv = k.file("csv.yaml", CSV);
    assert!(
        k.run(&["apply", "-f", path(&csv)])
            .await
            .contains("clusterserviceversion.operators.coreos.com/etcd.v0.9.4 created")
    );
    let table = k.run(&["get", "csv"]).await;
    let lines: Vec<_> = table.lines().collect();
    assert_eq!(
        columns(lines[0]),
        ["NAME", "DISPLAY", "VERSION", "RELEASE", "REPLACES", "PHASE"]
    );
    assert_eq!(
        columns(lines[1]),
        ["etcd.v0.9.4", "etcd", "0.9.4", "etcd.v0.9.2"]
    );

    // A second client-side apply computes a merge patch from last-applied-configuration.
    let changed = k.file(
        "csv2.yaml",
        &CSV.replace("displayName: etcd", "displayName: etcd-operator"),
    );
    assert!(
        k.run(&["apply", "-f", path(&changed)])
            .await
            .contains("configured")
    );
    k.run(&[
        "patch",
        "csv",
        "etcd.v0.9.4",
        "--type",
        "merge",
        "--subresource",
        "status",
        "-p",
        r#"{"status":{"phase":"Succeeded"}}"#,
    ])
    .await;
    let row = k.run(&["get", "csv", "etcd.v0.9.4", "--no-headers"]).await;
    assert_eq!(
        columns(&row),
        [
            "etcd.v0.9.4",
            "etcd-operator",
            "0.9.4",
            "etcd.v0.9.2",
            "Succeeded"
        ]
    );

    // Built-ins: client-side apply (strategic merge from kubectl's compiled-in types), wait.
    let deploy = k.file(
        "deploy.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: app, image: 'nginx:1'}]}\n",
    );
    k.run(&["apply", "-f", path(&deploy)]).await;
    k.run(&[
        "wait",
        "--for=condition=Available",
        "deployment/web",
        "--timeout=10s",
    ])
    .await;
    std::fs::write(
        &deploy,
        std::fs::read_to_string(&deploy)
            .unwrap()
            .replace("nginx:1", "nginx:2"),
    )
    .unwrap();
    k.run(&["apply", "-f", path(&deploy)]).await;
    let image = k
        .run(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image} {.metadata.generation}",
        ])
        .await;
    assert_eq!(image, "nginx:2 2");

    // Server-side apply through kubectl.
    let ssa = k.file(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ssa}\ndata: {a: '1'}\n",
    );
    assert!(
        k.run(&["apply", "--server-side", "-f", path(&ssa)])
            .await
            .contains("serverside-applied")
    );
    assert_eq!(
        k.run(&["get", "cm", "ssa", "-o", "jsonpath={.data.a}"])
            .await,
        "1"
    );

    k.run(&["delete", "csv", "etcd.v0.9.4"]).await;
    let gone = k
        .command(&["get", "csv", "etcd.v0.9.4"])
        .output()
        .await
        .unwrap();
    assert!(!gone.status.success());
    assert!(String::from_utf8_lossy(&gone.stderr).contains("NotFound"));
    drop(server);
}

async fn kubectl_get_watch_streams_table_rows() {
    let (server, handle) = serve().await;
    let k = Kubectl::find(&handle);
    let mut child = k
        .command(&["get", "configmaps", "-w", "--request-timeout=0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let lines = std::sync::Arc::new(tokio::sync::Mutex::new(Vec::<String>::new()));
    let sink = lines.clone();
    tokio::spawn(async move {
        use tokio::io::AsyncBufReadExt;
        let mut reader = tokio::io::BufReader::new(stdout).lines();
        while let Ok(Some(line)) = reader.next_line().await {
            sink.lock().await.push(line);
        }
    });
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    // kubectl prints nothing for an empty list; wait until its watch is likely open, then write.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for name in ["first", "second"] {
        let c: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}}))
                .unwrap();
        cms.create(&PostParams::default(), &c).await.unwrap();
    }
    let seen = eventually("kubectl -w printed both rows", || {
        let lines = lines.clone();
        async move {
            let l = lines.lock().await.clone();
            (l.iter().any(|x| x.starts_with("second"))).then_some(l)
        }
    })
    .await;
    assert_eq!(columns(&seen[0]), ["NAME", "AGE"]);
    assert!(seen.iter().any(|l| l.starts_with("first")));
    assert_eq!(
        seen.iter().filter(|l| l.starts_with("NAME")).count(),
        1,
        "one header: {seen:?}"
    );
    child.kill().await.ok();
}

crate::trials! {
    current kube_client_over_http_from_the_generated_kubeconfig,
    current kubectl_get_apply_patch_wait_delete,
    current kubectl_get_watch_streams_table_rows,
}
