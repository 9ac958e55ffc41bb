//! Servers the tools start themselves: a shell command line (`--target-cmd`, run with `exec` so
//! that the child *is* the server and SIGKILL reaches it) or a program with its arguments (the
//! sweep's `cairn`). Readiness is a `ping` polled until it answers, never a sleep; a child that
//! exits while we wait is reported at once. The restart timers measure from the spawn to the
//! first successful `ping`.

use crate::compare::limits::{PING_TIMEOUT, READY_POLL_INTERVAL, READY_TIMEOUT};
use crate::compare::ping::ping;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A server process started by the tool; killed (SIGKILL) on drop.
pub struct Launched {
    program: PathBuf,
    args: Vec<String>,
    /// Where the child's stdout and stderr go (appended); discarded when absent.
    log: Option<PathBuf>,
    addr: String,
    child: Option<Child>,
}

impl Launched {
    /// Start the shell command line `command` and wait (bounded) until `addr` answers ping.
    pub fn start(command: &str, addr: &str) -> Result<Launched, String> {
        let args = vec!["-c".to_string(), format!("exec {command}")];
        let mut l = Launched::new(Path::new("sh"), &args, addr, None);
        l.respawn(READY_TIMEOUT)?;
        Ok(l)
    }

    /// A server that is not started yet: `program args...`, listening at `addr` once up.
    pub fn new(program: &Path, args: &[String], addr: &str, log: Option<&Path>) -> Launched {
        Launched {
            program: program.to_path_buf(),
            args: args.to_vec(),
            log: log.map(Path::to_path_buf),
            addr: addr.to_string(),
            child: None,
        }
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The running child's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn spawn(&mut self) -> Result<(), String> {
        let (out, err) = match &self.log {
            Some(path) => {
                let f = File::options()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
                let g = f.try_clone().map_err(|e| e.to_string())?;
                (Stdio::from(f), Stdio::from(g))
            }
            None => (Stdio::null(), Stdio::null()),
        };
        let child = Command::new(&self.program)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.program.display()))?;
        self.child = Some(child);
        Ok(())
    }

    /// Start the process (again) and return the time from the spawn to its first answered ping.
    pub fn respawn(&mut self, timeout: Duration) -> Result<Duration, String> {
        self.kill();
        let start = Instant::now();
        self.spawn()?;
        let child = self.child.as_mut().ok_or("not started")?;
        wait_ready(&self.addr, child, timeout)?;
        Ok(start.elapsed())
    }

    /// SIGKILL, start again, and return milliseconds until the first successful ping.
    pub fn restart_after_kill_ms(&mut self) -> Result<f64, String> {
        Ok(self.respawn(READY_TIMEOUT)?.as_secs_f64() * 1e3)
    }

    /// SIGKILL the process and reap it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Wait (bounded) for the process to exit by itself, e.g. after a `shutdown` command.
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<Duration, String> {
        let start = Instant::now();
        let child = self.child.as_mut().ok_or("not running")?;
        loop {
            match child.try_wait() {
                Ok(Some(_)) => {
                    self.child = None;
                    return Ok(start.elapsed());
                }
                Ok(None) if start.elapsed() > timeout => {
                    return Err(format!("still running after {timeout:?}"));
                }
                Ok(None) => std::thread::sleep(READY_POLL_INTERVAL),
                Err(e) => return Err(e.to_string()),
            }
        }
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Poll `addr` with pings until one answers; fail when `child` exits or `timeout` passes.
fn wait_ready(addr: &str, child: &mut Child, timeout: Duration) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    loop {
        match ping(addr, PING_TIMEOUT) {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() > deadline => return Err(format!("{addr} not ready: {e}")),
            Err(e) => {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(format!("server exited ({status}) before answering: {e}"));
                }
                std::thread::sleep(READY_POLL_INTERVAL);
            }
        }
    }
}
