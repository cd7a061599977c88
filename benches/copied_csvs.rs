//! Copied CSVs at scale (docs/operator-groups.md §10): wall time from "an all-namespaces operator is Succeeded"
//! until every other namespace holds its copy with status reason `Copied`, and the peak memory
//! of the controller side, at 100, 500 and 2,000 namespaces.
//!
//! Set-up per run (not timed): a fresh embedded API server with OLM's CRDs, N namespaces, the
//! OperatorGroup side of the controller with warm caches, the `global-operators` group and a
//! real CSV from the shared catalog (rabbitmq-messaging-topology-operator 1.13.0, 35 kB of
//! YAML; `OLM_RS_BENCH_CSV` picks another file) already annotated as a member. Timed: its status
//! becomes Succeeded → all copies exist and carry the copied status.
//!
//! Memory: a counting global allocator puts a tag in front of every allocation saying which
//! side made it, and live bytes are tracked per side. The controller's task is tagged
//! "controller"; the API server's work is re-tagged "server" for as long as the in-process
//! client polls into it (request futures and response bodies); everything else (this harness)
//! is "bench". A free counts against the side that allocated, whoever frees. The figure is
//! the controller's peak live bytes during the timed part. Printed per size after the criterion
//! output, together with the process's peak RSS.
//!
//! `OLM_RS_BENCH_PROCESS=1` measures instead the way an operator of a cluster would: the real
//! `olm-rs run` binary is the controller, in its own process, talking HTTP to the embedded API
//! server on 127.0.0.1. The bench installs the bundle as an InstallPlan would (its CRDs, the
//! ServiceAccount and RBAC of its permissions, the CSV) and the controller takes the CSV to
//! Succeeded by itself (the API server's workload simulator reports its Deployment ready).
//! Timed: from the bench seeing the original Succeeded until every copy carries the copied
//! status. CPU: the controller's user + system time over its whole life. Memory: the controller
//! process's peak RSS (`VmHWM`) over its whole life, and at the end its resident anonymous
//! memory (heap, stacks) and file pages (mostly the binary's code).
//! One run per size, printed as a table; criterion is not used. `OLM_RS_BENCH_BIN=<path>` runs
//! another build as the controller, e.g. the container image's (`--profile image
//! --no-default-features --target x86_64-unknown-linux-musl`), whose smaller code is most of the
//! difference in RSS.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or bench: a panic is the report

#[path = "../tests/integration/common/mod.rs"]
mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use axum::body::HttpBody;
use criterion::{Criterion, criterion_group};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, ObjectMeta, PartialObjectMeta, Patch, PatchParams, PostParams};
use olm_rs::api::{ClusterServiceVersion, OperatorGroup, OperatorGroupSpec};
use olm_rs::k8s::clock::SystemClock;
use olm_rs::reconcile::operator_group::{OperatorGroupOptions, run_with};
use olm_rs::reconcile::{Context, ControllerOptions};
use olm_rs::sandbox::ApiServer;

// ---- Allocation accounting by side ---------------------------------------------------------

const BENCH: u8 = 0;
const CONTROLLER: u8 = 1;
const SERVER: u8 = 2;

static LIVE: [AtomicIsize; 3] = [const { AtomicIsize::new(0) }; 3];
static PEAK: [AtomicIsize; 3] = [const { AtomicIsize::new(0) }; 3];

thread_local! {
    static SIDE: Cell<u8> = const { Cell::new(BENCH) };
}

/// Every block carries a 16-byte header recording its side (16 keeps any alignment ≤ 16).
const HEADER: usize = 16;

struct ByThisSide;

unsafe impl GlobalAlloc for ByThisSide {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let align = layout.align().max(HEADER);
        let Ok(outer) = Layout::from_size_align(layout.size() + align, align) else {
            return std::ptr::null_mut();
        };
        // SAFETY: `outer` has a non-zero size; the header lies inside the block.
        unsafe {
            let base = System.alloc(outer);
            if base.is_null() {
                return base;
            }
            let side = SIDE.try_with(Cell::get).unwrap_or(BENCH);
            let user = base.add(align);
            user.sub(1).write(side);
            let live = LIVE[side as usize].fetch_add(layout.size() as isize, Ordering::Relaxed)
                + layout.size() as isize;
            PEAK[side as usize].fetch_max(live, Ordering::Relaxed);
            user
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let align = layout.align().max(HEADER);
        // SAFETY: `ptr` came from `alloc` above with the same layout.
        unsafe {
            let side = ptr.sub(1).read();
            LIVE[side as usize].fetch_sub(layout.size() as isize, Ordering::Relaxed);
            let outer = Layout::from_size_align_unchecked(layout.size() + align, align);
            System.dealloc(ptr.sub(align), outer);
        }
    }
}

#[global_allocator]
static ALLOCATOR: ByThisSide = ByThisSide;

/// Runs `inner` with allocations attributed to `side` while it is polled.
struct Tagged<F> {
    side: u8,
    inner: F,
}

impl<F: Future + Unpin> Future for Tagged<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<F::Output> {
        let previous = SIDE.with(|s| s.replace(self.side));
        let out = Pin::new(&mut self.inner).poll(cx);
        SIDE.with(|s| s.set(previous));
        out
    }
}

fn tagged<F: Future>(side: u8, inner: F) -> Tagged<Pin<Box<F>>> {
    Tagged {
        side,
        inner: Box::pin(inner),
    }
}

/// A response body whose polling is attributed to the server (watch streams are produced as
/// the client reads them).
struct ServerBody<B>(B);

impl<B: HttpBody + Unpin> HttpBody for ServerBody<B> {
    type Data = B::Data;
    type Error = B::Error;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<http_body::Frame<B::Data>, B::Error>>> {
        let previous = SIDE.with(|s| s.replace(SERVER));
        let out = Pin::new(&mut self.0).poll_frame(cx);
        SIDE.with(|s| s.set(previous));
        out
    }
}

/// The embedded server's router with its work attributed to the server side.
#[derive(Clone)]
struct ServerSide(axum::Router);

impl tower::Service<http::Request<kube::client::Body>> for ServerSide {
    type Response = http::Response<ServerBody<axum::body::Body>>;
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        let mut router = self.0.clone();
        let previous = SIDE.with(|s| s.replace(SERVER));
        let call = tower::Service::call(&mut router, request);
        SIDE.with(|s| s.set(previous));
        Box::pin(tagged(SERVER, async move {
            let response = call.await?;
            Ok(response.map(ServerBody))
        }))
    }
}

fn live(side: u8) -> isize {
    LIVE[side as usize].load(Ordering::Relaxed)
}

fn reset_peak(side: u8) {
    PEAK[side as usize].store(live(side), Ordering::Relaxed);
}

fn peak(side: u8) -> isize {
    PEAK[side as usize].load(Ordering::Relaxed)
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

// ---- One run --------------------------------------------------------------------------------

fn bench_csv_path() -> std::path::PathBuf {
    std::env::var_os("OLM_RS_BENCH_CSV")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            common::shared_dir().join(
                "data/catalogs/community-operators-prod/operators/rabbitmq-messaging-topology-operator/1.13.0/manifests/rabbitmq.clusterserviceversion.yaml",
            )
        })
}

fn bench_csv() -> ClusterServiceVersion {
    let path = bench_csv_path();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut csv: ClusterServiceVersion =
        serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    csv.metadata.namespace = Some("operators".into());
    csv.status = None;
    csv
}

struct Measurement {
    elapsed: Duration,
    controller_peak: isize,
    copies: usize,
}

async fn run_once(namespaces: usize, csv: &ClusterServiceVersion) -> Measurement {
    let server = ApiServer::new();
    let client = kube::Client::new(ServerSide(server.service()), "default");
    let expected = seed_cluster(&client, namespaces, &["operators"]).await;

    let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), "operators");
    groups
        .create(
            &PostParams::default(),
            &OperatorGroup::new("global-operators", OperatorGroupSpec::default()),
        )
        .await
        .expect("group");
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), "operators");
    let name = csv.metadata.name.clone().expect("CSV name");
    csvs.create(&PostParams::default(), csv).await.expect("CSV");

    // The controller, with its own client (its request handling is tagged server-side too).
    let controller_client = kube::Client::new(ServerSide(server.service()), "default");
    let ctx = Arc::new(Context::new(
        controller_client,
        Arc::new(SystemClock),
        ControllerOptions::default(),
    ));
    let options = OperatorGroupOptions {
        resync: Duration::from_secs(3600),
        ..OperatorGroupOptions::default()
    };
    let controller = tokio::spawn(tagged(CONTROLLER, run_with(ctx, options)));

    // Wait until the group has made the CSV a member (caches warm, nothing copied yet).
    loop {
        let got = csvs.get(&name).await.expect("CSV");
        if got
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key("olm.targetNamespaces"))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    reset_peak(CONTROLLER);
    let started = Instant::now();
    let status = serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "status": {"phase": "Succeeded", "reason": "InstallSucceeded",
                   "message": "install strategy completed with no errors",
                   "lastUpdateTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    });
    csvs.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("status");

    let copies = wait_for_copies(&client, expected, None).await;
    let elapsed = started.elapsed();
    let controller_peak = peak(CONTROLLER);
    controller.abort();
    let _ = controller.await;
    Measurement {
        elapsed,
        controller_peak,
        copies,
    }
}

/// How many copies exist, from a one-item page and its `remainingItemCount`: polling must not
/// cost the server a rendering of every copy each time (that made the measured time grow with
/// N² — the harness's own polls competing with the controller).
async fn count_copies(
    api: &Api<PartialObjectMeta<ClusterServiceVersion>>,
    selector: &ListParams,
) -> usize {
    let page = api.list_metadata(selector).await.expect("list");
    page.items.len() + page.metadata.remaining_item_count.unwrap_or(0).max(0) as usize
}

/// Whether `expected` copies carry the copied status (paged, so the check stays small).
async fn all_copied(api: &Api<ClusterServiceVersion>, expected: usize) -> bool {
    let mut params = ListParams::default()
        .labels("olm.copiedFrom=operators")
        .limit(200);
    let mut done = 0;
    loop {
        let page = api.list(&params).await.expect("list");
        done += page
            .items
            .iter()
            .filter(|c| {
                c.status
                    .as_ref()
                    .and_then(|s| s.reason.as_ref())
                    .map(|r| r.as_str())
                    == Some("Copied")
            })
            .count();
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    done >= expected
}

fn copied_csvs(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let csv = bench_csv();
    let sizes: Vec<usize> = std::env::var("OLM_RS_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![100, 500, 2000]);
    let mut summary = Vec::new();
    let mut group = c.benchmark_group("copied_csvs");
    // Each run takes seconds: ten runs per size, one iteration each.
    group
        .sample_size(10)
        .sampling_mode(criterion::SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(1))
        .measurement_time(Duration::from_secs(1));
    for &n in &sizes {
        let mut peaks = Vec::new();
        group.bench_function(format!("namespaces_{n}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let m = runtime.block_on(run_once(n, &csv));
                    assert!(m.copies >= n, "only {} copies for {n} namespaces", m.copies);
                    peaks.push(m.controller_peak);
                    total += m.elapsed;
                }
                total
            })
        });
        peaks.sort();
        summary.push((
            n,
            peaks.first().copied().unwrap_or(0),
            peaks.last().copied().unwrap_or(0),
            peaks.len(),
        ));
    }
    group.finish();
    eprintln!(
        "\ncopied_csvs: controller-side peak live heap during the timed part (min..max over runs)"
    );
    for (n, low, high, runs) in summary {
        eprintln!(
            "  {n:>5} namespaces: {:.1}..{:.1} MiB over {runs} runs",
            low as f64 / 1048576.0,
            high as f64 / 1048576.0
        );
    }
    eprintln!(
        "  process peak RSS (server + controller + harness): {} MiB",
        peak_rss_kib() / 1024
    );
}

// ---- The controller as its own process ------------------------------------------------------

struct ProcessMeasurement {
    elapsed: Duration,
    peak_rss_kib: u64,
    /// The controller's resident heap and stacks, and its resident file pages (mostly the
    /// binary's code), at the end of the run: where the peak went.
    anon_kib: u64,
    file_kib: u64,
    copies: usize,
    /// CPU time the controller spent over its whole life (user + system), start-up included.
    cpu: Duration,
}

/// User + system CPU time of `pid` so far, from `/proc/<pid>/stat` (fields 14 and 15, in clock
/// ticks of 1/100 s: `getconf CLK_TCK` is 100 on every Linux this runs on).
fn process_cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name (field 2) may hold spaces; the fields after its closing parenthesis
    // start at field 3.
    let after_name = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .unwrap_or_default();
    let fields: Vec<u64> = after_name
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let ticks = fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

fn process_status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// Creates every object of the bundle directory that an InstallPlan would (CRDs, and the
/// Service of its webhook in `operators`), except the CSV itself.
async fn install_bundle_objects(
    client: &kube::Client,
    dir: &std::path::Path,
    csv_file: &std::path::Path,
) {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml") && p != csv_file)
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("bundle file");
        let mut obj: kube::api::DynamicObject =
            serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let types = obj.types.clone().expect("apiVersion and kind");
        let (group, version) = types
            .api_version
            .rsplit_once('/')
            .map(|(g, v)| (g.to_owned(), v.to_owned()))
            .unwrap_or_else(|| (String::new(), types.api_version.clone()));
        let plural = match types.kind.as_str() {
            "CustomResourceDefinition" => "customresourcedefinitions",
            "Service" => "services",
            other => panic!("{}: the bench does not install a {other}", file.display()),
        };
        let resource = kube::api::ApiResource {
            group,
            version,
            api_version: types.api_version.clone(),
            kind: types.kind.clone(),
            plural: plural.into(),
        };
        let api: Api<kube::api::DynamicObject> = if plural == "services" {
            obj.metadata.namespace = Some("operators".into());
            Api::namespaced_with(client.clone(), "operators", &resource)
        } else {
            Api::all_with(client.clone(), &resource)
        };
        api.create(&PostParams::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    }
}

async fn create_namespaced<K>(client: &kube::Client, objects: Vec<K>)
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    for obj in objects {
        let ns = obj
            .meta()
            .namespace
            .clone()
            .unwrap_or_else(|| "operators".into());
        let api: Api<K> = Api::namespaced(client.clone(), &ns);
        api.create(&PostParams::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("{:?}: {e}", obj.meta().name));
    }
}

async fn create_cluster_scoped<K>(client: &kube::Client, objects: Vec<K>)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    for obj in objects {
        let api: Api<K> = Api::all(client.clone());
        api.create(&PostParams::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("{:?}: {e}", obj.meta().name));
    }
}

async fn run_process_once(namespaces: usize, csv_path: &std::path::Path) -> ProcessMeasurement {
    let server = ApiServer::new();
    let serving = server
        .serve("127.0.0.1:0".parse().expect("an address"))
        .await
        .expect("serving the embedded API");
    let dir = tempfile::tempdir().expect("a temp dir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, serving.kubeconfig_yaml()).expect("kubeconfig");
    // The bench's own requests stay in-process: they must not compete with the controller for
    // the loopback connection pool, and their cost is not the controller's.
    let client = server.client();
    let expected = seed_cluster(&client, namespaces, &["operators", "olm"]).await;
    let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), "operators");
    groups
        .create(
            &PostParams::default(),
            &OperatorGroup::new("global-operators", OperatorGroupSpec::default()),
        )
        .await
        .expect("group");
    install_bundle_objects(&client, csv_path.parent().expect("bundle dir"), csv_path).await;
    let mut csv = bench_csv();
    csv.metadata.namespace = Some("operators".into());
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), "operators");
    let name = csv.metadata.name.clone().expect("CSV name");
    let created = csvs
        .create(&PostParams::default(), &csv)
        .await
        .expect("CSV");
    let rbac = olm_rs::csv::permission_objects::install_plan_permissions(&created)
        .expect("the CSV's permissions");
    create_namespaced(&client, rbac.service_accounts).await;
    create_namespaced(&client, rbac.roles).await;
    create_namespaced(&client, rbac.role_bindings).await;
    create_cluster_scoped(&client, rbac.cluster_roles).await;
    create_cluster_scoped(&client, rbac.cluster_role_bindings).await;

    let log = std::fs::File::create(dir.path().join("olm-rs-run.log")).expect("log");
    let probe = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    // `OLM_RS_BENCH_BIN` measures another build of the controller (the image's, say).
    let binary =
        std::env::var_os("OLM_RS_BENCH_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_olm-rs").into());
    let mut child = tokio::process::Command::new(binary)
        .args([
            "run",
            "--global-catalog-namespace=olm",
            &format!("--probe-addr=127.0.0.1:{probe}"),
            "--log-format=json",
            "--log-level=warn",
        ])
        .env("KUBECONFIG", &kubeconfig)
        .env("POD_NAMESPACE", "olm")
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("starting olm-rs run");
    let pid = child.id().expect("a pid");

    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let got = csvs.get(&name).await.expect("CSV");
        let phase = got
            .status
            .as_ref()
            .and_then(|s| s.phase.as_ref())
            .map(|p| p.as_str().to_owned());
        if phase.as_deref() == Some("Succeeded") {
            break;
        }
        if Instant::now() > deadline || child.try_wait().ok().flatten().is_some() {
            let log =
                std::fs::read_to_string(dir.path().join("olm-rs-run.log")).unwrap_or_default();
            panic!("the CSV did not succeed (phase {phase:?}); controller log:\n{log}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let started = Instant::now();
    let copies = wait_for_copies(&client, expected, Some(deadline)).await;
    let elapsed = started.elapsed();
    let peak_rss_kib = process_status_kib(pid, "VmHWM:");
    let anon_kib = process_status_kib(pid, "RssAnon:");
    let file_kib = process_status_kib(pid, "RssFile:");
    let cpu = process_cpu(pid);
    let _ = child.kill().await;
    serving.shutdown().await;
    ProcessMeasurement {
        elapsed,
        peak_rss_kib,
        anon_kib,
        file_kib,
        copies,
        cpu,
    }
}

fn process_table() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let csv_path = bench_csv_path();
    let sizes: Vec<usize> = std::env::var("OLM_RS_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![100, 500, 1000, 2000]);
    eprintln!("copied_csvs (olm-rs run in its own process, HTTP on loopback)");
    eprintln!(
        "  namespaces  copies  seconds until all copied  controller CPU s  controller peak RSS  (at end: anon + file)"
    );
    for n in sizes {
        let m = runtime.block_on(run_process_once(n, &csv_path));
        eprintln!(
            "  {n:>10}  {:>6}  {:>24.2}  {:>16.2}  {:>15.1} MiB  ({:.1} + {:.1} MiB)",
            m.copies,
            m.elapsed.as_secs_f64(),
            m.cpu.as_secs_f64(),
            m.peak_rss_kib as f64 / 1024.0,
            m.anon_kib as f64 / 1024.0,
            m.file_kib as f64 / 1024.0
        );
    }
}

criterion_group!(benches, copied_csvs);

fn main() {
    if std::env::var_os("OLM_RS_BENCH_PROCESS").is_some() {
        process_table();
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}

/// Installs OLM's CRDs and creates `namespaces` tenant namespaces plus `extra`. Returns how many
/// copies the all-namespaces operator in `operators` should get: every namespace but its own.
async fn seed_cluster(client: &kube::Client, namespaces: usize, extra: &[&str]) -> usize {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in olm_rs::api::crd::all().expect("CRDs") {
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("install CRD");
    }
    let ns_api: Api<Namespace> = Api::all(client.clone());
    let mut names: Vec<String> = (0..namespaces).map(|i| format!("tenant-{i:05}")).collect();
    names.extend(extra.iter().map(|n| n.to_string()));
    for name in &names {
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        ns_api
            .create(&PostParams::default(), &ns)
            .await
            .expect("namespace");
    }
    ns_api
        .list_metadata(&ListParams::default())
        .await
        .expect("namespaces")
        .items
        .len()
        - 1
}

/// Polls until `expected` copies of the operator's CSV exist, all with reason `Copied`; panics
/// past `deadline`. Counts from a one-item page, so the poll's own cost does not grow with N.
async fn wait_for_copies(
    client: &kube::Client,
    expected: usize,
    deadline: Option<Instant>,
) -> usize {
    let all: Api<PartialObjectMeta<ClusterServiceVersion>> = Api::all(client.clone());
    let full: Api<ClusterServiceVersion> = Api::all(client.clone());
    let selector = ListParams::default()
        .labels("olm.copiedFrom=operators")
        .limit(1);
    loop {
        let count = count_copies(&all, &selector).await;
        if count >= expected && all_copied(&full, expected).await {
            return count;
        }
        if deadline.is_some_and(|d| Instant::now() > d) {
            panic!("only {count} of {expected} copies after the deadline");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
