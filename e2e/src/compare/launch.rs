//! Servers the tools start themselves (`--target-cmd`): a shell command line run with `exec` so
//! that the child *is* the server and SIGKILL reaches it, and a restart timer that measures from
//! the kill to the first successful `ping`.

use crate::compare::limits::{PING_TIMEOUT, READY_POLL_INTERVAL, READY_TIMEOUT};
use crate::compare::ping::ping;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// A server process started from a command line; killed on drop.
pub struct Launched {
    command: String,
    addr: String,
    child: Option<Child>,
}

impl Launched {
    /// Start `command` and wait (bounded) until `addr` answers ping.
    pub fn start(command: &str, addr: &str) -> Result<Launched, String> {
        let mut l = Launched {
            command: command.to_string(),
            addr: addr.to_string(),
            child: None,
        };
        l.spawn()?;
        wait_ready(&l.addr)?;
        Ok(l)
    }

    fn spawn(&mut self) -> Result<(), String> {
        let child = Command::new("sh")
            .arg("-c")
            .arg(format!("exec {}", self.command))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {:?}: {e}", self.command))?;
        self.child = Some(child);
        Ok(())
    }

    /// SIGKILL, start again, and return milliseconds until the first successful ping.
    pub fn restart_after_kill_ms(&mut self) -> Result<f64, String> {
        self.kill();
        let start = Instant::now();
        self.spawn()?;
        wait_ready(&self.addr)?;
        Ok(start.elapsed().as_secs_f64() * 1e3)
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        self.kill();
    }
}

fn wait_ready(addr: &str) -> Result<(), String> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        match ping(addr, PING_TIMEOUT) {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() > deadline => return Err(format!("{addr} not ready: {e}")),
            Err(_) => std::thread::sleep(READY_POLL_INTERVAL),
        }
    }
}
