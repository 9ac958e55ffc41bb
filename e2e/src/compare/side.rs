//! One side of a comparison: a server given by URI, a server the tool starts from a command line
//! (`--*-cmd`, must listen where the URI says), or a cairn binary the tool starts itself on a free
//! port through the e2e harness (`--*-bin`, the port read from its own log line). The last two
//! can be killed and restarted to time recovery.

use crate::Server;
use crate::compare::launch::Launched;
use crate::compare::ping::first_host;
use std::time::Instant;

pub enum Side {
    Uri(String),
    Command { uri: String, server: Launched },
    Binary(Server),
}

impl Side {
    /// Pick the side from the three options; exactly one of `uri` or `bin` must be given.
    pub fn open(uri: Option<&str>, cmd: Option<&str>, bin: Option<&str>) -> Result<Side, String> {
        match (uri, cmd, bin) {
            (None, None, Some(bin)) => Ok(Side::Binary(Server::start(bin, &[]))),
            (Some(uri), None, None) => Ok(Side::Uri(uri.to_string())),
            (Some(uri), Some(cmd), None) => {
                let addr = first_host(uri).ok_or("--*-cmd needs a mongodb://host:port URI")?;
                let server = Launched::start(cmd, &addr)?;
                Ok(Side::Command {
                    uri: uri.to_string(),
                    server,
                })
            }
            (_, _, Some(_)) => Err("--*-bin starts its own server: give no URI or command".into()),
            (None, _, None) => {
                Err("each side needs a URI (--target/--reference) or a binary (--*-bin)".into())
            }
        }
    }

    /// Where the server listens now (a restarted binary gets a new port).
    pub fn uri(&self) -> String {
        match self {
            Side::Uri(uri) | Side::Command { uri, .. } => uri.clone(),
            Side::Binary(s) => s.uri(),
        }
    }

    /// SIGKILL and start again; milliseconds until the server accepts connections again.
    pub fn restart_after_kill_ms(&mut self) -> Result<f64, String> {
        match self {
            Side::Uri(_) => Err("not started by the tool (no --*-cmd or --*-bin)".into()),
            Side::Command { server, .. } => server.restart_after_kill_ms(),
            Side::Binary(server) => {
                let start = Instant::now();
                server.restart_after_kill();
                Ok(start.elapsed().as_secs_f64() * 1e3)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_must_name_exactly_one_server() {
        assert!(matches!(
            Side::open(Some("mongodb://h:1"), None, None),
            Ok(Side::Uri(_))
        ));
        assert!(Side::open(None, None, None).is_err());
        assert!(Side::open(None, Some("x"), None).is_err());
        assert!(Side::open(Some("mongodb://h:1"), None, Some("cairn")).is_err());
        assert!(Side::open(Some("mongodb+srv://h"), Some("x"), None).is_err());
        let mut uri = Side::Uri("mongodb://h:1".into());
        assert!(uri.restart_after_kill_ms().is_err());
    }
}
