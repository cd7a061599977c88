//! Bundle images pulled from a real registry (docker-registry on 127.0.0.1, started here): the
//! render of an image equals the render of its directory byte for byte, for 20 real bundles;
//! basic auth, TLS from a test CA, mirrors, blocked registries, missing tags, a registry that
//! goes down and comes back, the disk cache across a restart, and malicious layers.

use std::collections::BTreeMap;
use std::path::Path;

use olm_rs::catalog::bundle_dir::{self, render};
use olm_rs::oci::{BundlePuller, Credentials, Limits, PullError, PullerConfig};

use crate::registry_support::{self, Kind, PASSWORD, TestRegistry, USER, bundle_tar, gzip};

fn puller_for(reg: &TestRegistry, work: &Path, cache: Option<&Path>) -> BundlePuller {
    let (conf, ca) = reg.write_client_files(work);
    let cfg = PullerConfig::from_files(Some(&conf), ca.as_deref(), cache.map(Path::to_path_buf))
        .expect("puller config");
    BundlePuller::new(cfg).expect("puller")
}

fn dir_render_json(dir: &Path, image: &str) -> String {
    let read = bundle_dir::read(dir).expect("read bundle dir");
    let rendered = render::render(&read, image).expect("render bundle dir");
    serde_json::to_string(&render::bundle_blob(&rendered.bundle)).expect("json")
}

fn secret(user: &str, password: &str, host: &str) -> BTreeMap<String, Vec<u8>> {
    use base64::Engine as _;
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    BTreeMap::from([(
        ".dockerconfigjson".to_string(),
        format!(r#"{{"auths":{{"{host}":{{"auth":"{auth}"}}}}}}"#).into_bytes(),
    )])
}

fn first_real_bundle() -> std::path::PathBuf {
    registry_support::real_bundle_dirs(1)
        .pop()
        .expect("a real bundle")
        .1
}

async fn images_render_like_their_directories_for_20_real_bundles() {
    let reg = TestRegistry::start(Kind::Plain);
    let work = tempfile::tempdir().unwrap();
    let puller = puller_for(&reg, work.path(), None);
    let bundles = registry_support::real_bundle_dirs(20);
    assert_eq!(bundles.len(), 20, "the real catalog has 20 packages");
    for (package, dir) in &bundles {
        let (image, digest) = reg
            .push_bundle_dir(&format!("bundles/{package}"), "v1", dir)
            .await;
        let pulled = puller
            .pull(&image, &Credentials::anonymous())
            .await
            .unwrap_or_else(|e| panic!("{package}: {e}"));
        assert_eq!(pulled.digest, digest, "{package}");
        assert_eq!(pulled.image, image);
        let from_image = serde_json::to_string(&pulled.blob()).unwrap();
        assert_eq!(
            from_image,
            dir_render_json(dir, &image),
            "{package}: image and directory render differently"
        );
        assert!(pulled.csv().is_some(), "{package}");
    }
}

async fn basic_auth_takes_the_pull_secret_and_names_those_tried() {
    let reg = TestRegistry::start(Kind::BasicAuth);
    let work = tempfile::tempdir().unwrap();
    let (image, _) = reg
        .push_bundle_dir("private/bundle", "v1", &first_real_bundle())
        .await;
    let puller = puller_for(&reg, work.path(), None);

    let e = puller
        .pull(&image, &Credentials::anonymous())
        .await
        .unwrap_err();
    assert!(matches!(e, PullError::Unauthorized { .. }), "{e}");
    assert!(e.to_string().contains(&reg.host()), "{e}");
    assert!(e.to_string().contains("no pull secret"), "{e}");
    assert!(!e.is_transient());

    let mut wrong = Credentials::anonymous();
    wrong
        .add_secret(
            "operators",
            "wrong-login",
            "kubernetes.io/dockerconfigjson",
            &secret(USER, "not-the-password", &reg.host()),
        )
        .unwrap();
    let e = puller.pull(&image, &wrong).await.unwrap_err();
    let text = e.to_string();
    assert!(text.contains("operators/wrong-login"), "{text}");
    assert!(!text.contains("not-the-password"), "{text}");

    let mut right = wrong.clone();
    right
        .add_secret(
            "olm",
            "registry-login",
            "kubernetes.io/dockerconfigjson",
            &secret(USER, PASSWORD, &reg.host()),
        )
        .unwrap();
    let pulled = puller
        .pull(&image, &right)
        .await
        .expect("pull with the right secret");
    assert!(pulled.csv().is_some());
}

async fn tls_registries_need_their_ca() {
    let reg = TestRegistry::start(Kind::Tls);
    let work = tempfile::tempdir().unwrap();
    let (image, _) = reg
        .push_bundle_dir("tls/bundle", "v1", &first_real_bundle())
        .await;
    let (conf, _) = reg.write_client_files(work.path());
    let without_ca =
        BundlePuller::new(PullerConfig::from_files(Some(&conf), None, None).unwrap()).unwrap();
    let e = without_ca
        .pull(&image, &Credentials::anonymous())
        .await
        .unwrap_err();
    assert!(matches!(e, PullError::Unreachable { .. }), "{e}");
    assert!(e.to_string().to_lowercase().contains("certificate"), "{e}");

    let with_ca = puller_for(&reg, work.path(), None);
    let pulled = with_ca
        .pull(&image, &Credentials::anonymous())
        .await
        .unwrap();
    assert!(pulled.csv().is_some());
}

async fn missing_tags_blocked_registries_and_mirrors() {
    let reg = TestRegistry::start(Kind::Plain);
    let work = tempfile::tempdir().unwrap();
    let (image, digest) = reg
        .push_bundle_dir("ns/bundle", "v1", &first_real_bundle())
        .await;
    let puller = puller_for(&reg, work.path(), None);
    let none = Credentials::anonymous();

    let missing = format!("{}/ns/bundle:v9", reg.host());
    let e = puller.pull(&missing, &none).await.unwrap_err();
    assert!(matches!(e, PullError::NotFound { .. }), "{e}");
    assert!(e.to_string().contains(&missing), "{e}");
    let e = puller
        .pull(&format!("{}/ns/nothing:v1", reg.host()), &none)
        .await
        .unwrap_err();
    assert!(matches!(e, PullError::NotFound { .. }), "{e}");

    // A registry nobody can reach, mirrored by the test registry.
    let conf = work.path().join("mirror.conf");
    std::fs::write(
        &conf,
        format!(
            "[[registry]]\nprefix = \"quay.invalid/operators\"\nlocation = \"quay.invalid/operators\"\n\
             [[registry.mirror]]\nlocation = \"{}/ns\"\ninsecure = true\n\
             [[registry]]\nlocation = \"blocked.invalid\"\nblocked = true\n",
            reg.host()
        ),
    )
    .unwrap();
    let mirrored =
        BundlePuller::new(PullerConfig::from_files(Some(&conf), None, None).unwrap()).unwrap();
    let original = format!("quay.invalid/operators/bundle@{digest}");
    let pulled = mirrored
        .pull(&original, &none)
        .await
        .expect("pull via mirror");
    assert_eq!(pulled.image, original);
    assert_eq!(
        serde_json::to_string(&pulled.blob()).unwrap(),
        dir_render_json(&first_real_bundle(), &original)
    );
    let e = mirrored
        .pull("blocked.invalid/x/bundle:v1", &none)
        .await
        .unwrap_err();
    assert!(matches!(e, PullError::Blocked { .. }), "{e}");
    assert!(e.to_string().contains("blocked.invalid"), "{e}");
    drop(image);
}

async fn a_registry_down_is_transient_and_the_disk_cache_survives_a_restart() {
    let mut reg = TestRegistry::start(Kind::Plain);
    let work = tempfile::tempdir().unwrap();
    let cache = work.path().join("cache");
    let (by_digest, _) = reg
        .push_bundle_dir("ns/cached", "v1", &first_real_bundle())
        .await;
    let by_tag = format!("{}/ns/cached:v1", reg.host());
    let none = Credentials::anonymous();

    let first = puller_for(&reg, work.path(), Some(&cache));
    first.pull(&by_digest, &none).await.unwrap();
    assert_eq!(first.stats().downloads, 1);
    first.pull(&by_digest, &none).await.unwrap();
    assert_eq!(first.stats().memory_hits, 1);
    assert_eq!(first.stats().downloads, 1);

    reg.stop();
    // A new process: the digest comes from disk, with the registry down.
    let second = puller_for(&reg, work.path(), Some(&cache));
    assert!(
        second.cached(&by_tag).is_none(),
        "tags are not looked up on disk"
    );
    let again = second
        .pull(&by_digest, &none)
        .await
        .expect("from the disk cache");
    assert_eq!(second.stats().disk_hits, 1);
    assert_eq!(second.stats().downloads, 0);
    assert_eq!(
        serde_json::to_string(&again.blob()).unwrap(),
        dir_render_json(&first_real_bundle(), &by_digest),
        "the disk cache renders what the image did"
    );
    // A tag must be asked for: the registry is down.
    let e = second.pull(&by_tag, &none).await.unwrap_err();
    assert!(matches!(e, PullError::Unreachable { .. }), "{e}");
    assert!(e.is_transient(), "{e}");
    assert!(e.to_string().contains(&reg.host()), "{e}");

    reg.restart();
    let back = second.pull(&by_tag, &none).await.expect("registry is back");
    assert_eq!(back.digest, again.digest);
    // Same digest as on disk: nothing downloaded again.
    assert_eq!(second.stats().downloads, 0);
}

async fn malicious_layers_are_refused_naming_the_image_and_the_file() {
    let reg = TestRegistry::start(Kind::Plain);
    let work = tempfile::tempdir().unwrap();
    let cache = work.path().join("cache");
    let (conf, _) = reg.write_client_files(work.path());
    let mut cfg = PullerConfig::from_files(Some(&conf), None, Some(cache.clone())).unwrap();
    cfg.limits = Limits {
        max_file_bytes: 512 * 1024,
        ..Limits::default()
    };
    let puller = BundlePuller::new(cfg).unwrap();
    let good = bundle_tar(&first_real_bundle());

    let traversal = with_raw_entry(&good, "manifests/../../../etc/cron.d/evil", b"x", None);
    let symlink = with_raw_entry(&good, "manifests/zz-link.yaml", b"", Some("/etc/shadow"));
    let oversized = with_raw_entry(&good, "manifests/huge.yaml", &vec![b'a'; 600 * 1024], None);
    let cases = [
        ("traversal", traversal, "etc/cron.d/evil", "\"..\""),
        ("symlink", symlink, "manifests/zz-link.yaml", "not followed"),
        (
            "oversized",
            oversized,
            "manifests/huge.yaml",
            "allowed for one file",
        ),
    ];
    for (repo, layer, file, why) in cases {
        let (image, _) = reg
            .push_layers(
                &format!("evil/{repo}"),
                "v1",
                vec![(gzip(&layer), "application/vnd.oci.image.layer.v1.tar+gzip")],
            )
            .await;
        let e = puller
            .pull(&image, &Credentials::anonymous())
            .await
            .unwrap_err();
        let text = e.to_string();
        assert!(
            matches!(e, PullError::InvalidContent { .. }),
            "{repo}: {text}"
        );
        assert!(
            text.contains(&image) && text.contains(file) && text.contains(why),
            "{repo}: {text}"
        );
        assert!(!e.is_transient());
        assert!(puller.cached(&image).is_none(), "{repo}: nothing cached");
    }
    let cached: Vec<_> = std::fs::read_dir(cache.join("bundles")).unwrap().collect();
    assert!(cached.is_empty(), "no bad bundle reached the disk cache");
}

/// `tar` with one more entry appended as raw bytes (a path tar::Builder would refuse).
fn with_raw_entry(tar: &[u8], path: &str, data: &[u8], link: Option<&str>) -> Vec<u8> {
    let mut h = tar::Header::new_gnu();
    h.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
    match link {
        Some(l) => {
            h.as_old_mut().linkname[..l.len()].copy_from_slice(l.as_bytes());
            h.set_entry_type(tar::EntryType::Symlink);
        }
        None => h.set_entry_type(tar::EntryType::Regular),
    }
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    // Drop the two zero blocks that end the archive, append, and end it again.
    let mut out = tar[..tar.len() - 1024].to_vec();
    let mut b = tar::Builder::new(Vec::new());
    b.append(&h, data).unwrap();
    out.extend(b.into_inner().unwrap());
    out
}

async fn catalog_render_takes_images_and_directories_mixed() {
    let reg = TestRegistry::start(Kind::BasicAuth);
    let work = tempfile::tempdir().unwrap();
    let dir = first_real_bundle();
    let (image, _) = reg.push_bundle_dir("cli/bundle", "v1", &dir).await;
    let (conf, _) = reg.write_client_files(work.path());
    let auth_file = work.path().join("auth.json");
    std::fs::write(
        &auth_file,
        secret(USER, PASSWORD, &reg.host())[".dockerconfigjson"].clone(),
    )
    .unwrap();
    let run = |auth: &Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_olm-rs"))
            .args(["catalog", "render", &image])
            .arg(&dir)
            .arg("--registries-config")
            .arg(&conf)
            .env("REGISTRY_AUTH_FILE", auth)
            .output()
            .unwrap()
    };
    let out = tokio::task::block_in_place(|| run(&auth_file));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let blobs: Vec<serde_json::Value> = serde_json::Deserializer::from_slice(&out.stdout)
        .into_iter()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(blobs.len(), 2);
    assert_eq!(
        serde_json::to_string(&blobs[0]).unwrap(),
        dir_render_json(&dir, &image)
    );
    assert_eq!(
        serde_json::to_string(&blobs[1]).unwrap(),
        dir_render_json(&dir, "")
    );

    // Without the login: a plain-words error naming the image and the registry.
    let out = tokio::task::block_in_place(|| run(&work.path().join("none.json")));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("none.json"), "{err}");
    std::fs::write(work.path().join("none.json"), r#"{"auths":{}}"#).unwrap();
    let out = tokio::task::block_in_place(|| run(&work.path().join("none.json")));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&image) && err.contains("refused access"),
        "{err}"
    );
}

/// Multi-architecture bundle images are image indexes (manifest lists). Bundles hold no
/// binaries, so any entry would do, but the choice must not depend on the order a build tool
/// wrote: linux/amd64 when the index has it, else its first entry (docs/bundle-images.md).
async fn image_indexes_resolve_to_linux_amd64_else_their_first_entry() {
    let reg = TestRegistry::start(Kind::Plain);
    let work = tempfile::tempdir().unwrap();
    let puller = puller_for(&reg, work.path(), None);
    let bundles = registry_support::real_bundle_dirs(2);
    let (amd_package, amd_dir) = &bundles[0];
    let (arm_package, arm_dir) = &bundles[1];
    let (_, amd64) = reg.push_bundle_dir("multi/bundle", "amd64", amd_dir).await;
    let (_, arm64) = reg.push_bundle_dir("multi/bundle", "arm64", arm_dir).await;
    let csv_name = |dir: &Path| {
        let read = bundle_dir::read(dir).expect("read bundle dir");
        render::render(&read, "x").expect("render").bundle.name
    };

    // Pushes an index of `entries` as `multi/bundle:<tag>`, pulls it: the digest and CSV name.
    let pull_index = async |tag: &str, entries: &[(&str, &str, &str)]| {
        let index = reg.push_index("multi/bundle", tag, entries).await;
        let pulled = puller
            .pull(&index, &Credentials::anonymous())
            .await
            .unwrap_or_else(|e| panic!("{index}: {e}"));
        let name = pulled.csv().unwrap()["metadata"]["name"].clone();
        (pulled.digest.clone(), name)
    };

    // amd64 listed second: still the one taken.
    let (digest, name) = pull_index(
        "both",
        &[(&arm64, "linux", "arm64"), (&amd64, "linux", "amd64")],
    )
    .await;
    assert_eq!(digest, amd64, "{amd_package} is the linux/amd64 entry");
    assert_eq!(name, csv_name(amd_dir).as_str());

    // No amd64 entry: the first one.
    let (digest, name) = pull_index(
        "arm-only",
        &[(&arm64, "linux", "arm64"), (&amd64, "linux", "s390x")],
    )
    .await;
    assert_eq!(digest, arm64, "{arm_package} is the first entry");
    assert_eq!(name, csv_name(arm_dir).as_str());
}

/// quay.io, ghcr.io and Docker Hub hand out bearer tokens from a realm: anonymous ones for
/// public repositories, and ones for a login (from a pull secret) for private ones.
async fn bearer_tokens_from_the_registrys_realm_anonymous_and_with_a_pull_secret() {
    let reg = TestRegistry::start(Kind::Token);
    let work = tempfile::tempdir().unwrap();
    let bundle = first_real_bundle();
    let (public, _) = reg.push_bundle_dir("public/bundle", "v1", &bundle).await;
    let (private, _) = reg.push_bundle_dir("private/bundle", "v1", &bundle).await;
    let puller = puller_for(&reg, work.path(), None);

    let pulled = puller
        .pull(&public, &Credentials::anonymous())
        .await
        .unwrap_or_else(|e| panic!("anonymous token for {public}: {e}"));
    assert!(pulled.csv().is_some());

    let e = puller
        .pull(&private, &Credentials::anonymous())
        .await
        .unwrap_err();
    assert!(matches!(e, PullError::Unauthorized { .. }), "{e}");
    assert!(e.to_string().contains(&reg.host()), "{e}");

    let mut login = Credentials::anonymous();
    login
        .add_secret(
            "olm",
            "registry-login",
            "kubernetes.io/dockerconfigjson",
            &secret(USER, PASSWORD, &reg.host()),
        )
        .unwrap();
    let pulled = puller
        .pull(&private, &login)
        .await
        .unwrap_or_else(|e| panic!("token for a login, {private}: {e}"));
    assert!(pulled.csv().is_some());
}

crate::trials! {
    multi images_render_like_their_directories_for_20_real_bundles,
    multi basic_auth_takes_the_pull_secret_and_names_those_tried,
    multi tls_registries_need_their_ca,
    multi missing_tags_blocked_registries_and_mirrors,
    multi a_registry_down_is_transient_and_the_disk_cache_survives_a_restart,
    multi malicious_layers_are_refused_naming_the_image_and_the_file,
    multi catalog_render_takes_images_and_directories_mixed,
    multi image_indexes_resolve_to_linux_amd64_else_their_first_entry,
    multi bearer_tokens_from_the_registrys_realm_anonymous_and_with_a_pull_secret,
}
