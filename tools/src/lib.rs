//! cairn-tools: moving data in and out of any MongoDB-protocol server (cairn or mongod) with the
//! official Rust driver. `import`/`export` speak mongoimport/mongoexport's flags and formats
//! (Extended JSON v2 lines or arrays, CSV, TSV); `dump`/`restore` read and write mongodump's
//! directory layout (`<db>/<coll>.bson` + `<coll>.metadata.json`, optionally gzipped). Nothing
//! here knows cairn's internals: the server is reached only through the wire protocol.

pub mod archive;
pub mod common;
pub mod csvfmt;
pub mod dump;
pub mod export;
pub mod extjson;
pub mod import;
pub mod layout;
pub mod restore;
pub mod testdata;
pub mod writer;

use clap::{Parser, Subcommand};

/// The command line: `cairn-tools <import|export|dump|restore> [flags]`.
#[derive(Debug, Parser)]
#[command(
    name = "cairn-tools",
    version,
    about = "import/export/dump/restore for MongoDB-protocol servers"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Load JSON Lines, a JSON array, CSV or TSV into a collection (mongoimport's flags).
    Import(import::ImportArgs),
    /// Write a collection as JSON Lines, a JSON array, CSV or TSV (mongoexport's flags).
    Export(export::ExportArgs),
    /// Write databases and collections in mongodump's layout.
    Dump(dump::DumpArgs),
    /// Read mongodump's layout back into a server, rebuilding indexes.
    Restore(restore::RestoreArgs),
}

/// What a run did; the same figures as the final summary line.
#[derive(Debug, Default, Clone)]
pub struct Report {
    /// Documents written (imported, exported, dumped or restored).
    pub ok: u64,
    pub failed: u64,
    /// Each problem as reported on stderr (at most `common::PROBLEMS_KEPT_MAX` kept).
    pub problems: Vec<String>,
    /// The summary line printed last.
    pub summary: String,
}

/// Run a parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<Report> {
    match cli.command {
        Command::Import(a) => import::run(a).await,
        Command::Export(a) => export::run(a).await,
        Command::Dump(a) => dump::run(a).await,
        Command::Restore(a) => restore::run(a).await,
    }
}

/// Parse `args` (without the program name) as the binary would and run them; for tests.
pub async fn run_args(args: &[&str]) -> anyhow::Result<Report> {
    let cli = Cli::try_parse_from(std::iter::once("cairn-tools").chain(args.iter().copied()))?;
    run(cli).await
}
