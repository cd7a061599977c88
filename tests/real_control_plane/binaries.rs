//! The control plane's programs: kube-apiserver and kube-controller-manager unpacked once from
//! `../shared/k8s/bin/*.xz` into `target/k8s-bin/` (kept until `../shared/k8s/bin/SHA256SUMS`
//! changes), and Debian's etcd.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail, ensure};
use sha2::{Digest as _, Sha256};

/// The Kubernetes programs the harness runs: the control plane's two, then the node's
/// (tests/real_control_plane/real_node.rs), which only the real-node checks need.
pub const PROGRAMS: [&str; 6] = [
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "kube-proxy",
    "coredns",
];
/// The two every check needs.
const PLANE_PROGRAMS: [&str; 2] = ["kube-apiserver", "kube-controller-manager"];

/// Where the programs are, ready to run.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub etcd: PathBuf,
    pub kube_apiserver: PathBuf,
    pub kube_controller_manager: PathBuf,
    /// The directory of every program of [`PROGRAMS`] (the node's may be absent when
    /// `OLM_RS_K8S_BIN` names a directory without them).
    pub dir: PathBuf,
}

impl Binaries {
    /// The path of one of [`PROGRAMS`], when it is there.
    pub fn program(&self, name: &str) -> Option<PathBuf> {
        Some(self.dir.join(name)).filter(|p| p.is_file())
    }
}

/// Why the real control plane cannot run here: the reason to print when skipping.
#[derive(Debug)]
pub struct Unavailable(pub String);

/// Finds (and unpacks when needed) every program. `Err(Unavailable)` when one is absent (a fresh
/// clone without `../shared`, no etcd); any other failure is an error.
pub fn locate() -> anyhow::Result<Result<Binaries, Unavailable>> {
    let etcd = match etcd() {
        Some(etcd) => etcd,
        None => {
            return Ok(Err(Unavailable(
                "etcd not found (apt-get install etcd-server, or set OLM_RS_ETCD)".to_owned(),
            )));
        }
    };
    let dir = match std::env::var_os("OLM_RS_K8S_BIN") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            for program in PLANE_PROGRAMS {
                ensure!(
                    dir.join(program).is_file(),
                    "OLM_RS_K8S_BIN={}: no {program} there",
                    dir.display()
                );
            }
            dir
        }
        None => {
            let packed = match packed_dir() {
                Ok(packed) => packed,
                Err(why) => {
                    return Ok(Err(Unavailable(format!(
                        "Kubernetes programs not found: {why} (or set OLM_RS_K8S_BIN to a \
                         directory with kube-apiserver and kube-controller-manager)"
                    ))));
                }
            };
            let dir = target_dir()?.join("k8s-bin");
            unpack(&packed, &dir, &PROGRAMS)?;
            dir
        }
    };
    Ok(Ok(Binaries {
        etcd,
        kube_apiserver: dir.join("kube-apiserver"),
        kube_controller_manager: dir.join("kube-controller-manager"),
        dir,
    }))
}

fn etcd() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("OLM_RS_ETCD") {
        return Some(PathBuf::from(path)).filter(|p| p.is_file());
    }
    let default = PathBuf::from("/usr/bin/etcd");
    if default.is_file() {
        return Some(default);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("etcd"))
            .find(|p| p.is_file())
    })
}

/// `<shared>/k8s/bin`, or why it is not there.
fn packed_dir() -> Result<PathBuf, String> {
    shared_subdir("k8s/bin")
}

/// Real OLM v0.31's two programs (`../shared/olm/bin/{olm,catalog}.xz`, see
/// `../shared/olm/README.md`), unpacked once into `target/olm-bin/`: the directory holding
/// `olm`, `catalog` and OLM's CRDs' directory, or why there is none.
pub fn olm() -> anyhow::Result<Result<(PathBuf, PathBuf), Unavailable>> {
    let packed = match shared_subdir("olm/bin") {
        Ok(packed) => packed,
        Err(why) => return Ok(Err(Unavailable(format!("real OLM not found: {why}")))),
    };
    let dir = target_dir()?.join("olm-bin");
    unpack(&packed, &dir, &OLM_PROGRAMS)?;
    let crds = packed
        .parent()
        .map(|olm| olm.join("crds"))
        .context("../shared/olm has no parent")?;
    Ok(Ok((dir, crds)))
}

/// OLM's operator and catalog operator.
pub const OLM_PROGRAMS: [&str; 2] = ["olm", "catalog"];

/// `<shared>/<below>` holding a SHA256SUMS (the shared directory of
/// [`super::shared_data::locate`]), or why it is not there.
fn shared_subdir(below: &str) -> Result<PathBuf, String> {
    let dir = super::shared_data::locate()?.join(below);
    if dir.join("SHA256SUMS").is_file() {
        Ok(dir)
    } else {
        Err(format!("{}: no SHA256SUMS there", dir.display()))
    }
}

/// The build directory (`target/`): three levels above this test binary
/// (`target/debug/deps/e2e_real-…`), so `CARGO_TARGET_DIR` is honoured.
fn target_dir() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("locating the test binary")?;
    exe.ancestors()
        .nth(3)
        .map(Path::to_path_buf)
        .with_context(|| format!("{}: not inside a target directory", exe.display()))
}

/// Unpacks every program into `dir` unless `dir/SHA256SUMS` already equals the source's. Each
/// `.xz` is checked against SHA256SUMS first; unpacking goes to a temporary name and is renamed,
/// so test binaries running at the same time never see half a file.
fn unpack(packed: &Path, dir: &Path, programs: &[&str]) -> anyhow::Result<()> {
    let sums_path = packed.join("SHA256SUMS");
    let sums = std::fs::read_to_string(&sums_path)
        .with_context(|| format!("reading {}", sums_path.display()))?;
    let stamp = dir.join("SHA256SUMS");
    let done = std::fs::read_to_string(&stamp).is_ok_and(|old| old == sums)
        && programs.iter().all(|p| dir.join(p).is_file());
    if done {
        return Ok(());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let started = std::time::Instant::now();
    std::thread::scope(|scope| {
        let jobs: Vec<_> = programs
            .iter()
            .map(|program| scope.spawn(|| unpack_one(packed, &sums, program, dir)))
            .collect();
        jobs.into_iter()
            .try_for_each(|job| job.join().unwrap_or_else(|_| bail!("unpacking panicked")))
    })?;
    let tmp = dir.join(format!("SHA256SUMS.{}", std::process::id()));
    std::fs::write(&tmp, &sums)?;
    std::fs::rename(&tmp, &stamp)?;
    println!(
        "e2e-real: unpacked {} into {} in {:.1}s",
        programs.join(" and "),
        dir.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn unpack_one(packed: &Path, sums: &str, program: &str, dir: &Path) -> anyhow::Result<()> {
    let file = format!("{program}.xz");
    let source = packed.join(&file);
    let expected = sums
        .lines()
        .find_map(|line| {
            let (sum, name) = line.split_once(char::is_whitespace)?;
            (name.trim_start_matches([' ', '*']) == file).then_some(sum)
        })
        .with_context(|| {
            format!(
                "{}: no line for {file}",
                packed.join("SHA256SUMS").display()
            )
        })?;
    let bytes = std::fs::read(&source).with_context(|| format!("reading {}", source.display()))?;
    let actual = hex(&Sha256::digest(&bytes));
    ensure!(
        actual == expected,
        "{}: SHA-256 {actual}, SHA256SUMS says {expected}",
        source.display()
    );
    let tmp = dir.join(format!("{program}.{}.partial", std::process::id()));
    let out = std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let status = Command::new("xz")
        .arg("-dc")
        .arg(&source)
        .stdout(out)
        .status()
        .context("running xz -dc (install xz-utils)")?;
    ensure!(status.success(), "xz -dc {}: {status}", source.display());
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))?;
    std::fs::rename(&tmp, dir.join(program))?;
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
