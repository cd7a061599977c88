//! The test operator (tests/test_operator/, package e2e/testop/) on real pods:
//!
//! - CSV phases from real readiness: a version whose pod never becomes Ready, and one whose pod
//!   crash-loops, end `Failed` as OLM reports them (reason, and a message naming the
//!   Deployment); switching to the channel of the fixed version recovers;
//! - certificates proven by the API server itself: the validating webhook admits and denies, the
//!   conversion webhook converts between the two served versions on a read, the aggregated API
//!   answers through the aggregator — over TLS with the CA olm-rs generated — and all of it again
//!   after a forced rotation (the `<deployment>-service-cert` Secret deleted: olm-rs issues a new
//!   CA, the Deployment rolls to it);
//! - the Operator lists the webhook configurations; the operands, which the operator's own
//!   account may not patch, are reported refused on the CSV, once (docs/operator-api.md §5).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use kube::api::{DeleteParams, PostParams};
use kube::core::DynamicObject;
use serde_json::{Value, json};

use crate::cluster::{self, Cluster, Progress, field, text};
use crate::journeys::{wait_catalog_ready, wait_gone, wait_installed};
use crate::real_control_plane::images;
use crate::real_control_plane::real_node::RealNode;

const PACKAGE: &str = "olm-rs-testop";
const DEPLOYMENT: &str = "olm-rs-testop";
const FIXED: &str = "olm-rs-testop.v0.4.0";
const NEVER_READY: &str = "olm-rs-testop.v0.2.0";
const CRASH_LOOP: &str = "olm-rs-testop.v0.3.0";
const VERSIONS: [&str; 4] = ["0.1.0", "0.2.0", "0.3.0", "0.4.0"];

/// Pushes the test operator's image under each version's tag (`example.com/…` is mirrored to
/// the node's registry) and its catalog image; returns the catalog image.
pub async fn push_images(node: &RealNode) -> anyhow::Result<String> {
    let operator = images::operator_image(Path::new(env!("CARGO_BIN_EXE_olm-rs-test-operator")))?;
    for version in VERSIONS {
        operator
            .push(&node.registry, "olm-rs-test-operator", version)
            .await?;
    }
    let base = images::olm_rs_image(Path::new(env!("CARGO_BIN_EXE_olm-rs")))?;
    let catalog_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/testop/catalog");
    images::catalog_image(&base, &catalog_dir)?
        .push(&node.registry, "olm-rs-testop-catalog", "v1")
        .await?;
    Ok(format!("{}/olm-rs-testop-catalog:v1", node.registry.host()))
}

/// A namespace with an all-namespaces OperatorGroup and the test operator's catalog, ready.
pub async fn prepare(c: &Cluster, catalog_image: &str) -> anyhow::Result<String> {
    let ns = c.create_namespace("olm-rs-e2e-testop-").await?;
    c.create(
        &cluster::operator_groups(),
        &ns,
        json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
               "metadata": {"name": "all"}, "spec": {}}),
    )
    .await?;
    let mut catalog = crate::fixtures::image_catalog(&ns, "testop", catalog_image);
    catalog["spec"]["displayName"] = json!("olm-rs test operator");
    c.create(&cluster::catalog_sources(), &ns, catalog).await?;
    wait_catalog_ready(c, &ns, "testop").await?;
    Ok(ns)
}

fn subscription(ns: &str, channel: &str) -> Value {
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "Subscription",
        "metadata": {"name": "testop", "namespace": ns},
        "spec": {"name": PACKAGE, "channel": channel, "source": "testop",
                 "sourceNamespace": ns, "installPlanApproval": "Automatic"},
    })
}

/// A bad version installed from `channel` fails as OLM reports it; `stable` recovers.
pub async fn bad_version_fails_then_recovers(
    c: &Cluster,
    ns: &str,
    channel: &str,
    csv: &str,
) -> anyhow::Result<()> {
    c.create(&cluster::subscriptions(), ns, subscription(ns, channel))
        .await?;
    let started = Instant::now();
    // First `Installing / InstallSucceeded` (applied), then `InstallWaiting` naming the
    // Deployment that is not available.
    let waiting = c
        .wait_for(format!("{csv} to wait for its Deployment"), || async {
            let Some(csv) = c.get(&cluster::csvs(), ns, csv).await? else {
                return Ok(Progress::Pending("absent".to_owned()));
            };
            let (phase, reason) = (text(&csv, "/status/phase"), text(&csv, "/status/reason"));
            if phase == "Installing" && reason == "InstallWaiting" {
                Ok(Progress::Done(text(&csv, "/status/message").to_owned()))
            } else {
                Ok(Progress::Pending(format!("{phase} / {reason}")))
            }
        })
        .await?;
    // OLM's words: the Deployment that is not available, or (its APIService checked first
    // once the Deployment was Available for a moment) "apiServices not installed".
    ensure!(
        waiting.contains(DEPLOYMENT) || waiting == "apiServices not installed",
        "while its pod is not ready, {csv} says InstallWaiting / {waiting}"
    );
    println!("e2e-node:   {csv}: Installing / InstallWaiting / {waiting}");
    // Never ready: progressDeadlineSeconds (30) passes, the CSV fails for good with
    // `InstallCheckFailed`. Crash-looping: the pod is Ready for 20 s at a time, so the CSV flaps as in
    // OLM — Succeeded, then `Failed / ComponentUnhealthy` ("installing: waiting for deployment
    // …", or "apiServices not installed" when the APIService is checked first), a reinstall;
    // the check waits for a failure naming the Deployment. The CSV's conditions keep every phase it passed, so a short-lived `Failed` is
    // seen too.
    // A crash-looping pod comes back after a growing back-off: a cycle may pass unseen, so the
    // failure gets several cycles' time.
    let (reason, message) = c
        .wait_for_within(
            Duration::from_secs(300),
            format!("{csv} to fail"),
            || async {
                let Some(csv) = c.get(&cluster::csvs(), ns, csv).await? else {
                    return Ok(Progress::Pending("absent".to_owned()));
                };
                // A failure names the Deployment itself, or it is the APIService's
                // ("apiServices not installed": the aggregator saw the pod go before the
                // Deployment's status did) and the reinstall right after it names the
                // Deployment. The second order has become the usual one since this stop's
                // merges (session note); both are OLM's words.
                let names = |c: &Value| {
                    c["message"]
                        .as_str()
                        .is_some_and(|m| m.contains(DEPLOYMENT))
                };
                let all: Vec<Value> = field(&csv, "/status/conditions")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let failed = (0..all.len()).rev().find_map(|i| {
                    let (c, next) = (&all[i], all.get(i + 1));
                    let reinstall = next.filter(|n| {
                        c["message"] == "apiServices not installed"
                            && n["phase"] == "Pending"
                            && names(n)
                    });
                    let message = if names(c) { Some(c) } else { reinstall }?;
                    (c["phase"] == "Failed").then(|| {
                        (
                            c["reason"].as_str().unwrap_or_default().to_owned(),
                            message["message"].as_str().unwrap_or_default().to_owned(),
                        )
                    })
                });
                Ok(match failed {
                    Some(failed) => Progress::Done(failed),
                    None => Progress::Pending(format!("phase {}", text(&csv, "/status/phase"))),
                })
            },
        )
        .await?;
    println!(
        "e2e-node:   {csv} ({channel}) Failed {:.0}s after subscribing: {reason}: {message}",
        started.elapsed().as_secs_f64()
    );
    let as_olm = match channel {
        "never-ready" => {
            reason == "InstallCheckFailed" && message.starts_with("install failed: deployment")
        }
        _ => reason == "ComponentUnhealthy" || reason == "InstallCheckFailed",
    };
    ensure!(
        as_olm && message.contains(DEPLOYMENT),
        "{csv} failed with {reason}: {message}, not as OLM reports it (naming the Deployment)"
    );
    c.merge_patch(
        &cluster::subscriptions(),
        ns,
        "testop",
        json!({"spec": {"channel": "stable"}}),
    )
    .await?;
    // As in OLM, a Failed CSV is not replaced under the Default upgrade strategy: the fixed
    // version waits in Pending (the crash-looping one is Succeeded at moments, so only the
    // never-ready one shows it reliably). The OperatorGroup's `TechPreviewUnsafeFailForward`
    // lets it replace the failed one (docs/operator-groups.md).
    if channel == "never-ready" {
        let pending = wait_phase(c, ns, FIXED, "Pending", Duration::from_secs(120)).await?;
        tokio::time::sleep(Duration::from_secs(5)).await;
        let still = c.get(&cluster::csvs(), ns, FIXED).await?;
        ensure!(
            still
                .as_ref()
                .is_some_and(|s| text(s, "/status/phase") == "Pending"),
            "under the Default upgrade strategy {FIXED} should wait while {csv} is Failed: {:?}",
            still.map(|s| s.data["status"].clone())
        );
        println!(
            "e2e-node:   Default strategy: {FIXED} waits: {} / {}",
            text(&pending, "/status/reason"),
            text(&pending, "/status/message")
        );
    }
    c.merge_patch(
        &cluster::operator_groups(),
        ns,
        "all",
        json!({"spec": {"upgradeStrategy": "TechPreviewUnsafeFailForward"}}),
    )
    .await?;
    wait_installed(c, ns, "testop", FIXED).await?;
    println!("e2e-node:   fail forward: {FIXED} Succeeded, replacing {csv}");
    // Back to Default for what follows.
    c.merge_patch(
        &cluster::operator_groups(),
        ns,
        "all",
        json!({"spec": {"upgradeStrategy": "Default"}}),
    )
    .await?;
    Ok(())
}

/// The webhooks and the aggregated API answer through the API server, before and after a
/// forced rotation.
pub async fn certificates_proven_by_the_api_server(c: &Cluster, ns: &str) -> anyhow::Result<()> {
    calls_succeed(c, ns, "before").await?;
    let secrets = c.api(&cluster::core("", "v1", "Secret", "secrets"), ns);
    let secret = format!("{DEPLOYMENT}-service-cert");
    let before = ca_hash(c, ns).await?;
    secrets
        .delete(&secret, &DeleteParams::default())
        .await
        .with_context(|| format!("deleting Secret {secret}"))?;
    let started = Instant::now();
    let after = c
        .wait_for("the Deployment to roll to a new CA", || async {
            let hash = ca_hash(c, ns).await?;
            let rolled = rolled_out(c, ns).await?;
            if hash != before && !hash.is_empty() && rolled {
                Ok(Progress::Done(hash))
            } else {
                Ok(Progress::Pending(format!(
                    "olmcahash {hash}, rolled out {rolled}"
                )))
            }
        })
        .await?;
    wait_installed(c, ns, "testop", FIXED).await?;
    println!(
        "e2e-node:   rotation: olmcahash {}… → {}…, rolled out in {:.1}s",
        &before[..before.len().min(12)],
        &after[..after.len().min(12)],
        started.elapsed().as_secs_f64()
    );
    // Cut-over (docs/certificates.md §10.2): calls may fail while old pods still serve the
    // old certificate; once the rollout is done they succeed again.
    c.wait_for(
        "webhook and APIService calls after the rotation",
        || async {
            match calls_succeed(c, ns, "after").await {
                Ok(()) => Ok(Progress::Done(())),
                Err(err) => Ok(Progress::Pending(format!("{err:#}"))),
            }
        },
    )
    .await
}

/// The three calls the API server makes to the operator over TLS.
async fn calls_succeed(c: &Cluster, ns: &str, when: &str) -> anyhow::Result<()> {
    let v1 = cluster::core("testop.olm-rs.dev", "v1", "Gadget", "gadgets");
    let v1alpha1 = cluster::core("testop.olm-rs.dev", "v1alpha1", "Gadget", "gadgets");
    let name = |base: &str| format!("{base}-{when}");
    // Validating webhook: denied, then admitted.
    let denied = create(
        c,
        &v1,
        ns,
        json!({"apiVersion": "testop.olm-rs.dev/v1",
        "kind": "Gadget", "metadata": {"name": name("denied")}, "spec": {"deny": true}}),
    )
    .await;
    match denied {
        Err(kube::Error::Api(status)) if status.message.contains("denied") => {}
        other => bail!("a Gadget with spec.deny was not denied by the webhook: {other:?}"),
    }
    // Conversion webhook: written as v1alpha1 (size), read as v1 (replicas).
    create(
        c,
        &v1alpha1,
        ns,
        json!({"apiVersion": "testop.olm-rs.dev/v1alpha1",
        "kind": "Gadget", "metadata": {"name": name("converted")}, "spec": {"size": 3}}),
    )
    .await
    .map_err(|e| {
        anyhow::anyhow!("creating a v1alpha1 Gadget (validating + conversion webhooks): {e}")
    })?;
    let read = c
        .get(&v1, ns, &name("converted"))
        .await?
        .context("the converted Gadget is gone")?;
    ensure!(
        field(&read, "/spec/replicas") == Some(&json!(3)),
        "a v1alpha1 Gadget with spec.size 3 reads as v1 {}",
        read.data
    );
    let back = c
        .get(&v1alpha1, ns, &name("converted"))
        .await?
        .context("the converted Gadget is gone")?;
    ensure!(
        field(&back, "/spec/size") == Some(&json!(3)),
        "read back as v1alpha1: {}",
        back.data
    );
    // Aggregated API through the aggregator.
    let request = http::Request::get("/apis/api.testop.olm-rs.dev/v1").body(Vec::new())?;
    let discovery: Value = serde_json::from_str(&c.client.request_text(request).await?)?;
    ensure!(
        discovery["resources"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["name"] == "reports")),
        "GET /apis/api.testop.olm-rs.dev/v1 through the aggregator: {discovery}"
    );
    let request = http::Request::get("/apis/api.testop.olm-rs.dev/v1/reports").body(Vec::new())?;
    let reports: Value = serde_json::from_str(&c.client.request_text(request).await?)?;
    ensure!(
        reports["items"].as_array().is_some_and(|i| !i.is_empty()),
        "the aggregated API lists no reports: {reports}"
    );
    for gadget in ["converted"] {
        let _ = c
            .api(&v1, ns)
            .delete(&name(gadget), &DeleteParams::default())
            .await;
    }
    Ok(())
}

async fn create(
    c: &Cluster,
    resource: &kube::core::ApiResource,
    ns: &str,
    object: Value,
) -> Result<DynamicObject, kube::Error> {
    let object: DynamicObject = serde_json::from_value(object).map_err(kube::Error::SerdeError)?;
    c.api(resource, ns)
        .create(&PostParams::default(), &object)
        .await
}

/// The `olmcahash` annotation of the operator Deployment's pod template.
async fn ca_hash(c: &Cluster, ns: &str) -> anyhow::Result<String> {
    let deployment = c
        .get(&cluster::deployments(), ns, DEPLOYMENT)
        .await?
        .context("the operator Deployment is gone")?;
    Ok(text(&deployment, "/spec/template/metadata/annotations/olmcahash").to_owned())
}

/// Whether the operator Deployment's rollout is complete (every replica updated and available,
/// none left of the old template).
async fn rolled_out(c: &Cluster, ns: &str) -> anyhow::Result<bool> {
    let d = c
        .get(&cluster::deployments(), ns, DEPLOYMENT)
        .await?
        .context("the operator Deployment is gone")?;
    let n = |p: &str| field(&d, p).and_then(Value::as_i64).unwrap_or(0);
    Ok(n("/status/observedGeneration") >= n("/metadata/generation")
        && n("/status/updatedReplicas") == n("/spec/replicas")
        && n("/status/availableReplicas") == n("/spec/replicas")
        && n("/status/replicas") == n("/spec/replicas"))
}

/// Waits until CSV `name` is in `phase`; returns it.
async fn wait_phase(
    c: &Cluster,
    ns: &str,
    name: &str,
    phase: &str,
    timeout: Duration,
) -> anyhow::Result<DynamicObject> {
    let started = Instant::now();
    loop {
        let csv = c.get(&cluster::csvs(), ns, name).await?;
        let now = csv
            .as_ref()
            .map(|csv| text(csv, "/status/phase").to_owned())
            .unwrap_or_else(|| "absent".to_owned());
        if now == phase {
            return csv.context("unreachable: a CSV in a phase exists");
        }
        if started.elapsed() > timeout {
            let status = csv.and_then(|c| c.data.get("status").cloned());
            bail!(
                "CSV {name} is {now}, not {phase}, after {}s: {status:?}",
                timeout.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The Operator API with the chart's RBAC (docs/operator-api.md §2, §5): the Operator lists
/// the webhook configurations the CSV made. The operator's account may list and watch its
/// Gadgets but not patch them (its CSV grants get, list, watch), so olm-rs, acting on operands
/// as that account, cannot label them: it says so once, with a Warning Event on the CSV, and
/// the rest of the Operator is kept.
async fn operator_lists_webhooks_and_tells_refused_operands(
    c: &Cluster,
    ns: &str,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let operators = cluster::core("operators.coreos.com", "v1", "Operator", "operators");
    let name = format!("{PACKAGE}.{ns}");
    let refs = c
        .wait_for("the Operator to list the webhook configuration", || async {
            let op = c.get_cluster_scoped(&operators, &name).await?;
            let refs = op
                .as_ref()
                .and_then(|o| field(o, "/status/components/refs"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let webhook = refs
                .iter()
                .any(|r| r["kind"] == "ValidatingWebhookConfiguration");
            let csv = refs
                .iter()
                .any(|r| r["kind"] == "ClusterServiceVersion" && r["name"] == FIXED);
            Ok(if webhook && csv {
                Progress::Done(refs)
            } else {
                Progress::Pending(format!("refs {refs:?}"))
            })
        })
        .await?;
    let events = c.api(&cluster::core("", "v1", "Event", "events"), ns);
    let told = c
        .wait_for(
            "a Warning Event naming the refused operand patch",
            || async {
                let list = events.list(&Default::default()).await?;
                let found = list.items.into_iter().find(|e| {
                    e.data["reason"] == "OperandsForbidden"
                        && e.data["involvedObject"]["name"] == FIXED
                        && text(e, "/message").contains("may not patch gadgets.testop.olm-rs.dev")
                });
                Ok(match found {
                    Some(e) => Progress::Done(text(&e, "/message").to_owned()),
                    None => Progress::Pending("no OperandsForbidden Event yet".to_owned()),
                })
            },
        )
        .await?;
    ensure!(
        !refs.iter().any(|r| r["kind"] == "Gadget"),
        "an operand listed though it could not be labelled: {refs:?}"
    );
    println!(
        "e2e-node:   Operator {name}: {} components, webhook configuration among them; \
         operands refused, told in {:.1}s: {told}",
        refs.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Everything, in one namespace: never-ready → stable, the calls and a rotation, then
/// uninstall, crash-loop → stable.
pub async fn run(c: &Cluster, node: &RealNode) -> anyhow::Result<()> {
    let image = push_images(node).await?;
    let ns = prepare(c, &image).await?;
    let result = async {
        bad_version_fails_then_recovers(c, &ns, "never-ready", NEVER_READY).await?;
        certificates_proven_by_the_api_server(c, &ns).await?;
        operator_lists_webhooks_and_tells_refused_operands(c, &ns).await?;
        // Uninstall as OLM documents it; the operator's pod goes with its CSV.
        c.delete(&cluster::subscriptions(), &ns, "testop").await?;
        c.delete(&cluster::csvs(), &ns, FIXED).await?;
        wait_gone(c, &cluster::deployments(), &ns, DEPLOYMENT).await?;
        bad_version_fails_then_recovers(c, &ns, "crash-loop", CRASH_LOOP).await
    }
    .await;
    c.delete_namespace(&ns).await;
    result
}
