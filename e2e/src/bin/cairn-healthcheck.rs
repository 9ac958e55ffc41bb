//! `cairn-healthcheck [HOST:PORT]`: exit 0 when a MongoDB-protocol server answers `ping` with
//! `ok: 1` within the timeout, 1 otherwise. The Docker image's HEALTHCHECK, so it needs nothing
//! but itself: no shell, no mongosh, no curl.

use cairn_e2e::compare::limits::HEALTHCHECK_TIMEOUT;
use std::process::ExitCode;

const DEFAULT_ADDR: &str = "127.0.0.1:27017";

fn main() -> ExitCode {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| DEFAULT_ADDR.to_string());
    match cairn_e2e::compare::ping::ping(&addr, HEALTHCHECK_TIMEOUT) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cairn-healthcheck: {addr}: {e}");
            ExitCode::FAILURE
        }
    }
}
