//! How a test says it cannot run on this machine, and why in CI it fails instead.
//!
//! A test that needs something beyond the Rust toolchain (the shared reference data,
//! docker-registry, busybox, skopeo, kubectl, root) calls [`skip`] with the reason and the way
//! to get it. Outside CI that stops the test with a panic whose message starts with [`MARK`]:
//! the runner of tests/integration_needs reports it `ignored, <reason>` in cargo's output and
//! counts it in the summary, never `ok`. With `CI` set it is a plain failure: `.ci/run`
//! installs everything the tests need, so a skip there is a broken set-up.

/// The start of a skipped test's panic message; the rest is the reason.
pub const MARK: &str = "cannot run here: ";

/// Whether this runs in CI (`CI` set and not empty, as CI services set it).
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
}

/// Stops the test: skipped with `why` outside CI, failed in CI (see the module's doc).
pub fn skip(why: &str) -> ! {
    if in_ci() {
        panic!("{why} — missing in CI, where no test may be skipped (.ci/run installs it)");
    }
    panic!("{MARK}{why}")
}

/// `path`, when it is a file; else the test is skipped with `install` as the way to get it.
pub fn require_file(path: &str, install: &str) -> std::path::PathBuf {
    let file = std::path::PathBuf::from(path);
    if !file.is_file() {
        skip(&format!("needs {path} ({install})"));
    }
    file
}

/// Skips the test unless it runs as root (`what` says what needs root).
pub fn require_root(what: &str) {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        skip(&format!(
            "{what} needs root (run the tests as root, as CI does)"
        ));
    }
}

/// The program `name` on `PATH`, or the test is skipped with `install` as the way to get it.
pub fn require_program(name: &str, install: &str) -> std::path::PathBuf {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| skip(&format!("needs {name} on PATH ({install})")))
}
