//! A dependency-light liveness probe: one OP_MSG `ping` over a plain `TcpStream`, encoded and
//! decoded with the `wire` crate. Used by `cairn-healthcheck` (the Docker HEALTHCHECK) and by
//! `cairn-compare` to time a restart, where a driver's own retry and back-off would blur the clock.

use bson::{Document, RawDocument, rawdoc};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::compare::limits::PING_REPLY_SIZE_MAX;
const HEADER_SIZE: usize = 16;

/// Ping `addr` ("host:port"); Ok when the server answers `{ok: 1}` within `timeout`.
pub fn ping(addr: &str, timeout: Duration) -> Result<(), String> {
    let reply = exchange(addr, &rawdoc! {"ping": 1, "$db": "admin"}, timeout)?;
    check_reply(&reply)
}

/// Run one command (`body` names its `$db`) and return the reply body when it says `ok: 1`.
/// `timeout` bounds the connect and each read and write, so a server busy opening its data
/// directory is waited for as long as the caller allows.
pub fn command(addr: &str, body: &RawDocument, timeout: Duration) -> Result<Document, String> {
    let reply = exchange(addr, body, timeout)?;
    check_reply(&reply)?;
    let message = wire::decode(&reply).map_err(|e| format!("decode: {e}"))?;
    let wire::Body::Msg(msg) = message.body else {
        return Err("reply is not OP_MSG".into());
    };
    Document::try_from(msg.body.as_ref()).map_err(|e| format!("reply body: {e}"))
}

/// Send one OP_MSG on a fresh connection and read the reply frame.
fn exchange(addr: &str, body: &RawDocument, timeout: Duration) -> Result<Vec<u8>, String> {
    let sock = addr
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("no address for {addr}"))?;
    let mut stream =
        TcpStream::connect_timeout(&sock, timeout).map_err(|e| format!("connect: {e}"))?;
    stream
        .set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    stream
        .set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let frame = wire::encode_msg(1, 0, &wire::OpMsg::new(body.to_owned()), None)
        .map_err(|e| format!("encode: {e}"))?;
    stream.write_all(&frame).map_err(|e| format!("send: {e}"))?;
    read_frame(&mut stream)
}

fn read_frame(stream: &mut TcpStream) -> Result<Vec<u8>, String> {
    let mut len = [0u8; 4];
    stream
        .read_exact(&mut len)
        .map_err(|e| format!("read: {e}"))?;
    let n = i32::from_le_bytes(len);
    let n = usize::try_from(n).map_err(|_| format!("bad reply length {n}"))?;
    if !(HEADER_SIZE..=PING_REPLY_SIZE_MAX).contains(&n) {
        return Err(format!("bad reply length {n}"));
    }
    let mut frame = vec![0u8; n];
    frame[..4].copy_from_slice(&len);
    stream
        .read_exact(&mut frame[4..])
        .map_err(|e| format!("read: {e}"))?;
    Ok(frame)
}

/// Ok when `frame` is an OP_MSG whose body says `ok: 1`.
pub fn check_reply(frame: &[u8]) -> Result<(), String> {
    let message = wire::decode(frame).map_err(|e| format!("decode: {e}"))?;
    let wire::Body::Msg(msg) = message.body else {
        return Err("reply is not OP_MSG".into());
    };
    let ok = msg.body.get("ok").map_err(|e| e.to_string())?;
    match ok.and_then(|v| v.as_f64().or_else(|| v.as_i32().map(f64::from))) {
        Some(1.0) => Ok(()),
        _ => {
            let code = msg.body.get_i32("code").ok();
            let errmsg = msg.body.get_str("errmsg").unwrap_or_default();
            match code {
                Some(code) => Err(format!("server answered ok != 1 (code {code}: {errmsg})")),
                None => Err("server answered ok != 1".into()),
            }
        }
    }
}

/// "host:port" of the first host in a `mongodb://` URI (default port 27017).
pub fn first_host(uri: &str) -> Option<String> {
    let rest = uri.strip_prefix("mongodb://")?;
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let hosts = rest.split(['/', '?']).next()?;
    let host = hosts.split(',').next()?;
    if host.is_empty() {
        return None;
    }
    Some(if host.contains(':') && !host.ends_with(']') {
        host.to_string()
    } else {
        format!("{host}:27017")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_host_handles_credentials_options_and_default_port() {
        assert_eq!(
            first_host("mongodb://127.0.0.1:1234/?directConnection=true").as_deref(),
            Some("127.0.0.1:1234")
        );
        assert_eq!(
            first_host("mongodb://u:p@db.example:27018,b:1/x").as_deref(),
            Some("db.example:27018")
        );
        assert_eq!(
            first_host("mongodb://localhost").as_deref(),
            Some("localhost:27017")
        );
        assert_eq!(first_host("mongodb+srv://x"), None);
    }

    #[test]
    fn reply_check_accepts_ok_one_only() {
        let good =
            wire::encode_msg(2, 1, &wire::OpMsg::new(rawdoc! {"ok": 1.0}), None).expect("encode");
        assert!(check_reply(&good).is_ok());
        let bad = wire::encode_msg(
            2,
            1,
            &wire::OpMsg::new(rawdoc! {"ok": 0.0, "code": 59}),
            None,
        )
        .expect("encode");
        assert!(check_reply(&bad).is_err());
        assert!(check_reply(&good[..10]).is_err());
    }
}
