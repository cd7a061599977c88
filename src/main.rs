//! The `olm-rs` binary: one executable for the controller, the catalog tools, the resolver
//! preview and the sandbox.

mod cli;

use clap::Parser;

fn main() -> std::process::ExitCode {
    tune_malloc();
    let args = cli::Cli::parse();
    match cli::dispatch(args) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::from(2)
        }
    }
}

/// glibc malloc settings, made before any thread starts. Measured on `catalog validate
/// catalogs/v4.20` (15 MB of YAML):
/// - A fixed 128 KiB mmap threshold: big buffers (file texts, JSON) come from and go back to
///   the OS; glibc's default raises the threshold after the first such free, after which those
///   buffers grow the heap and their space is never returned (peak RSS 33 → 29 MB, with fewer
///   page faults).
/// - One arena per core, plus one for the main thread: glibc's default of 8 per core lets
///   threads keep free memory apart in more arenas than can ever run at once. Fewer is worse:
///   with a single arena the loader threads queued on its lock (futex waits; validate took
///   38 ms, 59 ms of CPU against 30 ms and 50 ms with three on two cores, for 0.1 MB less
///   peak RSS).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn tune_malloc() {
    const M_MMAP_THRESHOLD: i32 = -3;
    const M_ARENA_MAX: i32 = -8;
    unsafe extern "C" {
        fn mallopt(param: i32, value: i32) -> i32;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let arenas = i32::try_from(cores + 1).unwrap_or(i32::MAX);
    // SAFETY: `mallopt` only sets allocator parameters and is called before any other thread
    // exists; a rejected setting (return 0) leaves glibc's default, which is harmless.
    unsafe {
        mallopt(M_MMAP_THRESHOLD, 128 * 1024);
        mallopt(M_ARENA_MAX, arenas);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn tune_malloc() {}

/// Gives the heap's free memory back to the OS (glibc `malloc_trim`). For long-lived
/// processes after a big one-off load: `catalog serve` frees the loader's and the validator's
/// buffers once the index is built, but glibc keeps freed memory below the top of the heap
/// (it only trims from the top), so without this it stays in the server's resident set.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn release_free_memory() {
    unsafe extern "C" {
        fn malloc_trim(pad: usize) -> i32;
    }
    // SAFETY: `malloc_trim` only returns free pages of the heap to the OS; it is thread-safe
    // (it takes each arena's lock) and leaves every allocation in place.
    unsafe {
        malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release_free_memory() {}
