//! The `cairn-tools` binary: parse the command line, run, exit 1 when anything failed.

use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = cairn_tools::Cli::parse();
    match cairn_tools::run(cli).await {
        Ok(report) if report.failed == 0 => std::process::ExitCode::SUCCESS,
        Ok(_) => std::process::ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
