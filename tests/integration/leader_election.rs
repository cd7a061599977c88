//! Leader election against the embedded API server: two replicas never lead at once, a standby
//! takes over when the leader stops (crash: after the Lease expires; clean shutdown: at once),
//! and a leader whose Lease is taken stops acting.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, PostParams};
use olm_rs::k8s::clock::{Clock as _, ManualClock, SystemClock};
use olm_rs::leader_election::{
    Attempt, LeaderElectionError, LeaderElector, LeaseConfig, LeaseLock,
};
use olm_rs::sandbox::ApiServer;

const NS: &str = "olm";
const LEASE: &str = "olm-rs-controller";

async fn cluster() -> (ApiServer, Client) {
    let server = ApiServer::new();
    let client = server.client();
    let ns: Namespace = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}
    }))
    .unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    (server, client)
}

fn lock(identity: &str) -> LeaseLock {
    LeaseLock {
        namespace: NS.to_owned(),
        name: LEASE.to_owned(),
        identity: identity.to_owned(),
    }
}

async fn lease(client: &Client) -> Lease {
    Api::<Lease>::namespaced(client.clone(), NS)
        .get(LEASE)
        .await
        .unwrap()
}

fn holder(lease: &Lease) -> Option<String> {
    lease
        .spec
        .as_ref()?
        .holder_identity
        .clone()
        .filter(|h| !h.is_empty())
}

fn start() -> Timestamp {
    "2026-03-01T00:00:00Z".parse().unwrap()
}

#[tokio::test]
async fn standby_takes_over_only_after_a_crashed_leader_lease_expires() {
    let (_server, client) = cluster().await;
    let config = LeaseConfig::default();
    let clock = ManualClock::new(start());
    let mut a = LeaderElector::new(client.clone(), lock("a"), config, Arc::new(clock.clone()));
    let mut b = LeaderElector::new(client.clone(), lock("b"), config, Arc::new(clock.clone()));
    let never_both = |a: &LeaderElector, b: &LeaderElector, when: &str| {
        assert!(!(a.is_leader() && b.is_leader()), "both lead {when}");
    };

    assert_eq!(a.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
    assert_eq!(
        b.try_acquire_or_renew().await.unwrap(),
        Attempt::HeldBy("a".into())
    );
    never_both(&a, &b, "after the first round");
    assert_eq!(holder(&lease(&client).await).as_deref(), Some("a"));

    // Both retry every retry period; the leader renews, the standby keeps waiting.
    for round in 0..10 {
        clock.advance(config.retry_period);
        assert_eq!(a.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
        assert_eq!(
            b.try_acquire_or_renew().await.unwrap(),
            Attempt::HeldBy("a".into())
        );
        never_both(&a, &b, &format!("in round {round}"));
        assert!(a.is_leader());
    }

    // `a` crashes: it stops renewing without releasing. `b` keeps trying every retry period.
    let crashed_at = clock.now();
    let mut took_over_at = None;
    for _ in 0..20 {
        clock.advance(SignedDuration::from_secs(1));
        let attempt = b.try_acquire_or_renew().await.unwrap();
        never_both(
            &a,
            &b,
            &format!(
                "{:#} after the crash",
                clock.now().duration_since(crashed_at)
            ),
        );
        if attempt == Attempt::Leading {
            took_over_at = Some(clock.now());
            break;
        }
    }
    let took_over_at = took_over_at.expect("b never took over");
    let waited = took_over_at.duration_since(crashed_at);
    assert_eq!(
        waited, config.lease_duration,
        "b takes over once the lease it last saw renewed has lived its duration"
    );
    assert!(b.is_leader());
    assert!(
        !a.is_leader(),
        "a stopped acting at its renew deadline, before b started"
    );

    let taken = lease(&client).await;
    assert_eq!(holder(&taken).as_deref(), Some("b"));
    assert_eq!(taken.spec.as_ref().unwrap().lease_transitions, Some(1));

    // `a` comes back as a standby.
    assert_eq!(
        a.try_acquire_or_renew().await.unwrap(),
        Attempt::HeldBy("b".into())
    );
    never_both(&a, &b, "after a came back");
}

#[tokio::test]
async fn a_clean_shutdown_hands_the_lease_over_at_once() {
    let (_server, client) = cluster().await;
    let config = LeaseConfig::default();
    let clock = ManualClock::new(start());
    let mut a = LeaderElector::new(client.clone(), lock("a"), config, Arc::new(clock.clone()));
    let mut b = LeaderElector::new(client.clone(), lock("b"), config, Arc::new(clock.clone()));
    assert_eq!(a.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
    assert_eq!(
        b.try_acquire_or_renew().await.unwrap(),
        Attempt::HeldBy("a".into())
    );

    a.release().await.unwrap();
    assert!(!a.is_leader());
    assert_eq!(holder(&lease(&client).await), None);
    // No time passes: b does not wait for any expiry.
    assert_eq!(b.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
    assert_eq!(
        lease(&client).await.spec.unwrap().lease_transitions,
        Some(1)
    );
    // Releasing a lease one does not hold changes nothing.
    a.release().await.unwrap();
    assert_eq!(holder(&lease(&client).await).as_deref(), Some("b"));
}

#[tokio::test]
async fn of_two_candidates_racing_for_a_free_lease_exactly_one_wins() {
    let (_server, client) = cluster().await;
    let clock = ManualClock::new(start());
    for round in 0..5 {
        let config = LeaseConfig::default();
        let mut a = LeaderElector::new(client.clone(), lock("a"), config, Arc::new(clock.clone()));
        let mut b = LeaderElector::new(client.clone(), lock("b"), config, Arc::new(clock.clone()));
        let (ra, rb) = tokio::join!(a.try_acquire_or_renew(), b.try_acquire_or_renew());
        let leading = [ra.unwrap(), rb.unwrap()]
            .iter()
            .filter(|r| **r == Attempt::Leading)
            .count();
        assert_eq!(leading, 1, "round {round}");
        assert!(!(a.is_leader() && b.is_leader()));
        // Free the lease for the next round.
        if a.is_leader() {
            a.release().await.unwrap();
        } else {
            b.release().await.unwrap();
        }
    }
}

/// Real time, short durations: the full loop (`run`) with work that records when it acts.
fn fast_config() -> LeaseConfig {
    LeaseConfig {
        lease_duration: SignedDuration::from_secs(2),
        renew_deadline: SignedDuration::from_millis(1500),
        retry_period: SignedDuration::from_millis(100),
    }
}

/// Work that marks `acting` while it runs (it is dropped, not finished, when leadership ends)
/// and counts moments where another replica acted at the same time.
fn work(
    acting: Arc<AtomicBool>,
    other: Arc<AtomicBool>,
    overlaps: Arc<AtomicUsize>,
) -> impl Future<Output = ()> {
    struct Acting(Arc<AtomicBool>);
    impl Drop for Acting {
        fn drop(&mut self) {
            self.0.store(false, Ordering::SeqCst);
        }
    }
    async move {
        acting.store(true, Ordering::SeqCst);
        let _guard = Acting(Arc::clone(&acting));
        loop {
            if other.load(Ordering::SeqCst) {
                overlaps.fetch_add(1, Ordering::SeqCst);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

async fn eventually(what: &str, within: Duration, check: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + within;
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within {within:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn run_loop_hands_over_on_shutdown_and_on_crash() {
    let (_server, client) = cluster().await;
    let overlaps = Arc::new(AtomicUsize::new(0));
    let (a_acting, b_acting, c_acting) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let elector = |id: &str| {
        LeaderElector::new(
            client.clone(),
            lock(id),
            fast_config(),
            Arc::new(SystemClock),
        )
    };

    let (stop_a, a_stopped) = tokio::sync::oneshot::channel::<()>();
    let a = tokio::spawn(elector("a").run(
        work(
            Arc::clone(&a_acting),
            Arc::clone(&b_acting),
            Arc::clone(&overlaps),
        ),
        async {
            let _ = a_stopped.await;
        },
    ));
    eventually("a leads", Duration::from_secs(2), || {
        a_acting.load(Ordering::SeqCst)
    })
    .await;
    let b = tokio::spawn(elector("b").run(
        work(
            Arc::clone(&b_acting),
            Arc::clone(&a_acting),
            Arc::clone(&overlaps),
        ),
        std::future::pending(),
    ));
    // b stands by while a renews (well past one lease duration).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(a_acting.load(Ordering::SeqCst) && !b_acting.load(Ordering::SeqCst));

    // Clean shutdown of a: it releases, b takes over within a few retry periods.
    let _ = stop_a.send(());
    assert!(a.await.unwrap().is_ok(), "a clean shutdown is not an error");
    assert!(!a_acting.load(Ordering::SeqCst));
    eventually(
        "b takes over after a's release",
        Duration::from_millis(800),
        || b_acting.load(Ordering::SeqCst),
    )
    .await;

    // c stands by; then b crashes (its task is killed: no release). c waits for the lease to
    // expire, then acts.
    let c = tokio::spawn(elector("c").run(
        work(
            Arc::clone(&c_acting),
            Arc::clone(&b_acting),
            Arc::clone(&overlaps),
        ),
        std::future::pending(),
    ));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!c_acting.load(Ordering::SeqCst));
    b.abort();
    let _ = b.await;
    let crashed = tokio::time::Instant::now();
    eventually(
        "c takes over after b's lease expires",
        Duration::from_secs(5),
        || c_acting.load(Ordering::SeqCst),
    )
    .await;
    assert!(
        crashed.elapsed() >= Duration::from_millis(1500),
        "c must wait for the lease to expire, took over after {:?}",
        crashed.elapsed()
    );
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "two replicas acted at once"
    );
    assert_eq!(holder(&lease(&client).await).as_deref(), Some("c"));
    c.abort();
}

#[tokio::test]
async fn a_leader_whose_lease_is_taken_stops_acting_and_reports_the_loss() {
    let (_server, client) = cluster().await;
    let acting = Arc::new(AtomicBool::new(false));
    let nobody = Arc::new(AtomicBool::new(false));
    let leader = tokio::spawn(
        LeaderElector::new(
            client.clone(),
            lock("a"),
            fast_config(),
            Arc::new(SystemClock),
        )
        .run(
            work(Arc::clone(&acting), nobody, Arc::new(AtomicUsize::new(0))),
            std::future::pending(),
        ),
    );
    eventually("a leads", Duration::from_secs(2), || {
        acting.load(Ordering::SeqCst)
    })
    .await;

    // Someone else writes the Lease (an operator by hand, or a replica with a skewed view).
    let api = Api::<Lease>::namespaced(client.clone(), NS);
    loop {
        let mut stolen = api.get(LEASE).await.unwrap();
        stolen.spec.as_mut().unwrap().holder_identity = Some("intruder".to_owned());
        match api.replace(LEASE, &PostParams::default(), &stolen).await {
            Ok(_) => break,
            // The leader renewed in between; read again.
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(err) => panic!("{err}"),
        }
    }

    let outcome = tokio::time::timeout(Duration::from_secs(3), leader)
        .await
        .expect("the leader notices within its renew loop")
        .unwrap();
    match outcome {
        Err(LeaderElectionError::Lost { why, .. }) => assert!(why.contains("intruder"), "{why}"),
        other => panic!("expected Lost, got {other:?}"),
    }
    assert!(!acting.load(Ordering::SeqCst), "the work was stopped");
}

async fn install_olm_crds(client: &Client) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    for crd in olm_rs::api::crd::all().unwrap() {
        api.create(&PostParams::default(), &crd).await.unwrap();
    }
}

async fn eventually_holder(client: &Client, expected: &str, within: Duration) {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let current = Api::<Lease>::namespaced(client.clone(), NS)
            .get_opt(LEASE)
            .await
            .unwrap()
            .and_then(|l| holder(&l));
        if current.as_deref() == Some(expected) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "holder {current:?}, expected {expected} within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `olm-rs run --leader-elect` as wired in `controller::run`: the second process waits, takes
/// over when the first shuts down, and stops with `LeadershipLost` when its Lease is taken.
#[tokio::test]
async fn controller_run_with_leader_election_hands_over_and_stops_on_loss() {
    use olm_rs::controller::{self, LeaderElectionOptions, RunError, RunOptions};
    use olm_rs::reconcile::ControllerOptions;

    let (_server, client) = cluster().await;
    install_olm_crds(&client).await;
    let (addr_a, addr_b) = (free_addr(), free_addr());
    let options = |id: &str, probe_addr| RunOptions {
        probe_addr,
        controller: ControllerOptions::default(),
        leader_election: Some(LeaderElectionOptions {
            lock: lock(id),
            config: fast_config(),
            connections: None,
        }),
        packages: None,
    };

    let (stop_a, a_stopped) = tokio::sync::oneshot::channel::<()>();
    let a = tokio::spawn(controller::run(
        client.clone(),
        options("a", addr_a),
        async {
            let _ = a_stopped.await;
        },
    ));
    // Preflight (API reachable, every OLM kind served) passes before the election starts.
    tokio::time::sleep(Duration::from_millis(500)).await;
    if a.is_finished() {
        panic!("a stopped: {:?}", a.await.unwrap());
    }
    eventually_holder(&client, "a", Duration::from_secs(5)).await;
    let b = tokio::spawn(controller::run(
        client.clone(),
        options("b", addr_b),
        std::future::pending(),
    ));
    tokio::time::sleep(Duration::from_secs(1)).await;
    eventually_holder(&client, "a", Duration::ZERO).await;
    // Both serve /metrics on their probe port; only the leader reports itself leading.
    let status_line =
        |leading: u8| format!(r#"leader_election_master_status{{name="{LEASE}"}} {leading}"#);
    let metrics_a = http_get(&format!("http://{addr_a}/metrics")).await.unwrap();
    let metrics_b = http_get(&format!("http://{addr_b}/metrics")).await.unwrap();
    assert!(
        metrics_a.lines().any(|l| l == status_line(1)),
        "{metrics_a}"
    );
    assert!(
        metrics_b.lines().any(|l| l == status_line(0)),
        "{metrics_b}"
    );

    let _ = stop_a.send(());
    a.await.unwrap().expect("a clean shutdown is a clean exit");
    eventually_holder(&client, "b", Duration::from_secs(1)).await;

    let api = Api::<Lease>::namespaced(client.clone(), NS);
    loop {
        let mut stolen = api.get(LEASE).await.unwrap();
        stolen.spec.as_mut().unwrap().holder_identity = Some("intruder".to_owned());
        match api.replace(LEASE, &PostParams::default(), &stolen).await {
            Ok(_) => break,
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(err) => panic!("{err}"),
        }
    }
    let outcome = tokio::time::timeout(Duration::from_secs(3), b)
        .await
        .expect("b stops within its renew loop")
        .unwrap();
    assert!(
        matches!(outcome, Err(RunError::LeadershipLost(_))),
        "expected LeadershipLost (the process exits non-zero), got {outcome:?}"
    );
}

fn free_addr() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

/// The body of a 200 answer to a plain HTTP/1.1 GET.
async fn http_get(url: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (host, path) = url.strip_prefix("http://")?.split_once('/')?;
    let mut stream = tokio::net::TcpStream::connect(host).await.ok()?;
    let request = format!("GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_owned())
}

/// `olm-rs run` checks the Lease timings before it connects anywhere, naming the rule broken.
#[test]
fn unsafe_lease_timings_are_refused_at_startup() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_olm-rs"))
        .args([
            "run",
            "--leader-elect",
            "--leader-election-lease-duration=10s",
            "--leader-election-renew-deadline=10s",
        ])
        // No cluster: the refusal must come before any attempt to reach one.
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("lease duration (10s) must be longer than the renew deadline (10s)"),
        "{stderr}"
    );
}

/// docs/leader-election.md §2: a replica cut off from the API server stops writing at its renew
/// deadline — before a standby may take the Lease — and does not write when the network comes
/// back either, until it has won the Lease again. Every write goes through the executor, with
/// the fenced client the reconcilers hold.
#[tokio::test]
async fn a_leader_past_its_renew_deadline_sends_no_write_until_it_leads_again() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use olm_rs::k8s::effects::{Body, Write, perform};
    use olm_rs::k8s::write::ObjectKey;
    use olm_rs::leader_election::{Fence, Fenced};

    let (_server, client) = cluster().await;
    let config = LeaseConfig::default();
    let clock = ManualClock::new(start());
    let fence = Fence::closed(config, Arc::new(clock.clone()));
    let mut a = LeaderElector::new(client.clone(), lock("a"), config, Arc::new(clock.clone()))
        .with_fence(fence.clone());
    let mut b = LeaderElector::new(client.clone(), lock("b"), config, Arc::new(clock.clone()));
    let writer = fence.guard(&client);
    let key = ObjectKey::new::<ConfigMap>(Some(NS), "work");
    let set = |value: &str| Write::MergePatch {
        key: key.clone(),
        patch: Body::new(serde_json::json!({"data": {"value": value}})),
        resource_version: None,
    };
    let stored = || async {
        Api::<ConfigMap>::namespaced(client.clone(), NS)
            .get_opt("work")
            .await
            .unwrap()
            .and_then(|c| c.data)
            .and_then(|d| d.get("value").cloned())
    };
    let fenced = |result: Result<_, olm_rs::k8s::write::ApiError>, when: &str| match result {
        Err(e) => assert!(Fenced::in_chain(&e), "{when}: {e}"),
        Ok(_) => panic!("{when}: the write was sent"),
    };

    let create = Write::Create {
        key: key.clone(),
        object: Body::new(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "work", "namespace": NS}, "data": {"value": "0"}
        })),
    };
    fenced(perform(&writer, &create).await, "a standby");
    assert_eq!(stored().await, None, "nothing reached the server");

    assert_eq!(a.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
    perform(&writer, &create).await.expect("the leader writes");
    clock.advance(SignedDuration::from_secs(9));
    perform(&writer, &set("1"))
        .await
        .expect("before the deadline");

    // Cut off: a's renewals do not reach the server. At its renew deadline the fence closes,
    // five seconds before b may take the Lease.
    clock.advance(SignedDuration::from_secs(1));
    fenced(perform(&writer, &set("2")).await, "at the renew deadline");
    assert_eq!(
        b.try_acquire_or_renew().await.unwrap(),
        Attempt::HeldBy("a".into())
    );
    clock.advance(config.lease_duration);
    assert_eq!(b.try_acquire_or_renew().await.unwrap(), Attempt::Leading);

    // The network is back: a still sends nothing, and learns that b leads.
    fenced(perform(&writer, &set("3")).await, "the network back");
    assert_eq!(
        a.try_acquire_or_renew().await.unwrap(),
        Attempt::HeldBy("b".into())
    );
    fenced(perform(&writer, &set("4")).await, "b leads");
    assert_eq!(
        stored().await.as_deref(),
        Some("1"),
        "no write after the deadline"
    );
    assert_eq!(fence.refused(), 4);

    // a writes again only once it leads again.
    b.release().await.unwrap();
    assert_eq!(a.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
    perform(&writer, &set("5")).await.expect("leading again");
    assert_eq!(stored().await.as_deref(), Some("5"));
}
