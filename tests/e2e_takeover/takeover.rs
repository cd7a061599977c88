//! The move (issue #29), in four checks that build on each other:
//!
//! 1. `takeover::olm_installs` — real OLM v0.31 installs, from three catalogs served by
//!    `olm-rs catalog serve` at an address (CatalogSources in `olm`): the test operator
//!    (tests/test_operator/: a validating and a conversion webhook, an aggregated API) in
//!    `operators` for all namespaces, its CSV copied everywhere; a package with a dependency
//!    (`tk-dep`); the demo with `Subscription.spec.config` env and resources (`tk-config`); the
//!    demo on a Manual Subscription whose upgrade plan waits for approval (`tk-manual`); the
//!    test operator's own-namespace package (a validating webhook, an aggregated API, no
//!    conversion webhook) for `tk-own` alone (own_namespace.rs), its webhook configuration
//!    and APIService `Available`, the API server calling both.
//! 2. `takeover::move_to_olm_rs` — OLM stopped, olm-rs installed by its chart over OLM's
//!    namespace (docs/migrating-from-olm.md §2) and left to run: nothing recreated, no
//!    Deployment generation or template moved, no pod restarted, no content changed (Secrets,
//!    Services, ServiceAccounts, RBAC — OLM's in `kube-system` too —, webhook configurations
//!    and APIServices with their `caBundle`, CRDs, copied CSVs, OperatorConditions), no CSV out
//!    of `Succeeded`, no InstallPlan made; every write olm-rs made, counted by kind and verb
//!    from the audit log; `tk-own`'s webhook still denies and its aggregated API still answers.
//! 3. `takeover::upgrades_under_olm_rs` — OLM's waiting plan approved under olm-rs completes; a
//!    channel switch upgrades, keeping the Subscription's config; a Subscription OLM made,
//!    deleted and made again, adopts the CSV OLM installed (resubscribe.rs).
//! 4. `takeover::back_to_olm` — olm-rs scaled to zero, OLM started again: it adopts everything
//!    (nothing recreated or restarted, CSVs `Succeeded`, Subscriptions `AtLatestKnown`), the API
//!    server still calls `tk-own`'s operator, and OLM's next upgrade works.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::{Value, json};

use crate::audit;
use crate::chart_install;
use crate::cluster::{self, Cluster, ControllerAccess, Progress, Settings, field, text};
use crate::fixtures::{self, DEPENDENT, V010, V020, V030};
use crate::journeys::{PhaseRecorder, wait_catalog_ready, wait_gone, wait_installed};
use crate::own_namespace;
use crate::real_control_plane::process::Process;
use crate::real_control_plane::real_node::{NODE_IP, RealNode};
use crate::real_control_plane::real_olm::{self, RealOlm};
use crate::real_control_plane::{ControlPlane, free_ports, images};
use crate::resubscribe;
use crate::snapshot::{self, Snapshot};
use crate::waits::{
    approve, wait_csv, wait_deployments_available, wait_plan_phase, wait_plan_waiting,
};

/// The checks, in the order they run (`--list` prints them).
pub const CHECKS: &[&str] = &[
    "takeover::olm_installs",
    "takeover::move_to_olm_rs",
    "takeover::upgrades_under_olm_rs",
    "takeover::back_to_olm",
];

/// The namespaces whose objects are compared.
const NAMESPACES: [&str; 5] = [
    "operators",
    "tk-dep",
    "tk-config",
    "tk-manual",
    own_namespace::NAMESPACE,
];
/// The test's (and OLM's, and the dry run's) user: the admin kubeconfig's certificate.
const ADMIN_USER: &str = "olm-rs-e2e-admin";
/// Who olm-rs's chart runs the controller as.
const CONTROLLER_USER: &str = "system:serviceaccount:olm:olm-rs-controller";
/// How long each controller runs on the other's objects before they are compared: until its
/// writes have stopped for 10 s (a retry backing off up to that is still seen), at least 20 s
/// and at most a minute.
const SETTLE: audit::Settle = audit::Settle {
    at_least: Duration::from_secs(20),
    quiet: Duration::from_secs(10),
    at_most: Duration::from_secs(60),
};
const TESTOP: &str = "olm-rs-testop";
const TESTOP_CSV: &str = "olm-rs-testop.v0.4.0";

/// Runs the checks in order; each after a failed one is not run. Returns the failures.
pub async fn run(
    plane: &ControlPlane,
    node: &RealNode,
    (olm_bin, olm_crds): &(PathBuf, PathBuf),
    filter: Option<&str>,
) -> usize {
    let mut report = crate::SUITE.report();
    let c = Cluster {
        client: plane.client.clone(),
        settings: Settings {
            controller_namespace: "olm".to_owned(),
            operators_namespace: "operators".to_owned(),
            catalog_image: String::new(),
            timeout: Duration::from_secs(180),
            keep: false,
            controller: ControllerAccess::InCluster,
            no_pods: false,
        },
    };

    let started = Instant::now();
    let setup = olm_installs(plane, node, olm_bin, olm_crds, &c).await;
    let (olm, _catalogs) = match setup {
        Ok(running) => {
            report.check(CHECKS[0], started, Ok(()));
            running
        }
        Err(err) => {
            report.check(CHECKS[0], started, Err(err));
            return report.failures;
        }
    };

    let started = Instant::now();
    let result = move_to_olm_rs(plane, node, olm, &c).await;
    let failed = result.is_err();
    report.check(CHECKS[1], started, result);
    if failed {
        return report.failures;
    }

    let started = Instant::now();
    let result = upgrades_under_olm_rs(&c).await;
    let failed = result.is_err();
    report.check(CHECKS[2], started, result);
    if failed || filter.is_some_and(|f| !CHECKS[3].contains(f)) {
        return report.failures;
    }

    let started = Instant::now();
    report.check(CHECKS[3], started, back_to_olm(plane, olm_bin, &c).await);
    report.failures
}

/// Images, OLM's CRDs and quickstart objects, the catalogs, OLM, and every install by OLM.
async fn olm_installs(
    plane: &ControlPlane,
    node: &RealNode,
    olm_bin: &Path,
    olm_crds: &Path,
    c: &Cluster,
) -> anyhow::Result<(RealOlm, Vec<Process>)> {
    let started = Instant::now();
    let olm_rs = Path::new(env!("CARGO_BIN_EXE_olm-rs"));
    images::olm_rs_image(olm_rs)?
        .push(&node.registry, "olm-rs", "dev")
        .await?;
    let operator = images::operator_image(Path::new(env!("CARGO_BIN_EXE_olm-rs-test-operator")))?;
    for version in ["0.1.0", "0.4.0"] {
        operator
            .push(&node.registry, "olm-rs-test-operator", version)
            .await?;
    }
    println!(
        "e2e-takeover:   images pushed in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    real_olm::apply_crds(plane, olm_crds).await?;
    real_olm::apply_quickstart(plane).await?;

    // The catalogs, served on the node's address (pods and OLM's network namespaces reach it).
    let demo_dir = plane.dir.join("catalog-demo");
    fixtures::dependent_catalog(&fixtures::e2e_dir().join("catalog"), &demo_dir)?;
    let testop_dir = fixtures::e2e_dir().join("testop/catalog");
    let own_dir = fixtures::e2e_dir().join("testop/catalog-own");
    let [demo_port, testop_port, own_port] = free_ports::<3>()?;
    let served = [
        ("demo", &demo_dir, demo_port),
        ("testop", &testop_dir, testop_port),
        (own_namespace::CATALOG, &own_dir, own_port),
    ];
    let mut catalogs = Vec::new();
    for (name, dir, port) in served {
        let mut serve = Command::new(olm_rs);
        serve
            .args(["catalog", "serve"])
            .arg(dir)
            .args(["--addr", &format!("{NODE_IP}:{port}")]);
        catalogs.push(Process::spawn(
            &format!("catalog-serve-{name}"),
            serve,
            &plane.dir,
        )?);
    }

    let olm = RealOlm::start(plane, olm_bin, &plane.dir).await?;

    for ns in &NAMESPACES[1..] {
        let namespaces = cluster::core("", "v1", "Namespace", "namespaces");
        let api: Api<DynamicObject> = Api::all_with(c.client.clone(), &namespaces);
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))?;
        api.create(&Default::default(), &object).await?;
        c.create(
            &cluster::operator_groups(),
            ns,
            fixtures::operator_group(ns),
        )
        .await?;
    }
    for (name, _, port) in served {
        c.create(
            &cluster::catalog_sources(),
            "olm",
            json!({
                "apiVersion": "operators.coreos.com/v1alpha1",
                "kind": "CatalogSource",
                "metadata": {"name": name, "namespace": "olm"},
                "spec": {"sourceType": "grpc", "address": format!("{NODE_IP}:{port}"),
                         "displayName": format!("olm-rs takeover {name}"), "publisher": "olm-rs"},
            }),
        )
        .await?;
        wait_catalog_ready(c, "olm", name).await?;
    }

    let global = |sub: &mut Value| sub["spec"]["sourceNamespace"] = json!("olm");
    let mut testop = fixtures::subscription("operators", "testop", "stable", "Automatic", None);
    testop["metadata"]["name"] = json!("testop");
    testop["spec"]["name"] = json!(TESTOP);
    global(&mut testop);
    let mut dependent = fixtures::subscription("tk-dep", "demo", "stable", "Automatic", None);
    dependent["metadata"]["name"] = json!("dependent");
    dependent["spec"]["name"] = json!(DEPENDENT);
    global(&mut dependent);
    let mut config = fixtures::subscription("tk-config", "demo", "stable", "Automatic", None);
    config["spec"]["config"] = json!({
        "env": [{"name": "TAKEOVER", "value": "kept"}],
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"},
                      "limits": {"memory": "64Mi"}},
    });
    global(&mut config);
    let mut manual = fixtures::subscription("tk-manual", "demo", "stable", "Manual", Some(V010));
    global(&mut manual);
    for sub in [
        testop,
        dependent,
        config,
        manual,
        own_namespace::subscription(),
    ] {
        let ns = sub["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        c.create(&cluster::subscriptions(), &ns, sub).await?;
    }

    // The Manual Subscription's first plan, approved; then its upgrade waits.
    let first = wait_plan_waiting(c, "tk-manual", V010).await?;
    approve(c, "tk-manual", &first).await?;
    wait_installed(c, "tk-manual", "demo", V010).await?;
    let upgrade = wait_plan_waiting(c, "tk-manual", V020).await?;
    wait_installed(c, "operators", "testop", TESTOP_CSV).await?;
    wait_installed(c, "tk-dep", "dependent", &format!("{DEPENDENT}.v1.0.0")).await?;
    wait_csv(c, "tk-dep", V020, "Succeeded").await?;
    wait_installed(c, "tk-config", "demo", V020).await?;
    for ns in &NAMESPACES[1..] {
        wait_csv(c, ns, TESTOP_CSV, "Succeeded").await?;
    }
    wait_deployments_available(c, &NAMESPACES).await?;
    own_namespace::wait_installed_by_olm(c).await?;
    own_namespace::calls_succeed(c, "under OLM").await?;
    println!(
        "e2e-takeover:   OLM installed everything in {:.1}s; tk-manual/{upgrade} waits for approval",
        started.elapsed().as_secs_f64()
    );
    Ok((olm, catalogs))
}

/// OLM stopped, olm-rs installed by its chart, left to run; then compared.
async fn move_to_olm_rs(
    plane: &ControlPlane,
    node: &RealNode,
    mut olm: RealOlm,
    c: &Cluster,
) -> anyhow::Result<()> {
    // Let OLM finish what it was doing (status of the last installs).
    audit::settle(
        &plane.audit_log,
        audit::mark(&plane.audit_log),
        ADMIN_USER,
        node_program,
        audit::Settle {
            at_least: Duration::ZERO,
            quiet: Duration::from_secs(5),
            at_most: Duration::from_secs(10),
        },
    )
    .await?;
    olm.check_alive()?;
    olm.stop();
    // docs/migrating-from-olm.md §2 step 3: helm adopts the two OperatorGroups.
    for (ns, name) in [("operators", "global-operators"), ("olm", "olm-operators")] {
        c.merge_patch(
            &cluster::operator_groups(),
            ns,
            name,
            json!({"metadata": {
                "annotations": {"meta.helm.sh/release-name": "olm-rs",
                                "meta.helm.sh/release-namespace": "olm"},
                "labels": {"app.kubernetes.io/managed-by": "Helm"}}}),
        )
        .await?;
    }
    let before = snapshot::take(&c.client, &NAMESPACES).await?;
    own_namespace::ensure_compared(&before)?;
    let dry_run_problems = dry_run(plane, c, &before).await?;
    let phases = PhaseRecorder::everywhere(&c.client).await?;
    let mark = audit::mark(&plane.audit_log);

    let started = Instant::now();
    chart_install::helm_install(
        plane,
        node,
        &["packageServer.enabled=false".to_owned()],
        &[],
    )?;
    let pods = chart_install::wait_pods_ready(&plane.client, 1, c.settings.timeout).await?;
    println!(
        "e2e-takeover:   olm-rs {pods:?} Ready {:.1}s after helm install",
        started.elapsed().as_secs_f64(),
    );
    let (ran, _) =
        audit::settle(&plane.audit_log, mark, CONTROLLER_USER, |_| false, SETTLE).await?;
    let ran = started.elapsed().max(ran);
    let after = snapshot::take(&c.client, &NAMESPACES).await?;

    let writes = audit::writes_since(&plane.audit_log, mark, CONTROLLER_USER)?;
    print_writes(&writes, &before, &after, ran);

    let mut problems = snapshot::differences(&before, &after, labelled_by_olm_rs);
    let labelled = snapshot::differences(&before, &after, |_, _| false).len() - problems.len();
    println!(
        "e2e-takeover:   {labelled} webhook configurations given their Operator's component \
         label (docs/migrating-from-olm.md §6)"
    );
    problems.extend(dry_run_problems);
    for (key, seen) in &before {
        if let Some(csv) = key.strip_prefix("ClusterServiceVersion ") {
            let passed = phases.phases_of(csv);
            if passed.iter().any(|p| p != "Succeeded") {
                problems.push(format!("{key}: went through {passed:?}"));
            }
            if seen.phase != "Succeeded" {
                problems.push(format!("{key}: was {} before the move", seen.phase));
            }
        }
    }
    for write in &writes {
        if write.resource == "deployments" {
            problems.push(format!(
                "olm-rs {} Deployment {}/{}",
                write.verb, write.namespace, write.name
            ));
        }
    }
    if !problems.is_empty() {
        bail!(
            "after {:.0}s of olm-rs, {} differences:\n    {}",
            ran.as_secs_f64(),
            problems.len(),
            problems.join("\n    ")
        );
    }
    println!(
        "e2e-takeover:   {} objects compared: none recreated, rewritten or restarted",
        before.len()
    );
    own_namespace::calls_succeed(c, "under olm-rs").await
}

/// `olm-rs takeover --dry-run` on the cluster OLM left: it reports, and nothing is written (no
/// compared object's resourceVersion moves). Returns what it got wrong: a workload spec it would
/// change, or a write that got through.
async fn dry_run(
    plane: &ControlPlane,
    c: &Cluster,
    before: &Snapshot,
) -> anyhow::Result<Vec<String>> {
    let started = Instant::now();
    let mark = audit::mark(&plane.audit_log);
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_olm-rs"))
        .args(["takeover", "--dry-run", "--for", "20s"])
        .env("KUBECONFIG", &plane.admin_kubeconfig)
        .output()
        .await
        .context("running olm-rs takeover --dry-run")?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    ensure!(
        output.status.success() && stdout.contains("objects would change"),
        "olm-rs takeover --dry-run failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    println!(
        "e2e-takeover:   olm-rs takeover --dry-run ({:.1}s):",
        started.elapsed().as_secs_f64()
    );
    for line in stdout.lines() {
        println!("e2e-takeover:     {line}");
    }
    let mut problems: Vec<String> = stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("Deployment ") && l.contains("/spec"))
        .map(|l| {
            format!(
                "the dry run says olm-rs would change a workload: {}",
                l.trim()
            )
        })
        .collect();
    // The dry run ran as the admin, and the test wrote nothing meanwhile: every write of the
    // admin's since the mark is the dry run's — but for the node's programs, which share the
    // admin's certificate and name themselves (`kubelet/v1.36…`; kube-rs sends no user agent)
    // — and each must have gone out with dryRun=All.
    let writes: Vec<audit::Write> = audit::writes_since(&plane.audit_log, mark, ADMIN_USER)?
        .into_iter()
        .filter(|w| !node_program(w))
        .collect();
    let dry = writes
        .iter()
        .filter(|w| w.uri.contains("dryRun=All"))
        .count();
    problems.extend(
        writes
            .iter()
            .filter(|w| !w.uri.contains("dryRun=All") && !w.resource.ends_with("reviews"))
            .map(|w| format!("the dry run wrote for real: {} {}", w.verb, w.uri)),
    );
    println!(
        "e2e-takeover:   the dry run sent {dry} writes, all with dryRun=All ({} compared objects)",
        before.len()
    );
    let after = snapshot::take(&c.client, &NAMESPACES).await?;
    problems.extend(
        snapshot::differences(before, &after, |_, _| false)
            .into_iter()
            .map(|d| format!("during the dry run: {d}")),
    );
    Ok(problems)
}

/// What olm-rs wrote, by kind and verb, and which objects' resourceVersion moved.
fn print_writes(writes: &[audit::Write], before: &Snapshot, after: &Snapshot, ran: Duration) {
    println!(
        "e2e-takeover:   olm-rs's writes in its first {:.0}s after the move, until they stopped \
         ({} in all):",
        ran.as_secs_f64(),
        writes.len()
    );
    for (what, count) in audit::by_kind_and_verb(writes) {
        println!("e2e-takeover:     {count:4} {what}");
    }
    let mut objects: BTreeMap<String, usize> = BTreeMap::new();
    for w in writes {
        *objects
            .entry(format!(
                "{} {} {}/{} ({})",
                w.verb, w.resource, w.namespace, w.name, w.code
            ))
            .or_insert(0) += 1;
    }
    for (what, count) in objects {
        println!("e2e-takeover:       {count}× {what}");
    }
    print_moved(before, after);
}

/// The objects whose resourceVersion moved, with what changed in them.
fn print_moved(before: &Snapshot, after: &Snapshot) {
    let moved = snapshot::rewritten(before, after);
    println!(
        "e2e-takeover:   resourceVersion moved on {} of {} compared objects:",
        moved.len(),
        before.len()
    );
    for (key, status) in moved {
        let status = if status.is_empty() {
            "nothing changed but managed fields".to_owned()
        } else {
            status.join("; ")
        };
        println!("e2e-takeover:     {key}: {status}");
    }
}

/// OLM's waiting plan approved under olm-rs; a channel switch under olm-rs.
async fn upgrades_under_olm_rs(c: &Cluster) -> anyhow::Result<()> {
    let plan = wait_plan_waiting(c, "tk-manual", V020).await?;
    approve(c, "tk-manual", &plan).await?;
    wait_installed(c, "tk-manual", "demo", V020).await?;
    wait_plan_phase(c, "tk-manual", &plan, "Complete").await?;
    wait_gone(c, &cluster::csvs(), "tk-manual", V010).await?;
    println!("e2e-takeover:   OLM's plan {plan} approved under olm-rs: Complete, {V020} Succeeded");

    c.merge_patch(
        &cluster::subscriptions(),
        "tk-config",
        "demo",
        json!({"spec": {"channel": "fast"}}),
    )
    .await?;
    wait_installed(c, "tk-config", "demo", V030).await?;
    wait_gone(c, &cluster::csvs(), "tk-config", V020).await?;
    let deployment = c
        .get(&cluster::deployments(), "tk-config", fixtures::DEPLOYMENT)
        .await?
        .context("no demo Deployment in tk-config")?;
    let container = field(&deployment, "/spec/template/spec/containers/0")
        .cloned()
        .unwrap_or_default();
    ensure!(
        container["env"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| e["name"] == "TAKEOVER" && e["value"] == "kept")
            && container["resources"]["requests"]["cpu"] == "10m",
        "the upgraded Deployment lost the Subscription's config: {container}"
    );
    println!("e2e-takeover:   channel switch under olm-rs: {V030} Succeeded, config kept");
    resubscribe::resubscribe_adopts_olms_csv(
        c,
        "tk-dep",
        "dependent",
        &format!("{DEPENDENT}.v1.0.0"),
    )
    .await
}

/// olm-rs scaled to zero, OLM started again on everything olm-rs made or upgraded.
async fn back_to_olm(plane: &ControlPlane, olm_bin: &Path, c: &Cluster) -> anyhow::Result<()> {
    c.merge_patch(
        &cluster::deployments(),
        "olm",
        "olm-rs-controller",
        json!({"spec": {"replicas": 0}}),
    )
    .await?;
    c.wait_for("olm-rs's pods to be gone", || async {
        let pods = chart_install::controller_pods(&c.client).await?;
        Ok(if pods.is_empty() {
            Progress::Done(())
        } else {
            Progress::Pending(format!("{pods:?}"))
        })
    })
    .await?;
    let before = snapshot::take(&c.client, &NAMESPACES).await?;
    let phases = PhaseRecorder::everywhere(&c.client).await?;
    let logs = plane.dir.join("back");
    std::fs::create_dir_all(&logs)?;
    let mark = audit::mark(&plane.audit_log);
    let mut olm = RealOlm::start(plane, olm_bin, &logs).await?;
    let (ran, _) = audit::settle(&plane.audit_log, mark, ADMIN_USER, node_program, SETTLE).await?;
    olm.check_alive()?;
    let after = snapshot::take(&c.client, &NAMESPACES).await?;
    let mut problems = snapshot::differences(&before, &after, relabelled_by_olm);
    let known = snapshot::differences(&before, &after, |_, _| false).len() - problems.len();
    println!(
        "e2e-takeover:   {known} objects relabelled by OLM itself (olm.permissions.hash, \
         operators.coreos.com/<package>.<namespace>; docs/migrating-from-olm.md §4)"
    );
    for (key, seen) in &after {
        if let Some(csv) = key.strip_prefix("ClusterServiceVersion ") {
            let passed = phases.phases_of(csv);
            if seen.phase != "Succeeded" || passed.iter().any(|p| p != "Succeeded") {
                problems.push(format!("{key}: {} (went through {passed:?})", seen.phase));
            }
        }
    }
    for ns in &NAMESPACES {
        let subs = c
            .api(&cluster::subscriptions(), ns)
            .list(&ListParams::default())
            .await?;
        for sub in subs.items {
            let state = text(&sub, "/status/state");
            if state != "AtLatestKnown" {
                problems.push(format!(
                    "Subscription {ns}/{}: state {state:?}",
                    sub.metadata.name.clone().unwrap_or_default()
                ));
            }
        }
    }
    println!(
        "e2e-takeover:   OLM back for {:.0}s, until its writes stopped",
        ran.as_secs_f64()
    );
    print_moved(&before, &after);
    if !problems.is_empty() {
        bail!(
            "after {:.0}s of OLM again, {} differences:\n    {}",
            ran.as_secs_f64(),
            problems.len(),
            problems.join("\n    ")
        );
    }
    own_namespace::calls_succeed(c, "back under OLM").await?;
    // OLM's next upgrade: the Manual Subscription to the fast channel, approved.
    c.merge_patch(
        &cluster::subscriptions(),
        "tk-manual",
        "demo",
        json!({"spec": {"channel": "fast"}}),
    )
    .await?;
    let plan = wait_plan_waiting(c, "tk-manual", V030).await?;
    approve(c, "tk-manual", &plan).await?;
    wait_installed(c, "tk-manual", "demo", V030).await?;
    println!("e2e-takeover:   OLM's next upgrade after the way back: {V030} Succeeded");
    olm.stop();
    Ok(())
}

/// Labels OLM v0.31 puts on objects on its own when it starts (documented in
/// docs/migrating-from-olm.md §4): the RBAC content hash its labeller adds to every Role and
/// RoleBinding (OLM's own too), and the Operator API's component label
/// `operators.coreos.com/<package>.<namespace>`, which olm-rs does not maintain.
fn relabelled_by_olm(_: &str, path: &str) -> bool {
    path == "/metadata/labels/olm.permissions.hash"
        || path.starts_with("/metadata/labels/operators.coreos.com/")
}

/// docs/migrating-from-olm.md §6: olm-rs gives the webhook configurations a CSV made its
/// Operator's component label, which OLM leaves off them (a label alone: rules, CA bundle and
/// service stay as OLM wrote them).
fn labelled_by_olm_rs(key: &str, path: &str) -> bool {
    key.contains("WebhookConfiguration ")
        && path.starts_with("/metadata/labels/operators.coreos.com/")
}

/// A write of the node's programs (kubelet, kube-proxy), which share the admin's certificate with
/// the test and OLM but name themselves; kube-rs and OLM's clients do not start with `kube`.
fn node_program(write: &audit::Write) -> bool {
    write.user_agent.starts_with("kube")
}
