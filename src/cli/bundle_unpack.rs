//! `olm-rs bundle-unpack install DIR | emit`: the two halves of an unpack pod
//! (docs/bundle-images.md, "When only the node can pull"; `bundle_unpack::unpack_pod`).
//! `install` runs in the olm-rs image and copies this binary (and, for a dynamically linked
//! build, its loader and libraries) into the pod's shared volume, as OLM's util container
//! copies `cpb`; `emit` runs from that copy inside the bundle image and writes the bundle's
//! `manifests/` and `metadata/` to stdout (`bundle_unpack::handback`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Subcommand};

use olm_rs::bundle_unpack::handback;

#[derive(Debug, Args)]
pub struct BundleUnpackArgs {
    #[command(subcommand)]
    pub command: UnpackCommand,
}

#[derive(Debug, Subcommand)]
pub enum UnpackCommand {
    /// Copy this binary (with its loader and libraries when dynamically linked) into DIR.
    Install { dir: PathBuf },
    /// Write ROOT's manifests/ and metadata/ to stdout as a framed archive.
    Emit {
        #[arg(long, default_value = "/")]
        root: PathBuf,
    },
}

pub fn run(args: BundleUnpackArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        UnpackCommand::Install { dir } => install(&dir),
        UnpackCommand::Emit { root } => emit(&root),
    }
}

fn install(dir: &Path) -> anyhow::Result<ExitCode> {
    let exe = std::fs::read_link("/proc/self/exe").context("finding this binary")?;
    copy_executable(&exe, &dir.join("olm-rs"))?;
    let libraries = mapped_libraries();
    if !libraries.is_empty() {
        let lib = dir.join("lib");
        std::fs::create_dir_all(&lib).with_context(|| format!("creating {}", lib.display()))?;
        for library in libraries {
            let Some(file) = library.file_name() else {
                continue;
            };
            copy_executable(&library, &lib.join(file))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn copy_executable(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::copy(from, to)
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("making {} executable", to.display()))?;
    }
    Ok(())
}

fn emit(root: &Path) -> anyhow::Result<ExitCode> {
    let archive = handback::pack_dir(root)
        .with_context(|| format!("archiving the bundle under {}", root.display()))?;
    if archive.len() > handback::MAX_ARCHIVE_BYTES {
        eprintln!(
            "the bundle's manifests/ and metadata/ compress to {} bytes, more than the {} an unpack pod may hand back",
            archive.len(),
            handback::MAX_ARCHIVE_BYTES
        );
        return Ok(ExitCode::FAILURE);
    }
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    out.write_all(handback::frame(&archive).as_bytes())?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The shared objects this process has mapped (its loader and every library it loaded), from
/// `/proc/self/maps`; none for a static build.
pub fn mapped_libraries() -> Vec<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut found: Vec<PathBuf> = Vec::new();
    for line in maps.lines() {
        let Some(path) = line.split_whitespace().nth(5) else {
            continue;
        };
        let path = PathBuf::from(path);
        let shared = path
            .file_name()
            .and_then(|f| f.to_str())
            .is_some_and(|f| f.contains(".so"));
        if path.is_absolute() && shared && !found.contains(&path) {
            found.push(path);
        }
    }
    found
}

/// The file name of this process's dynamic loader (`ld-linux-x86-64.so.2`), if it has one.
pub fn own_loader() -> Option<String> {
    mapped_libraries()
        .iter()
        .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
        .find(|f| f.starts_with("ld-linux") || f.starts_with("ld-musl") || f.starts_with("ld64"))
}
