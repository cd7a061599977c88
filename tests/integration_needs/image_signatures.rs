//! Image signatures for real (docs/image-signatures.md §8): skopeo makes the keys and signs a
//! catalog image (the real v4.20 file-based catalog) into a `docker-registry` as sigstore
//! attachments; for each case — right key, other key, unsigned, a `reject` scope, a re-tag
//! into another repository under each identity rule, attachments off — `skopeo copy --policy`
//! and olm-rs decide on the same image with the same policy and registries.d, and must agree.
//! A refused image is never unpacked, and a refused bundle pull names the scope and the reason.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use olm_rs::oci::{BundlePuller, Credentials, PullError, PullerConfig, load_image_policy};

use crate::registry_support::{Kind, TestRegistry, files_of};
use crate::signature_support::{Skopeo, SkopeoVerdict};

struct World {
    registry: TestRegistry,
    skopeo: Skopeo,
    dir: tempfile::TempDir,
    conf: PathBuf,
    /// registries.d with attachments on for the registry, and an empty one.
    attachments_on: PathBuf,
    attachments_off: PathBuf,
    ours: PathBuf,
    theirs: PathBuf,
    /// The manifest digest of the catalog image (every copy keeps it).
    digest: String,
    /// registries.d with `olm/lookaside` signed in a `file://` lookaside, and the same
    /// storage served over HTTP (attachments off in both).
    lookaside_file: PathBuf,
    lookaside_http: PathBuf,
    /// The HTTP server of the lookaside (python3's http.server), stopped when dropped.
    _lookaside_server: Server,
}

/// A child process killed when dropped.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `dir` served over plain HTTP on loopback; the base URL.
fn serve_dir(dir: &Path) -> (Server, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = std::process::Command::new("python3")
        .args([
            "-m",
            "http.server",
            "--bind",
            "127.0.0.1",
            &port.to_string(),
            "--directory",
        ])
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            crate::common::skip(&format!("needs python3 to serve a lookaside: {e}"))
        });
    let server = Server(child);
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "http.server did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (server, format!("http://127.0.0.1:{port}/sigstore"))
}

impl World {
    async fn start() -> World {
        let skopeo = Skopeo::find();
        let registry = TestRegistry::start(Kind::Plain);
        let dir = tempfile::tempdir().unwrap();
        let (conf, _) = registry.write_client_files(dir.path());
        let attachments_on = dir.path().join("registries.d");
        std::fs::create_dir_all(&attachments_on).unwrap();
        std::fs::write(
            attachments_on.join("test.yaml"),
            format!(
                "docker:\n  {}:\n    use-sigstore-attachments: true\n",
                registry.host()
            ),
        )
        .unwrap();
        let attachments_off = dir.path().join("registries-off.d");
        std::fs::create_dir_all(&attachments_off).unwrap();
        let ours = skopeo.generate_key(&dir.path().join("ours"));
        let theirs = skopeo.generate_key(&dir.path().join("theirs"));
        let fbc = files_of(&crate::common::fbc_v420());
        let (source, digest) = registry
            .push_catalog("src/catalog", "v4.20", &fbc, true)
            .await;
        let host = registry.host();
        let on = &attachments_on;
        skopeo.copy(
            on,
            &source,
            &format!("{host}/olm/catalog:v4.20"),
            Some(&dir.path().join("ours")),
        );
        skopeo.copy(on, &source, &format!("{host}/olm/unsigned:v4.20"), None);
        // A re-tag into another repository: the signature travels, naming olm/catalog.
        skopeo.copy(
            on,
            &format!("{host}/olm/catalog:v4.20"),
            &format!("{host}/mirror/catalog:v4.20"),
            None,
        );
        // A lookaside: skopeo signs into a `dir:` copy, whose `signature-1` is laid out as
        // containers/image lays out lookaside storage; the image itself carries no attachment.
        let lookaside_image = format!("{host}/olm/lookaside:v4.20");
        skopeo.copy(on, &source, &lookaside_image, None);
        let signed_dir = dir.path().join("signed-dir");
        skopeo.sign_into_dir(
            &lookaside_image,
            &signed_dir,
            &lookaside_image,
            &dir.path().join("ours"),
        );
        let hex = digest.strip_prefix("sha256:").unwrap();
        let store = dir.path().join("web/sigstore");
        let sig_dir = store.join(format!("olm/lookaside@sha256={hex}"));
        std::fs::create_dir_all(&sig_dir).unwrap();
        std::fs::copy(signed_dir.join("signature-1"), sig_dir.join("signature-1")).unwrap();
        let (server, base) = serve_dir(&dir.path().join("web"));
        let registries_d_with = |name: &str, base: &str| {
            let d = dir.path().join(name);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(
                d.join("lookaside.yaml"),
                format!("docker:\n  {host}/olm/lookaside:\n    lookaside: {base}\n"),
            )
            .unwrap();
            d
        };
        let lookaside_file =
            registries_d_with("registries-file.d", &format!("file://{}", store.display()));
        let lookaside_http = registries_d_with("registries-http.d", &base);
        World {
            registry,
            skopeo,
            dir,
            conf,
            attachments_on,
            attachments_off,
            ours,
            theirs,
            digest,
            lookaside_file,
            lookaside_http,
            _lookaside_server: server,
        }
    }

    fn host(&self) -> String {
        self.registry.host()
    }

    fn write_policy(&self, name: &str, json: &serde_json::Value) -> PathBuf {
        let p = self.dir.path().join(format!("{name}.json"));
        std::fs::write(&p, serde_json::to_vec_pretty(json).unwrap()).unwrap();
        p
    }

    fn puller(&self, policy: Option<&Path>, registries_d: &Path) -> BundlePuller {
        let image_policy = load_image_policy(policy, Some(registries_d)).unwrap();
        let config = PullerConfig::from_files(Some(&self.conf), None, None).unwrap();
        BundlePuller::new(PullerConfig {
            image_policy: std::sync::Arc::new(image_policy),
            ..config
        })
        .unwrap()
    }

    /// olm-rs's verdict: the digest a tag resolves to, then the policy's check of it.
    async fn olm_rs_verdict(
        &self,
        policy: &Path,
        registries_d: &Path,
        image: &str,
    ) -> Result<(), (String, String)> {
        let puller = self.puller(Some(policy), registries_d);
        let creds = Credentials::anonymous();
        let digest = puller.digest(image, &creds).await.unwrap();
        assert_eq!(digest, self.digest, "{image}");
        match puller.verify(image, &digest, &creds).await {
            Ok(()) => Ok(()),
            Err(PullError::Refused(r)) => {
                Err((r.kind.to_string(), format!("{}: {}", r.scope, r.reason)))
            }
            Err(other) => panic!("{image}: not a verdict: {other}"),
        }
    }
}

fn sigstore(key: &Path, identity: Option<serde_json::Value>) -> serde_json::Value {
    let mut req = serde_json::json!({"type": "sigstoreSigned", "keyPath": key});
    if let Some(id) = identity {
        req["signedIdentity"] = id;
    }
    req
}

async fn skopeo_and_olm_rs_agree_on_every_signature_case() {
    let w = World::start().await;
    let host = w.host();
    let signed = format!("{host}/olm/catalog:v4.20");
    let by_digest = format!("{host}/olm/catalog@{}", w.digest);
    let unsigned = format!("{host}/olm/unsigned:v4.20");
    let retagged = format!("{host}/mirror/catalog:v4.20");
    let only = |req: serde_json::Value| serde_json::json!({"default": [{"type": "reject"}], "transports": {"docker": {host.clone(): [req]}}});
    let pem_b64 = base64::engine::general_purpose::STANDARD.encode(std::fs::read(&w.ours).unwrap());
    let on = w.attachments_on.clone();
    let off = w.attachments_off.clone();
    let (file, http) = (w.lookaside_file.clone(), w.lookaside_http.clone());
    let in_lookaside = format!("{host}/olm/lookaside:v4.20");
    #[rustfmt::skip]
    let cases: Vec<(&str, &str, serde_json::Value, &Path, Option<&str>)> = vec![
        ("signed, right key", &signed, only(sigstore(&w.ours, None)), &on, None),
        ("signed, by digest", &by_digest, only(sigstore(&w.ours, None)), &on, None),
        ("signed, right key as keyData", &signed, only(serde_json::json!({"type": "sigstoreSigned", "keyData": pem_b64})), &on, None),
        ("signed, other key", &signed, only(sigstore(&w.theirs, None)), &on, Some("WrongKey")),
        ("unsigned", &unsigned, only(sigstore(&w.ours, None)), &on, Some("NoSignature")),
        ("signed, attachments off in registries.d", &signed, only(sigstore(&w.ours, None)), &off, Some("NoSignature")),
        ("signed, reject scope", &signed,
            serde_json::json!({"default": [{"type": "insecureAcceptAnything"}], "transports": {"docker": {format!("{host}/olm"): [{"type": "reject"}]}}}),
            &on, Some("Rejected")),
        ("unsigned, a more specific scope accepts it", &unsigned,
            serde_json::json!({"default": [{"type": "reject"}], "transports": {"docker": {
                host.clone(): [sigstore(&w.ours, None)],
                format!("{host}/olm/unsigned"): [{"type": "insecureAcceptAnything"}]}}}),
            &on, None),
        ("re-tagged, matchRepoDigestOrExact", &retagged, only(sigstore(&w.ours, None)), &on, Some("IdentityMismatch")),
        ("re-tagged, matchRepository", &retagged, only(sigstore(&w.ours, Some(serde_json::json!({"type": "matchRepository"})))), &on, Some("IdentityMismatch")),
        ("re-tagged, exactRepository of the origin", &retagged,
            only(sigstore(&w.ours, Some(serde_json::json!({"type": "exactRepository", "dockerRepository": format!("{host}/olm/catalog")})))), &on, None),
        ("re-tagged, remapIdentity to the origin", &retagged,
            only(sigstore(&w.ours, Some(serde_json::json!({"type": "remapIdentity", "prefix": format!("{host}/mirror"), "signedPrefix": format!("{host}/olm")})))), &on, None),
        ("signed in a file:// lookaside", &in_lookaside, only(sigstore(&w.ours, None)), &file, None),
        ("signed in an http:// lookaside", &in_lookaside, only(sigstore(&w.ours, None)), &http, None),
        ("signed in a lookaside, other key", &in_lookaside, only(sigstore(&w.theirs, None)), &http, Some("WrongKey")),
        ("signed in a lookaside that registries.d does not name", &in_lookaside, only(sigstore(&w.ours, None)), &on, Some("NoSignature")),
        ("signed in a file:// lookaside, re-tagged identity rule refuses", &in_lookaside,
            only(sigstore(&w.ours, Some(serde_json::json!({"type": "exactReference", "dockerReference": format!("{host}/olm/lookaside:other")})))), &file, Some("IdentityMismatch")),
        ("signed, exactReference naming another tag", &signed,
            only(sigstore(&w.ours, Some(serde_json::json!({"type": "exactReference", "dockerReference": format!("{host}/olm/catalog:other")})))), &on, Some("IdentityMismatch")),
    ];
    let mut table = Vec::new();
    for (i, (name, image, policy, registries_d, want)) in cases.into_iter().enumerate() {
        let file = w.write_policy(&format!("policy-{i}"), &policy);
        let skopeo = w.skopeo.verdict(&file, registries_d, image);
        let ours = w.olm_rs_verdict(&file, registries_d, image).await;
        match (&skopeo, &ours, want) {
            (SkopeoVerdict::Accepted, Ok(()), None) => {}
            (SkopeoVerdict::Refused(words), Err((kind, _)), Some(w)) if kind == w => {
                assert!(
                    words.contains("rejected"),
                    "{name}: skopeo failed for another reason: {words}"
                );
            }
            _ => panic!("{name} ({image}): skopeo {skopeo:?}, olm-rs {ours:?}, expected {want:?}"),
        }
        table.push(format!(
            "{name}: {}",
            match &ours {
                Ok(()) => "accepted".to_string(),
                Err((k, why)) => format!("refused {k} ({why})"),
            }
        ));
    }
    eprintln!("skopeo and olm-rs agree:\n  {}", table.join("\n  "));
}

async fn refused_images_are_never_unpacked_and_the_cost_of_a_check_is_measured() {
    let w = World::start().await;
    let host = w.host();
    let creds = Credentials::anonymous();
    let policy = w.write_policy(
        "policy",
        &serde_json::json!({"default": [{"type": "reject"}], "transports": {"docker": {host.clone(): [sigstore(&w.ours, None)]}}}),
    );
    let unsigned = format!("{host}/olm/unsigned:v4.20");
    let signed = format!("{host}/olm/catalog:v4.20");

    // A catalog pull of the unsigned image is refused before any layer is fetched.
    let puller = w.puller(Some(&policy), &w.attachments_on);
    let e = puller
        .pull_catalog(&unsigned, &w.digest, &creds)
        .await
        .unwrap_err();
    let PullError::Refused(r) = &e else {
        panic!("{e}");
    };
    assert_eq!(
        (r.kind, r.scope.as_str()),
        (
            "NoSignature",
            format!("transports.docker.{host:?}").as_str()
        )
    );
    assert!(
        e.to_string().contains(&unsigned) && e.to_string().contains("no signature"),
        "{e}"
    );
    // A bundle pull is checked the same way (tag resolved to its digest, then the check).
    let e = puller.pull(&unsigned, &creds).await.unwrap_err();
    assert!(
        matches!(&e, PullError::Refused(r) if r.kind == "NoSignature"),
        "{e}"
    );
    assert_eq!(
        puller.stats().downloads,
        0,
        "nothing of a refused image was downloaded"
    );
    // The signed one is pulled and unpacked.
    let pulled = puller
        .pull_catalog(&signed, &w.digest, &creds)
        .await
        .unwrap();
    assert!(!pulled.files.is_empty());

    // Figures: the check's cost (one manifest and one blob fetch, one ECDSA check) against
    // resolving the tag and pulling the catalog, and whole catalog pulls with the policy (the
    // signature in the attachment; in a lookaside over HTTP) and without, each on a new
    // client, in a rotating order (the machine is shared: order must not favour one).
    // `OLM_RS_SIGNATURE_FIGURE_RUNS` sets the number of rounds (7 by default).
    let runs: usize = std::env::var("OLM_RS_SIGNATURE_FIGURE_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7)
        .max(1);
    let in_lookaside = format!("{host}/olm/lookaside:v4.20");
    let lookaside_policy = w.write_policy(
        "policy-lookaside",
        &serde_json::json!({"default": [{"type": "reject"}], "transports": {"docker": {host.clone(): [sigstore(&w.ours, None)]}}}),
    );
    // resolve, check, pull without policy, pull with (attachment), pull with (lookaside).
    let mut times: [Vec<Duration>; 5] = Default::default();
    for round in 0..runs {
        for step in 0..4 {
            match (round + step) % 4 {
                0 => {
                    let p = w.puller(Some(&policy), &w.attachments_on);
                    let t = Instant::now();
                    let digest = p.digest(&signed, &creds).await.unwrap();
                    times[0].push(t.elapsed());
                    let t = Instant::now();
                    p.verify(&signed, &digest, &creds).await.unwrap();
                    times[1].push(t.elapsed());
                }
                1 => {
                    let p = w.puller(None, &w.attachments_on);
                    let t = Instant::now();
                    p.pull_catalog(&signed, &w.digest, &creds).await.unwrap();
                    times[2].push(t.elapsed());
                }
                2 => {
                    let p = w.puller(Some(&policy), &w.attachments_on);
                    let t = Instant::now();
                    p.pull_catalog(&signed, &w.digest, &creds).await.unwrap();
                    times[3].push(t.elapsed());
                }
                _ => {
                    let p = w.puller(Some(&lookaside_policy), &w.lookaside_http);
                    let t = Instant::now();
                    p.pull_catalog(&in_lookaside, &w.digest, &creds)
                        .await
                        .unwrap();
                    times[4].push(t.elapsed());
                }
            }
        }
    }
    let [resolve, check, open, attached, lookaside] = times.map(|mut v| {
        v.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        (ms(v[v.len() / 2]), ms(v[0]))
    });
    eprintln!(
        "FIGURES image policy on the v4.20 catalog image ({} files), {runs} rounds, median (min) ms: \
         tag→digest {:.1} ({:.1}); signature check {:.1} ({:.1}); whole catalog pull without a \
         policy {:.1} ({:.1}), with the signature in the attachment {:.1} ({:.1}), in an HTTP \
         lookaside {:.1} ({:.1})",
        pulled.files.len(),
        resolve.0,
        resolve.1,
        check.0,
        check.1,
        open.0,
        open.1,
        attached.0,
        attached.1,
        lookaside.0,
        lookaside.1,
    );
}

/// The content condition of a CatalogSource: (status, reason, message).
fn content_condition(cs: &olm_rs::api::CatalogSource) -> Option<(String, String, String)> {
    cs.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == olm_rs::catalog_source::in_process::CONTENT_CONDITION)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

async fn a_catalog_serves_signed_content_and_keeps_it_when_the_tag_moves_to_an_unsigned_digest() {
    use crate::catalog_source_common::*;
    use jiff::SignedDuration;
    use k8s_openapi::api::events::v1::Event;
    use kube::api::{Api, ListParams, Patch, PatchParams};
    use olm_rs::api::CatalogRef;
    use olm_rs::api::CatalogSource;

    let w = World::start().await;
    let host = w.host();
    let policy = w.write_policy(
        "policy",
        &serde_json::json!({"default": [{"type": "reject"}], "transports": {"docker": {host.clone(): [sigstore(&w.ours, None)]}}}),
    );
    let image_policy = load_image_policy(Some(&policy), Some(&w.attachments_on)).unwrap();
    let h = start(Setup {
        manual_clock: true,
        registries_conf: Some(w.conf.clone()),
        image_policy: Some(std::sync::Arc::new(image_policy)),
        ..Setup::default()
    })
    .await;
    let clock = h.clock.clone().unwrap();
    let signed = format!("{host}/olm/catalog:v4.20");
    let unsigned = format!("{host}/olm/unsigned:v4.20");
    for (name, image) in [("signed", &signed), ("unsigned", &unsigned)] {
        create(
            &h,
            &catalog_source(
                "team-a",
                name,
                serde_json::json!({"sourceType": "grpc", "image": image,
                    "updateStrategy": {"registryPoll": {"interval": "10m"}}}),
            ),
        )
        .await;
    }
    let digest = w.digest.clone();
    status_where(&h, "team-a", "signed", "signed catalog served", |s| {
        state_of(s).as_deref() == Some("READY")
            && s.conditions
                .iter()
                .flatten()
                .any(|c| c.status == "True" && c.message.contains(&digest))
    })
    .await;
    let key = CatalogRef::new("team-a", "signed");
    let served = h.ctx.catalogs.get(&key).unwrap().index.unwrap();
    assert!(!served.packages().is_empty());
    let refused = status_where(&h, "team-a", "unsigned", "unsigned catalog refused", |s| {
        s.conditions
            .iter()
            .flatten()
            .any(|c| c.reason == "ImagePolicyRefused")
    })
    .await;
    let (status, _, message) = content_condition(&refused).unwrap();
    assert_eq!(status, "False");
    assert!(
        message.contains(&unsigned)
            && message.contains(&format!("transports.docker.{host:?}"))
            && message.contains("no signature"),
        "{message}"
    );
    assert!(
        h.ctx
            .catalogs
            .get(&CatalogRef::new("team-a", "unsigned"))
            .and_then(|c| c.index)
            .is_none()
    );
    let events: Api<Event> = Api::namespaced(h.client.clone(), "team-a");
    eventually("a warning event names the refusal", || async {
        events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some("ImagePolicyRefused")
                    && e.note.as_deref().is_some_and(|n| n.contains(&unsigned))
            })
    })
    .await;

    // The tag moves to content nobody signed: refused at the poll, the signed content stays.
    let (_, moved) = w
        .registry
        .push_catalog(
            "olm/catalog",
            "v4.20",
            &files_of(&crate::common::fbc_v420())[..3],
            true,
        )
        .await;
    assert_ne!(moved, w.digest);
    clock.advance(SignedDuration::from_mins(11));
    let api: Api<CatalogSource> = Api::namespaced(h.client.clone(), "team-a");
    api.patch(
        "signed",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"labels": {"nudge": "1"}}})),
    )
    .await
    .unwrap();
    let cs = status_where(&h, "team-a", "signed", "new digest refused", |s| {
        s.conditions
            .iter()
            .flatten()
            .any(|c| c.reason == "ImagePolicyRefused")
    })
    .await;
    let (_, _, message) = content_condition(&cs).unwrap();
    assert!(
        message.contains(&moved)
            && message.contains(&format!("still serving {signed}@{}", w.digest)),
        "{message}"
    );
    assert_eq!(
        state_of(cs.status.as_ref().unwrap()).as_deref(),
        Some("READY")
    );
    assert!(
        std::sync::Arc::ptr_eq(&served, &h.ctx.catalogs.get(&key).unwrap().index.unwrap()),
        "the last good content keeps serving"
    );
}

fn olm_rs_run_does_not_start_on_an_invalid_policy() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.json");
    std::fs::write(
        &policy,
        r#"{"default": [{"type": "reject"}], "transports": {"docker": {"quay.io/acme": [{"type": "sigstoreSigned", "keyPath": "/no/such/key.pub"}]}}}"#,
    )
    .unwrap();
    let bad_d = dir.path().join("registries.d");
    std::fs::create_dir_all(&bad_d).unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_olm-rs"))
            .arg("run")
            .args(args)
            // No cluster: a run that got past the policy would fail on the credentials.
            .env("KUBECONFIG", dir.path().join("no-kubeconfig"))
            .env_remove("KUBERNETES_SERVICE_HOST")
            .output()
            .unwrap()
    };
    let out = run(&["--image-policy", policy.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(policy.to_str().unwrap())
            && stderr.contains(r#"transports.docker."quay.io/acme"[0].keyPath"#)
            && stderr.contains("/no/such/key.pub"),
        "{stderr}"
    );
    // A registries.d that defines default-docker twice stops it too, naming both files.
    std::fs::write(
        &policy,
        r#"{"default": [{"type": "insecureAcceptAnything"}]}"#,
    )
    .unwrap();
    for f in ["a.yaml", "b.yaml"] {
        std::fs::write(
            bad_d.join(f),
            "default-docker:\n  use-sigstore-attachments: true\n",
        )
        .unwrap();
    }
    let out = run(&[
        "--image-policy",
        policy.to_str().unwrap(),
        "--registries-d",
        bad_d.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("b.yaml") && stderr.contains("a.yaml") && stderr.contains("default-docker"),
        "{stderr}"
    );
    assert!(!stderr.contains("Kubernetes credentials"), "{stderr}");
}

/// `helm template charts/olm-rs` with `args`; the documents rendered (`Err`: helm's words).
fn helm_template(args: &[&str]) -> Result<Vec<serde_json::Value>, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/helm");
    let found = std::process::Command::new(&script)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .unwrap_or_else(|| crate::common::skip("needs helm (.ci/helm fetches it)"));
    let helm = String::from_utf8_lossy(&found.stdout).trim().to_owned();
    let out = std::process::Command::new(helm)
        .args(["template", "olm-rs"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/olm-rs"))
        .args(["--namespace", "olm"])
        .args(args)
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = String::from_utf8(out.stdout).unwrap();
    Ok(serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .filter(|v: &serde_json::Value| v.is_object())
        .collect())
}

/// The chart gives the controller the policy both ways docs/image-signatures.md §7 says: as
/// values (a ConfigMap whose files land where the policy's `keyPath` names them), or the
/// node's own files (read-only hostPath mounts, and the key and lookaside directories listed).
fn the_chart_mounts_the_policy_from_values_or_from_the_node() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.json");
    std::fs::write(
        &policy,
        r#"{"default": [{"type": "reject"}], "transports": {"docker": {"quay.io/acme": [{"type": "sigstoreSigned", "keyPath": "/etc/olm-rs/image-policy/keys/acme.pub"}]}}}"#,
    )
    .unwrap();
    let yaml = dir.path().join("acme.yaml");
    std::fs::write(
        &yaml,
        "docker:\n  quay.io/acme:\n    use-sigstore-attachments: true\n",
    )
    .unwrap();
    let key = dir.path().join("acme.pub");
    std::fs::write(
        &key,
        "-----BEGIN PUBLIC KEY-----\nx\n-----END PUBLIC KEY-----\n",
    )
    .unwrap();
    let set_file = |k: &str, p: &Path| format!("{k}={}", p.display());
    let docs = helm_template(&[
        "--set",
        "imagePolicy.source=values",
        "--set-file",
        &set_file("imagePolicy.policy", &policy),
        "--set-file",
        &set_file(r"imagePolicy.registriesD.acme\.yaml", &yaml),
        "--set-file",
        &set_file(r"imagePolicy.keys.acme\.pub", &key),
    ])
    .unwrap();
    let find = |kind: &str, name: &str| {
        docs.iter()
            .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {kind} {name}"))
    };
    let deployment = find("Deployment", "olm-rs-controller");
    let pod = &deployment["spec"]["template"]["spec"];
    let args: Vec<&str> = pod["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert!(
        args.contains(&"--image-policy=/etc/olm-rs/image-policy/policy.json")
            && args.contains(&"--registries-d=/etc/olm-rs/image-policy/registries.d"),
        "{args:?}"
    );
    let config_map = find("ConfigMap", "olm-rs-image-policy");
    let served: serde_json::Value =
        serde_json::from_str(config_map["data"]["policy.json"].as_str().unwrap()).unwrap();
    assert_eq!(
        served,
        serde_json::from_slice::<serde_json::Value>(&std::fs::read(&policy).unwrap()).unwrap()
    );
    // Each file lands at the path the policy and registries.d are read from.
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "image-policy")
        .unwrap();
    let items: Vec<(String, String)> = volume["configMap"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["key"].as_str().unwrap().into(),
                i["path"].as_str().unwrap().into(),
            )
        })
        .collect();
    for (key, path) in [
        ("policy.json", "policy.json"),
        ("registries.d-acme.yaml", "registries.d/acme.yaml"),
        ("key-acme.pub", "keys/acme.pub"),
    ] {
        assert!(items.contains(&(key.into(), path.into())), "{items:?}");
        assert!(
            config_map["data"][key].is_string(),
            "{key} not in the ConfigMap"
        );
    }

    // The node's files: read-only hostPath mounts at /host/…, key directories at their path.
    let docs = helm_template(&[
        "--set",
        "imagePolicy.source=node",
        "--set",
        "imagePolicy.nodeKeyDirs={/etc/pki/containers,/var/lib/containers/sigstore}",
    ])
    .unwrap();
    let deployment = docs
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .unwrap()
        .clone();
    let pod = &deployment["spec"]["template"]["spec"];
    let args = pod["containers"][0]["args"].to_string();
    assert!(
        args.contains("--image-policy=/host/etc/containers/policy.json")
            && args.contains("--registries-d=/host/etc/containers/registries.d"),
        "{args}"
    );
    let mounts = pod["containers"][0]["volumeMounts"].as_array().unwrap();
    let volumes = pod["volumes"].as_array().unwrap();
    for (host, at) in [
        (
            "/etc/containers/policy.json",
            "/host/etc/containers/policy.json",
        ),
        (
            "/etc/containers/registries.d",
            "/host/etc/containers/registries.d",
        ),
        ("/etc/pki/containers", "/etc/pki/containers"),
        (
            "/var/lib/containers/sigstore",
            "/var/lib/containers/sigstore",
        ),
    ] {
        let volume = volumes
            .iter()
            .find(|v| v["hostPath"]["path"] == host)
            .unwrap_or_else(|| panic!("no hostPath {host}: {volumes:?}"));
        let mount = mounts
            .iter()
            .find(|m| m["name"] == volume["name"])
            .unwrap_or_else(|| panic!("{host} not mounted"));
        assert_eq!(
            (mount["mountPath"].as_str(), &mount["readOnly"]),
            (Some(at), &serde_json::json!(true))
        );
    }
    // A source the chart does not know, or values without a policy, fail the install.
    let bad = helm_template(&["--set", "imagePolicy.source=nodes"]).unwrap_err();
    assert!(bad.contains("imagePolicy.source must be"), "{bad}");
    let bad = helm_template(&["--set", "imagePolicy.source=values"]).unwrap_err();
    assert!(bad.contains("needs imagePolicy.policy"), "{bad}");
}

crate::trials! {
    multi skopeo_and_olm_rs_agree_on_every_signature_case,
    multi refused_images_are_never_unpacked_and_the_cost_of_a_check_is_measured,
    multi a_catalog_serves_signed_content_and_keeps_it_when_the_tag_moves_to_an_unsigned_digest,
    sync olm_rs_run_does_not_start_on_an_invalid_policy,
    sync the_chart_mounts_the_policy_from_values_or_from_the_node,
}
