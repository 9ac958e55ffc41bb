//! `cairn-healthcheck [HOST:PORT]`: exit 0 when a MongoDB-protocol server answers `ping` with
//! `ok: 1` within the timeout, 1 otherwise. The Docker image's HEALTHCHECK, so it needs nothing
//! but itself: no shell, no mongosh, no curl.

use std::process::ExitCode;
use std::time::Duration;

const DEFAULT_ADDR: &str = "127.0.0.1:27017";
const TIMEOUT: Duration = Duration::from_secs(5);

fn main() -> ExitCode {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| DEFAULT_ADDR.to_string());
    match cairn_e2e::compare::ping::ping(&addr, TIMEOUT) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cairn-healthcheck: {addr}: {e}");
            ExitCode::FAILURE
        }
    }
}
