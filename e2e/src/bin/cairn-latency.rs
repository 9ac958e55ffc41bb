//! `cairn-latency`: where the time of one durable insert goes. One operation at a time, it
//! measures the floor (a TCP echo round trip on loopback, and fdatasync of a small write to a
//! preallocated file in `--dir`, the disk the log lives on) and, against a running server,
//! `ping` and a one-document `insert` over raw OP_MSG (no driver in the way) and `insertOne`
//! through the Rust driver, and the same as a retryable write (which it is only against a
//! `--replSet` member: then it also keeps the session's `config.transactions` record). The kinds take turns in slices, so that the machine's load weighs on
//! all of them alike. Prints median, p90 and p99 in microseconds. See docs/BENCHMARKS.md.

use anyhow::{Context, Result, bail};
use bson::{Document, RawDocumentBuf, doc};
use clap::Parser;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Bytes of the file fdatasync is measured on (written once, like a preallocated log segment).
const SYNC_FILE_BYTES: u64 = 64 << 20;
/// Bytes written before each fdatasync (about one small log record).
const SYNC_WRITE_BYTES: usize = 256;
/// Bytes of one echo message.
const ECHO_BYTES: usize = 64;
/// Operations of each kind run before measuring.
const WARMUP_OPS: usize = 200;
/// Operations of one kind in a row before the next kind's turn.
const SLICE_OPS: usize = 50;

#[derive(Parser)]
#[command(
    name = "cairn-latency",
    about = "Latency of durable single inserts, and its floor"
)]
struct Cli {
    /// The server, host:port.
    #[arg(long, default_value = "127.0.0.1:27017")]
    addr: String,
    /// A directory on the disk of the server's --dbpath (fdatasync is measured there).
    #[arg(long)]
    dir: PathBuf,
    /// Measured operations of each kind.
    #[arg(long, default_value_t = 5000)]
    ops: usize,
    /// Run only the kinds whose name contains this (e.g. "raw OP_MSG").
    #[arg(long)]
    only: Option<String>,
}

struct Summary {
    name: &'static str,
    samples: Vec<Duration>,
}

impl Summary {
    fn quantile_us(&self, q: f64) -> f64 {
        let i = ((self.samples.len() as f64 - 1.0) * q).round() as usize;
        self.samples[i].as_secs_f64() * 1e6
    }
}

/// One kind of operation: its name and a closure doing the n-th one.
type Op<'a> = (&'static str, Box<dyn FnMut(usize) -> Result<()> + 'a>);

/// Runs every kind in turn, `SLICE_OPS` at a time, until each did `ops`: the machine's load
/// (other processes' disk and CPU use) then weighs on every kind alike.
fn measure(ops: usize, kinds: &mut [Op<'_>]) -> Result<Vec<Summary>> {
    for (_, op) in kinds.iter_mut() {
        for i in 0..WARMUP_OPS {
            op(i)?;
        }
    }
    let mut samples: Vec<Vec<Duration>> = kinds.iter().map(|_| Vec::with_capacity(ops)).collect();
    let mut done = 0;
    while done < ops {
        let n = SLICE_OPS.min(ops - done);
        for ((_, op), out) in kinds.iter_mut().zip(samples.iter_mut()) {
            for i in 0..n {
                let t = Instant::now();
                op(WARMUP_OPS + done + i)?;
                out.push(t.elapsed());
            }
        }
        done += n;
    }
    Ok(kinds
        .iter()
        .zip(samples)
        .map(|((name, _), mut samples)| {
            samples.sort_unstable();
            Summary { name, samples }
        })
        .collect())
}

/// A loopback TCP echo server; returns a connected client.
fn echo_peer() -> Result<TcpStream> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || -> std::io::Result<()> {
        let (mut s, _) = listener.accept()?;
        s.set_nodelay(true)?;
        let mut b = [0u8; ECHO_BYTES];
        loop {
            s.read_exact(&mut b)?;
            s.write_all(&b)?;
        }
    });
    let c = TcpStream::connect(addr)?;
    c.set_nodelay(true)?;
    Ok(c)
}

/// A preallocated file (like a log segment) in `dir`, removed on drop.
struct SyncFile {
    file: std::fs::File,
    path: PathBuf,
}

impl SyncFile {
    fn create(dir: &std::path::Path) -> Result<SyncFile> {
        let path = dir.join(format!("cairn-latency-{}.sync", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        let zeros = vec![0u8; 1 << 20];
        for i in 0..SYNC_FILE_BYTES / zeros.len() as u64 {
            file.write_all_at(&zeros, i * zeros.len() as u64)?;
        }
        file.sync_all()?;
        Ok(SyncFile { file, path })
    }

    fn write_and_sync(&self, i: usize) -> Result<()> {
        let slots = SYNC_FILE_BYTES / SYNC_WRITE_BYTES as u64;
        let offset = (i as u64 % slots) * SYNC_WRITE_BYTES as u64;
        self.file.write_all_at(&[1u8; SYNC_WRITE_BYTES], offset)?;
        self.file.sync_data()?;
        Ok(())
    }
}

impl Drop for SyncFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One raw OP_MSG round trip; fails unless the reply says `ok: 1`.
fn command(conn: &mut TcpStream, id: i32, body: &Document) -> Result<()> {
    let msg = wire::OpMsg {
        flags: 0,
        body: RawDocumentBuf::try_from(body)?,
        sequences: vec![],
    };
    conn.write_all(&wire::encode_msg(id, 0, &msg, None)?)?;
    let mut len = [0u8; 4];
    conn.read_exact(&mut len)?;
    let n = i32::from_le_bytes(len);
    if !(16..=48_000_000).contains(&n) {
        bail!("bad reply length {n}");
    }
    let mut frame = vec![0u8; n as usize];
    frame[..4].copy_from_slice(&len);
    conn.read_exact(&mut frame[4..])?;
    let reply = match wire::decode(&frame)?.body {
        wire::Body::Msg(m) => Document::try_from(m.body.as_ref())?,
        _ => bail!("reply is not OP_MSG"),
    };
    let ok = reply.get_f64("ok").unwrap_or(0.0) == 1.0;
    if !ok || reply.contains_key("writeErrors") {
        bail!("command failed: {reply}");
    }
    Ok(())
}

fn connect(addr: &str) -> Result<TcpStream> {
    let conn = TcpStream::connect(addr).with_context(|| format!("cannot connect to {addr}"))?;
    conn.set_nodelay(true)?;
    Ok(conn)
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let db = "cairn_latency";
    let mut echo = echo_peer()?;
    let sync = SyncFile::create(&cli.dir)?;
    let mut pinger = connect(&cli.addr)?;
    let mut inserter = connect(&cli.addr)?;
    command(&mut inserter, 1, &doc! { "dropDatabase": 1, "$db": db })?;
    let rt = tokio::runtime::Runtime::new()?;
    let uri = format!(
        "mongodb://{}/?directConnection=true&retryWrites=false",
        cli.addr
    );
    let driver = rt
        .block_on(mongodb::Client::with_uri_str(&uri))?
        .database(db)
        .collection::<Document>("driver");
    // Against a replica-set member the driver makes this one's writes retryable (lsid +
    // txnNumber), so the two driver kinds side by side show what the session record costs.
    let retrying = rt
        .block_on(mongodb::Client::with_uri_str(
            uri.replace("retryWrites=false", "retryWrites=true"),
        ))?
        .database(db)
        .collection::<Document>("retrying");
    let mut echo_buf = [7u8; ECHO_BYTES];
    let mut kinds: Vec<Op<'_>> = vec![
        (
            "loopback TCP echo",
            Box::new(|_| {
                echo.write_all(&echo_buf)?;
                echo.read_exact(&mut echo_buf)?;
                Ok(())
            }),
        ),
        ("write + fdatasync", Box::new(|i| sync.write_and_sync(i))),
        (
            "ping (raw OP_MSG)",
            Box::new(|i| command(&mut pinger, i as i32, &doc! { "ping": 1, "$db": "admin" })),
        ),
        (
            "insert 1 doc, durable (raw OP_MSG)",
            Box::new(|i| {
                let body = doc! {
                    "insert": "raw",
                    "documents": [{ "_id": i as i64, "v": "x".repeat(100) }],
                    "$db": db,
                };
                command(&mut inserter, i as i32, &body)
            }),
        ),
        (
            "insertOne, durable (Rust driver)",
            Box::new(|i| {
                let d = doc! { "_id": i as i64, "v": "x".repeat(100) };
                rt.block_on(async { driver.insert_one(d).await })?;
                Ok(())
            }),
        ),
        (
            "insertOne, retryable (Rust driver)",
            Box::new(|i| {
                let d = doc! { "_id": i as i64, "v": "x".repeat(100) };
                rt.block_on(async { retrying.insert_one(d).await })?;
                Ok(())
            }),
        ),
    ];
    if let Some(only) = &cli.only {
        kinds.retain(|(name, _)| name.contains(only.as_str()));
    }
    let summaries = measure(cli.ops, &mut kinds)?;
    println!(
        "{:<38} {:>9} {:>9} {:>9}   ({} ops each)",
        "operation", "p50 us", "p90 us", "p99 us", cli.ops
    );
    for s in &summaries {
        println!(
            "{:<38} {:>9.1} {:>9.1} {:>9.1}",
            s.name,
            s.quantile_us(0.5),
            s.quantile_us(0.9),
            s.quantile_us(0.99)
        );
    }
    Ok(())
}
