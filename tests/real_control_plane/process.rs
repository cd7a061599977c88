//! Child processes of the harness: each in its own process group, its output in a log file, and
//! killed (the whole group) when dropped — also while a panic unwinds. `PR_SET_PDEATHSIG` makes
//! the kernel kill them too if the test process itself dies without unwinding.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::Context as _;

pub struct Process {
    pub name: String,
    pub log: PathBuf,
    child: Child,
    /// The program and its arguments, to start it again after a fault ([`Process::restart`]).
    program: OsString,
    args: Vec<OsString>,
}

impl Process {
    /// Starts `command` with stdout and stderr in `<log_dir>/<name>.log`.
    pub fn spawn(name: &str, command: Command, log_dir: &Path) -> anyhow::Result<Self> {
        let log = log_dir.join(format!("{name}.log"));
        let file =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let program = command.get_program().to_owned();
        let args = command.get_args().map(ToOwned::to_owned).collect();
        let child = start(name, command, file)?;
        Ok(Self {
            name: name.to_owned(),
            log,
            child,
            program,
            args,
        })
    }

    /// Kills the process group at once (SIGKILL, as a crash or the OOM killer would) and waits
    /// until the process is gone.
    pub fn kill(&mut self) {
        signal_group(self.child.id(), libc::SIGKILL);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the program again with the arguments it was first started with plus `extra` (a
    /// later flag wins over an earlier one), its output appended to the same log. A process
    /// still running is killed first.
    pub fn restart(&mut self, extra: &[String]) -> anyhow::Result<()> {
        self.kill();
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.log)
            .with_context(|| format!("opening {}", self.log.display()))?;
        let mut command = Command::new(&self.program);
        command.args(&self.args).args(extra);
        self.child = start(&self.name, command, file)?;
        Ok(())
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// `Some(why)` once the process has exited.
    pub fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(format!("{} exited: {status}", self.name)),
            Ok(None) => None,
            Err(err) => Some(format!("{}: cannot poll: {err}", self.name)),
        }
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Asks the process to stop (SIGTERM), as a kubelet does before it kills.
    pub fn terminate(&self) {
        signal_group(self.child.id(), libc::SIGTERM);
    }

    /// Waits up to `timeout` for the process to exit; `true` when it did.
    pub fn wait_exit(&mut self, timeout: std::time::Duration) -> bool {
        let started = std::time::Instant::now();
        while started.elapsed() < timeout {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        false
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Starts `command` in a process group of its own with its output in `log`.
fn start(name: &str, mut command: Command, log: std::fs::File) -> anyhow::Result<Child> {
    command
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    use std::os::unix::process::CommandExt as _;
    command.process_group(0);
    // SAFETY: the closure runs in the forked child before exec and only calls prctl(2) and
    // getppid(2), both async-signal-safe; it touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command
        .spawn()
        .with_context(|| format!("starting {name} ({:?})", command.get_program()))
}

/// Sends `signal` to the process group led by `pid` (each child leads its own group).
fn signal_group(pid: u32, signal: libc::c_int) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) with a negative pid signals that process group; no memory is shared.
    unsafe {
        libc::kill(-pid, signal);
    }
}
