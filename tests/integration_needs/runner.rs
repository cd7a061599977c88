//! The runner of tests/integration_needs: plain test functions as libtest-mimic trials, a test
//! that called `common::skip` reported ignored with its reason, and the closing lines.

use std::collections::BTreeMap;
use std::future::Future;
use std::panic;
use std::process::ExitCode;
use std::sync::Mutex;

use libtest_mimic::{Arguments, Completion, Failed, Trial};

use crate::common::skip;

/// `pub fn trials()` for the module it is called in: `sync name` for a plain test, `current name`
/// for an async one on a current-thread runtime (what `#[tokio::test]` gives), `multi name` on a
/// two-worker runtime (`flavor = "multi_thread", worker_threads = 2`).
#[macro_export]
macro_rules! trials {
    (@run sync $test:ident) => { $test() };
    (@run current $test:ident) => { $crate::runner::current_thread($test()) };
    (@run multi $test:ident) => { $crate::runner::multi_thread($test()) };
    ($($kind:ident $test:ident),* $(,)?) => {
        pub fn trials() -> Vec<libtest_mimic::Trial> {
            vec![$(
                $crate::runner::trial(module_path!(), stringify!($test), || {
                    $crate::trials!(@run $kind $test)
                })
            ),*]
        }
    };
}

/// Runs `test` on a current-thread runtime.
pub fn current_thread(test: impl Future<Output = ()>) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(test)
}

/// Runs `test` on a runtime with two worker threads.
pub fn multi_thread(test: impl Future<Output = ()>) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(test)
}

/// The trial `<module>::<name>` (libtest's name for the test) running `test`.
pub fn trial(module_path: &str, name: &str, test: fn()) -> Trial {
    // `module_path!()` is `integration_needs::<module>`.
    let module = module_path
        .split_once("::")
        .map_or(module_path, |(_, module)| module);
    Trial::ignorable_test(format!("{module}::{name}"), move || outcome(test))
}

/// Skip reasons and how many tests gave each, for the lines after the summary.
static SKIPS: Mutex<BTreeMap<String, usize>> = Mutex::new(BTreeMap::new());

fn outcome(test: fn()) -> Result<Completion, Failed> {
    match panic::catch_unwind(test) {
        Ok(()) => Ok(Completion::Completed),
        Err(payload) => {
            let message = payload_text(payload.as_ref());
            match message.strip_prefix(skip::MARK) {
                Some(why) => {
                    let mut skips = SKIPS.lock().unwrap_or_else(|e| e.into_inner());
                    *skips.entry(why.to_owned()).or_default() += 1;
                    Ok(Completion::ignored_with(why))
                }
                None => Err(message.into()),
            }
        }
    }
}

fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

/// Runs the trials as the command line asks (libtest's options), then prints, unless listing:
/// why tests were skipped, and the plain line `integration_needs: N passed, N failed, N skipped`.
pub fn run(trials: Vec<Trial>) -> ExitCode {
    // A skip is reported as the test's outcome: its panic is not printed as well.
    let default_hook = panic::take_hook();
    panic::set_hook(Box::new(move |info| {
        if !payload_text(info.payload()).starts_with(skip::MARK) {
            default_hook(info);
        }
    }));
    let args = Arguments::from_args();
    let listing = args.list;
    let conclusion = libtest_mimic::run(&args, trials);
    if !listing {
        let skips = SKIPS.lock().unwrap_or_else(|e| e.into_inner());
        if !skips.is_empty() {
            println!("skipped here (install what each line names, then run again):");
            for (why, count) in skips.iter() {
                println!("  {count} test(s): {why}");
            }
        }
        println!(
            "integration_needs: {} passed, {} failed, {} skipped",
            conclusion.num_passed, conclusion.num_failed, conclusion.num_ignored
        );
    }
    conclusion.exit_code()
}

/// The runner's own check: no test here carries a libtest attribute, which this harness would
/// silently never run.
pub fn own_checks() -> Vec<Trial> {
    vec![Trial::test("runner::no_libtest_attributes", || {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/integration_needs");
        let mut found = Vec::new();
        // Support modules live in folders of their own (signature_support/): walk them too.
        let mut dirs = vec![root];
        let mut files = Vec::new();
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
                let path = entry.map_err(|e| e.to_string())?.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    files.push(path);
                }
            }
        }
        for path in files {
            let text = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
            for (n, line) in text.lines().enumerate() {
                let line = line.trim_start();
                if line.starts_with("#[test]") || line.starts_with("#[tokio::test") {
                    found.push(format!("{}:{}", path.display(), n + 1));
                }
            }
        }
        if found.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "libtest attributes never run under this harness; list the test in its module's \
                 `trials!` instead: {found:?}"
            )
            .into())
        }
    })]
}
