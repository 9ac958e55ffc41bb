//! `cairn-latency`: where the time of one durable insert goes. In one run, one operation at a
//! time, it measures the floor (a TCP echo round trip on loopback and fdatasync of a small write
//! to a preallocated file in `--dir`, the disk the log lives on), then against a running server:
//! `ping` and a one-document `insert` over raw OP_MSG (no driver in the way), and `insertOne`
//! through the Rust driver. Prints median, p90 and p99 in microseconds. See docs/BENCHMARKS.md.

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

fn measure(
    name: &'static str,
    ops: usize,
    mut op: impl FnMut(usize) -> Result<()>,
) -> Result<Summary> {
    for i in 0..WARMUP_OPS {
        op(i)?;
    }
    let mut samples = Vec::with_capacity(ops);
    for i in 0..ops {
        let t = Instant::now();
        op(WARMUP_OPS + i)?;
        samples.push(t.elapsed());
    }
    samples.sort_unstable();
    Ok(Summary { name, samples })
}

fn echo_round_trip(ops: usize) -> Result<Summary> {
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
    let mut c = TcpStream::connect(addr)?;
    c.set_nodelay(true)?;
    let mut b = [7u8; ECHO_BYTES];
    measure("loopback TCP echo", ops, |_| {
        c.write_all(&b)?;
        c.read_exact(&mut b)?;
        Ok(())
    })
}

fn fdatasync_alone(dir: &std::path::Path, ops: usize) -> Result<Summary> {
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
    let record = [1u8; SYNC_WRITE_BYTES];
    let slots = SYNC_FILE_BYTES / SYNC_WRITE_BYTES as u64;
    let result = measure("write + fdatasync", ops, |i| {
        let offset = (i as u64 % slots) * SYNC_WRITE_BYTES as u64;
        file.write_all_at(&record, offset)?;
        file.sync_data()?;
        Ok(())
    });
    let _ = std::fs::remove_file(&path);
    result
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

fn raw_ops(addr: &str, ops: usize) -> Result<(Summary, Summary)> {
    let mut conn = TcpStream::connect(addr).with_context(|| format!("cannot connect to {addr}"))?;
    conn.set_nodelay(true)?;
    let db = "cairn_latency";
    command(&mut conn, 1, &doc! { "dropDatabase": 1, "$db": db })?;
    let ping = measure("ping (raw OP_MSG)", ops, |i| {
        command(&mut conn, i as i32, &doc! { "ping": 1, "$db": "admin" })
    })?;
    let insert = measure("insert 1 doc, durable (raw OP_MSG)", ops, |i| {
        let body = doc! {
            "insert": "raw",
            "documents": [{ "_id": i as i64, "v": "x".repeat(100) }],
            "$db": db,
        };
        command(&mut conn, i as i32, &body)
    })?;
    Ok((ping, insert))
}

fn driver_inserts(addr: &str, ops: usize) -> Result<Summary> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let uri = format!("mongodb://{addr}/?directConnection=true&retryWrites=false");
        let client = mongodb::Client::with_uri_str(&uri).await?;
        let coll = client
            .database("cairn_latency")
            .collection::<Document>("driver");
        let mut samples = Vec::with_capacity(ops);
        for i in 0..WARMUP_OPS + ops {
            let t = Instant::now();
            coll.insert_one(doc! { "_id": i as i64, "v": "x".repeat(100) })
                .await?;
            if i >= WARMUP_OPS {
                samples.push(t.elapsed());
            }
        }
        samples.sort_unstable();
        Ok(Summary {
            name: "insertOne, durable (Rust driver)",
            samples,
        })
    })
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let echo = echo_round_trip(cli.ops)?;
    let sync = fdatasync_alone(&cli.dir, cli.ops)?;
    let (ping, insert) = raw_ops(&cli.addr, cli.ops)?;
    let driver = driver_inserts(&cli.addr, cli.ops)?;
    println!(
        "{:<38} {:>9} {:>9} {:>9}   ({} ops each)",
        "operation", "p50 us", "p90 us", "p99 us", cli.ops
    );
    for s in [&echo, &sync, &ping, &insert, &driver] {
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
