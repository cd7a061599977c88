//! skopeo for the signature tests: keys made by `skopeo generate-sigstore-key`, images signed
//! by `skopeo copy --sign-by-sigstore-private-key` into the test registry (as sigstore
//! attachments), and `skopeo copy --policy` as the reference verdict.
//!
//! skopeo must sign and verify sigstore signatures: Debian 12's skopeo 1.9 was built with
//! sigstore disabled, so `install-skopeo.sh` beside this file fetches Debian 13's.
//! `OLM_RS_SKOPEO` names the program; else `/usr/bin/skopeo` is used when it can. Without one
//! the tests say so and skip, except in CI (`CI=true`), where `.ci/run` installs it.

#![allow(dead_code)] // each test uses a subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub struct Skopeo {
    program: PathBuf,
}

/// What `skopeo copy --policy` decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkopeoVerdict {
    Accepted,
    /// Refused: skopeo's own words.
    Refused(String),
}

impl Skopeo {
    /// A skopeo with sigstore; the test is skipped (failed in CI) when there is none.
    pub fn find() -> Skopeo {
        Skopeo::try_find().unwrap_or_else(|why| crate::common::skip(&why))
    }

    /// A skopeo with sigstore, or why there is none (and how to get one).
    pub fn try_find() -> Result<Skopeo, String> {
        let candidates: Vec<PathBuf> = std::env::var_os("OLM_RS_SKOPEO")
            .map(PathBuf::from)
            .into_iter()
            .chain([PathBuf::from("/usr/bin/skopeo")])
            .collect();
        for program in candidates {
            let s = Skopeo { program };
            if s.has_sigstore() {
                return Ok(s);
            }
        }
        Err(
            "needs a skopeo that signs sigstore signatures (Debian 12's has sigstore disabled): \
             bash tests/integration_needs/signature_support/install-skopeo.sh DIR, then \
             OLM_RS_SKOPEO=DIR/skopeo"
                .to_owned(),
        )
    }

    /// `generate-sigstore-key` came with skopeo 1.10, as did working sigstore in Debian. An
    /// older skopeo answers `generate-sigstore-key --help` with its general help and success,
    /// so the command's own flag is looked for.
    fn has_sigstore(&self) -> bool {
        Command::new(&self.program)
            .args(["generate-sigstore-key", "--help"])
            .output()
            .is_ok_and(|o| {
                o.status.success() && String::from_utf8_lossy(&o.stdout).contains("--output-prefix")
            })
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(&self.program)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{} {args:?}: {e}", self.program.display()))
    }

    fn run_ok(&self, args: &[&str]) {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "skopeo {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A key pair `<prefix>.private` (passphrase in `<prefix>.pass`) and `<prefix>.pub`.
    pub fn generate_key(&self, prefix: &Path) -> PathBuf {
        let pass = prefix.with_extension("pass");
        std::fs::write(&pass, "test passphrase").unwrap();
        let p = prefix.to_str().unwrap();
        self.run_ok(&[
            "generate-sigstore-key",
            "--output-prefix",
            p,
            "--passphrase-file",
            pass.to_str().unwrap(),
        ]);
        PathBuf::from(format!("{p}.pub"))
    }

    /// `skopeo copy` between two images of a plain-HTTP registry, signing with the key at
    /// `prefix` when given; signatures already there travel with the image.
    pub fn copy(&self, registries_d: &Path, from: &str, to: &str, sign_with: Option<&Path>) {
        let d = registries_d.to_str().unwrap();
        let (src, dst) = (format!("docker://{from}"), format!("docker://{to}"));
        let mut args = vec![
            "--registries.d",
            d,
            "copy",
            "--src-tls-verify=false",
            "--dest-tls-verify=false",
        ];
        let (key, pass);
        if let Some(prefix) = sign_with {
            key = format!("{}.private", prefix.display());
            pass = prefix.with_extension("pass").display().to_string();
            args.extend([
                "--sign-by-sigstore-private-key",
                key.as_str(),
                "--sign-passphrase-file",
                pass.as_str(),
            ]);
        }
        args.extend([src.as_str(), dst.as_str()]);
        // Policy for the copy itself: accept anything.
        let open = registries_d.join("../open-policy.json");
        std::fs::write(
            &open,
            r#"{"default": [{"type": "insecureAcceptAnything"}]}"#,
        )
        .unwrap();
        let o = open.to_str().unwrap().to_string();
        let mut full = vec!["--policy", o.as_str()];
        full.extend(args);
        self.run_ok(&full);
    }

    /// `skopeo copy` of `from` into the directory `dir` (the `dir:` transport), signed with
    /// the key at `prefix` as `identity`: `dir/signature-1` is then a sigstore signature blob
    /// in the format lookaside storage holds (docs/image-signatures.md §5).
    pub fn sign_into_dir(&self, from: &str, dir: &Path, identity: &str, prefix: &Path) {
        let key = format!("{}.private", prefix.display());
        let pass = prefix.with_extension("pass").display().to_string();
        let open = dir.with_extension("policy.json");
        std::fs::write(
            &open,
            r#"{"default": [{"type": "insecureAcceptAnything"}]}"#,
        )
        .unwrap();
        let (src, dst) = (format!("docker://{from}"), format!("dir:{}", dir.display()));
        self.run_ok(&[
            "--policy",
            open.to_str().unwrap(),
            "copy",
            "--src-tls-verify=false",
            "--sign-by-sigstore-private-key",
            &key,
            "--sign-passphrase-file",
            &pass,
            "--sign-identity",
            identity,
            &src,
            &dst,
        ]);
    }

    /// What skopeo decides about pulling `image` under `policy`: it copies the image to a
    /// directory only when the policy accepts it.
    pub fn verdict(&self, policy: &Path, registries_d: &Path, image: &str) -> SkopeoVerdict {
        let out_dir = tempfile::tempdir().unwrap();
        let dest = format!("dir:{}", out_dir.path().join("image").display());
        let src = format!("docker://{image}");
        let out = self.run(&[
            "--policy",
            policy.to_str().unwrap(),
            "--registries.d",
            registries_d.to_str().unwrap(),
            "copy",
            "--src-tls-verify=false",
            &src,
            &dest,
        ]);
        if out.status.success() {
            SkopeoVerdict::Accepted
        } else {
            SkopeoVerdict::Refused(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    }
}
