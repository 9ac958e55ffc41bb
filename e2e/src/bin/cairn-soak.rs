//! `cairn-soak`: a long mixed workload with hostile clients, and the server's memory over time.
//! It starts a `cairn` of its own (so it can read its RSS from /proc), loads a collection, then
//! for `--minutes` runs `--clients` driver clients doing inserts, finds, updates, deletes,
//! `$group` and sorting aggregates, plus raw-wire clients that open cursors and vanish,
//! send a heavy aggregate and hang up at once, or ask for more than `maxTimeMS` allows. Then
//! the load stops and the server idles for `--idle-secs` while sampling goes on. Two baselines:
//! right after loading, and "warm", after `--warmup-secs` of the driver clients alone and
//! `--settle-secs` of quiet (the connections, caches and pages a steady workload leaves). The
//! report (JSON, markdown, and a PNG of RSS, live heap, allocator metadata and throughput over
//! time) says the RSS and what lies outside the page cache at each mark, the peak, and whether
//! the server stayed up; jemalloc's own report is saved after loading, warm, at the live heap's
//! high and after idling. `--hostile-kinds` runs one kind of hostile request alone, to tell which
//! drives the peak. See docs/BENCHMARKS.md.

use anyhow::{Context, Result, bail};
use bson::{Document, RawDocumentBuf, doc};
use cairn_e2e::compare::launch::Launched;
use cairn_e2e::compare::plot::{Series, time_lines};
use clap::Parser;
use futures_util::StreamExt;
use mongodb::options::FindOptions;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

#[derive(Parser)]
#[command(
    name = "cairn-soak",
    about = "Mixed load with hostile clients; RSS over time"
)]
struct Cli {
    /// The cairn binary to start (a release build measures what users run).
    #[arg(long, default_value = "target/release/cairn")]
    cairn: PathBuf,
    /// Minutes of load.
    #[arg(long, default_value_t = 10.0)]
    minutes: f64,
    /// Seconds of idling after the load, still sampling.
    #[arg(long, default_value_t = 90)]
    idle_secs: u64,
    /// Driver clients running the mixed workload.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// Raw-wire clients that abandon cursors and hang up mid-query.
    #[arg(long, default_value_t = 2)]
    hostile: usize,
    /// What the hostile clients send, a comma-separated subset of `cursor` (open a cursor and
    /// vanish), `group` (a `$push`-everything `$group`, hung up on) and `regex` (a catastrophic
    /// regex under `maxTimeMS: 50`), to tell which of them drives the peak.
    #[arg(long, default_value = "cursor,group,regex", value_delimiter = ',')]
    hostile_kinds: Vec<HostileKind>,
    /// Seconds the driver clients run before the load (no hostile clients), so the warm
    /// baseline has seen the same connections and queries; 0 skips the warm baseline.
    #[arg(long, default_value_t = 30)]
    warmup_secs: u64,
    /// Seconds of idling after the warm-up before the warm baseline is read.
    #[arg(long, default_value_t = 30)]
    settle_secs: u64,
    /// Documents loaded before the load starts.
    #[arg(long, default_value_t = 100_000)]
    docs: i64,
    /// Where the report goes (created).
    #[arg(long, default_value = "target/soak")]
    out: PathBuf,
}

/// One kind of hostile request (`--hostile-kinds`).
#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Debug)]
enum HostileKind {
    Cursor,
    Group,
    Regex,
}

/// One sample of the server: seconds since the load started, RSS, the allocator's live heap and
/// metadata, operations done so far.
#[derive(serde::Serialize, Clone, Copy)]
struct Sample {
    secs: f64,
    rss_mb: f64,
    allocated_mb: f64,
    metadata_mb: f64,
    ops: u64,
    hostile_ops: u64,
}

#[derive(Default)]
struct Counters {
    ops: AtomicU64,
    errors: AtomicU64,
    hostile: AtomicU64,
}

/// A number field of `/proc/<pid>/status` (`VmRSS:` in kB, `Threads:`).
fn proc_status(pid: u32, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn rss_mb(pid: u32) -> Option<f64> {
    proc_status(pid, "VmRSS:").map(|kb| kb / 1024.0)
}

/// The allocator's counters (`serverStatus.jemalloc`), in MB.
async fn heap_mb(client: &mongodb::Client) -> Result<Heap> {
    let st = client
        .database("admin")
        .run_command(doc! {"serverStatus": 1})
        .await?;
    let j = st.get_document("jemalloc").ok();
    let mb = |name: &str| {
        j.and_then(|j| j.get(name))
            .and_then(bson::Bson::as_i64)
            .unwrap_or(0) as f64
            / (1 << 20) as f64
    };
    Ok(Heap {
        allocated: mb("allocated"),
        resident: mb("resident"),
        metadata: mb("metadata"),
    })
}

/// Saves jemalloc's per-size-class report (`serverStatus: 1, jemalloc: 2`) as `OUT/<name>`, so
/// what stays resident after the load can be told apart (slabs, thread caches, dirty pages).
async fn save_allocator_report(client: &mongodb::Client, out: &Path, name: &str) -> Result<()> {
    let st = client
        .database("admin")
        .run_command(doc! {"serverStatus": 1, "jemalloc": 2})
        .await?;
    let text = st
        .get_document("jemalloc")
        .ok()
        .and_then(|j| j.get_str("formattedString").ok())
        .unwrap_or("(the server gave no allocator report)");
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join(name), text)?;
    Ok(())
}

/// Live heap bytes, and what the allocator keeps resident for them (MB).
#[derive(Clone, Copy, serde::Serialize)]
struct Heap {
    allocated: f64,
    resident: f64,
    metadata: f64,
}

/// The page cache's bytes and the open cursors, from `serverStatus`.
async fn cache_and_cursors(client: &mongodb::Client) -> Result<(f64, i64)> {
    let st = client
        .database("admin")
        .run_command(doc! {"serverStatus": 1})
        .await?;
    let cache = st
        .get_document("wiredTiger")
        .and_then(|w| w.get_document("cache"))
        .ok()
        .and_then(|c| c.get("bytes currently in the cache"))
        .and_then(bson::Bson::as_i64)
        .unwrap_or(0);
    let open = st
        .get_document("metrics")
        .and_then(|m| m.get_document("cursor"))
        .and_then(|c| c.get_document("open"))
        .ok()
        .and_then(|o| o.get("total"))
        .and_then(|v| v.as_i64().or_else(|| v.as_i32().map(i64::from)))
        .unwrap_or(-1);
    Ok((cache as f64 / (1 << 20) as f64, open))
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn item(i: i64) -> Document {
    doc! {
        "_id": i,
        "k": i % 1000,
        "g": format!("g{}", i % 37),
        "v": (i * 7919) % 100_003,
        "s": "x".repeat(((i * 31) % 200) as usize),
    }
}

async fn load(coll: &mongodb::Collection<Document>, docs: i64) -> Result<()> {
    let mut next = 0;
    while next < docs {
        let batch: Vec<Document> = (next..(next + 1000).min(docs)).map(item).collect();
        next += batch.len() as i64;
        coll.insert_many(batch).await?;
    }
    coll.create_index(mongodb::IndexModel::builder().keys(doc! {"k": 1}).build())
        .await?;
    Ok(())
}

/// One step of the mixed workload, chosen by `r`.
async fn step(coll: &mongodb::Collection<Document>, r: u64, fresh: &AtomicU64) -> Result<()> {
    let k = (r % 1000) as i64;
    match r % 10 {
        0 | 1 => {
            let base = fresh.fetch_add(20, Ordering::Relaxed) as i64;
            let batch: Vec<Document> = (base..base + 20).map(item).collect();
            coll.insert_many(batch).await?;
        }
        2 | 3 => {
            let opts = FindOptions::builder().limit(50).build();
            let mut c = coll.find(doc! {"k": k}).with_options(opts).await?;
            while let Some(d) = c.next().await {
                d?;
            }
        }
        4 => {
            coll.update_many(doc! {"k": k}, doc! {"$inc": {"v": 1}, "$set": {"t": "u"}})
                .await?;
        }
        5 => {
            let pipeline = vec![
                doc! {"$match": {"v": {"$lt": 20_000}}},
                doc! {"$group": {"_id": "$g", "n": {"$sum": 1}, "avg": {"$avg": "$v"}}},
            ];
            let mut c = coll.aggregate(pipeline).await?;
            while let Some(d) = c.next().await {
                d?;
            }
        }
        6 => {
            let pipeline = vec![doc! {"$sort": {"v": -1}}, doc! {"$limit": 20}];
            let mut c = coll.aggregate(pipeline).await?;
            while let Some(d) = c.next().await {
                d?;
            }
        }
        7 => {
            // Deletes keep the collection from growing without bound.
            let lo = (r % 50_000) as i64;
            coll.delete_many(doc! {"_id": {"$gte": lo, "$lt": lo + 10}})
                .await?;
        }
        8 => {
            coll.count_documents(doc! {"g": format!("g{}", r % 37)})
                .await?;
        }
        _ => {
            let opts = FindOptions::builder().batch_size(100).limit(2000).build();
            let mut c = coll
                .find(doc! {"s": {"$regex": "^x{150}"}})
                .with_options(opts)
                .await?;
            while let Some(d) = c.next().await {
                d?;
            }
        }
    }
    Ok(())
}

fn op_msg(body: Document) -> Result<Vec<u8>> {
    let raw = RawDocumentBuf::try_from(&body)?;
    Ok(wire::encode_msg(1, 0, &wire::OpMsg::new(raw), None)?)
}

/// What a careless or hostile client does: open a cursor and vanish (the server keeps it until
/// the cursor timeout), send a heavy aggregate and hang up before the answer, or send a query
/// that `maxTimeMS` must cut short.
async fn hostile_step(addr: &str, kind: HostileKind, r: u64) -> Result<()> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    let body = match kind {
        HostileKind::Cursor => doc! {"find": "items", "filter": {}, "batchSize": 2, "$db": "soak"},
        HostileKind::Group => doc! {
            "aggregate": "items",
            "pipeline": [{"$group": {"_id": "$s", "all": {"$push": "$$ROOT"}}}, {"$sort": {"_id": 1}}],
            "cursor": {},
            "$db": "soak",
        },
        HostileKind::Regex => doc! {
            "find": "items",
            "filter": {"s": {"$regex": "(x+x+)+y"}},
            "maxTimeMS": 50,
            "$db": "soak",
        },
    };
    s.write_all(&op_msg(body)?).await?;
    if kind == HostileKind::Cursor {
        // Read the first batch so the cursor exists, then leave without killCursors.
        let mut len = [0u8; 4];
        tokio::io::AsyncReadExt::read_exact(&mut s, &mut len).await?;
    } else {
        tokio::time::sleep(Duration::from_millis(5 + r % 40)).await;
    }
    drop(s);
    Ok(())
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// The server as it stood at one moment: RSS, its anonymous part (the heap, stacks; the rest is
/// file-backed, mostly the binary's code pages, which the kernel can drop), page cache,
/// allocator counters (MB).
#[derive(Clone, Copy)]
struct Mark {
    rss: f64,
    anon: f64,
    cache: f64,
    heap: Heap,
}

impl Mark {
    async fn read(client: &mongodb::Client, pid: u32) -> Result<Mark> {
        let (cache, _) = cache_and_cursors(client).await?;
        Ok(Mark {
            rss: rss_mb(pid).context("rss")?,
            anon: proc_status(pid, "RssAnon:").context("RssAnon")? / 1024.0,
            cache,
            heap: heap_mb(client).await?,
        })
    }

    /// RSS outside the page cache.
    fn rest(&self) -> f64 {
        self.rss - self.cache
    }
}

type Tasks = Vec<tokio::task::JoinHandle<()>>;

/// `n` driver clients running [`step`] until `stop`.
fn spawn_drivers(
    coll: &mongodb::Collection<Document>,
    n: usize,
    counters: &Arc<Counters>,
    stop: &Arc<AtomicBool>,
    fresh: &Arc<AtomicU64>,
) -> Tasks {
    (0..n)
        .map(|c| {
            let (coll, counters, stop, fresh) =
                (coll.clone(), counters.clone(), stop.clone(), fresh.clone());
            tokio::spawn(async move {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (c as u64 + 1));
                while !stop.load(Ordering::Relaxed) {
                    match step(&coll, rng.next(), &fresh).await {
                        Ok(()) => counters.ops.fetch_add(1, Ordering::Relaxed),
                        Err(_) => counters.errors.fetch_add(1, Ordering::Relaxed),
                    };
                }
            })
        })
        .collect()
}

/// `cli.hostile` raw-wire clients sending the kinds asked for until `stop`.
fn spawn_hostile(cli: &Cli, addr: &str, counters: &Arc<Counters>, stop: &Arc<AtomicBool>) -> Tasks {
    if cli.hostile_kinds.is_empty() {
        return Vec::new();
    }
    (0..cli.hostile)
        .map(|h| {
            let (addr, counters, stop) = (addr.to_string(), counters.clone(), stop.clone());
            let kinds = cli.hostile_kinds.clone();
            tokio::spawn(async move {
                let mut rng = Rng(0x2545_f491_4f6c_dd1d ^ (h as u64 + 1));
                while !stop.load(Ordering::Relaxed) {
                    let r = rng.next();
                    let kind = kinds[(r % kinds.len() as u64) as usize];
                    if hostile_step(&addr, kind, r).await.is_ok() {
                        counters.hostile.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect()
}

/// The warm baseline: the driver clients run for `--warmup-secs` (no hostile clients), then
/// the server idles `--settle-secs`, so the baseline has the connections, caches and pages a
/// steady workload leaves, measured after the same kind of quiet as the end of the soak.
async fn warm_up(
    cli: &Cli,
    coll: &mongodb::Collection<Document>,
    fresh: &Arc<AtomicU64>,
) -> Result<u64> {
    let counters = Arc::new(Counters::default());
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = spawn_drivers(coll, cli.clients, &counters, &stop, fresh);
    tokio::time::sleep(Duration::from_secs(cli.warmup_secs)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    tokio::time::sleep(Duration::from_secs(cli.settle_secs)).await;
    Ok(counters.ops.load(Ordering::Relaxed))
}

async fn run(cli: &Cli) -> Result<()> {
    std::fs::create_dir_all(&cli.out)?;
    let dbpath = tempfile::tempdir()?;
    let port = free_port()?;
    let addr = format!("127.0.0.1:{port}");
    let args: Vec<String> = [
        "--port",
        &port.to_string(),
        "--dbpath",
        &dbpath.path().display().to_string(),
        "--setParameter",
        "cursorTimeoutMillis=30000",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let log = cli.out.join("server.log");
    let mut server = Launched::new(&cli.cairn, &args, &addr, Some(&log));
    server
        .respawn(Duration::from_secs(60))
        .map_err(anyhow::Error::msg)?;
    let pid = server.pid().context("server pid")?;
    let idle_before_load = rss_mb(pid).context("rss")?;

    let client = mongodb::Client::with_uri_str(format!("mongodb://{addr}/?maxPoolSize=64")).await?;
    let coll = client.database("soak").collection::<Document>("items");
    load(&coll, cli.docs).await?;
    let loaded = Mark::read(&client, pid).await?;
    let loaded_threads = proc_status(pid, "Threads:").unwrap_or(0.0);
    save_allocator_report(&client, &cli.out, "jemalloc-loaded.txt").await?;
    eprintln!(
        "loaded {} documents; RSS {:.1} MB (empty server {idle_before_load:.1} MB)",
        cli.docs, loaded.rss
    );
    let fresh = Arc::new(AtomicU64::new(10_000_000));
    let warm = if cli.warmup_secs > 0 {
        let ops = warm_up(cli, &coll, &fresh).await?;
        let warm = Mark::read(&client, pid).await?;
        save_allocator_report(&client, &cli.out, "jemalloc-warm.txt").await?;
        eprintln!("warmed up ({ops} operations); RSS {:.1} MB", warm.rss);
        Some(warm)
    } else {
        None
    };

    let counters = Arc::new(Counters::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = spawn_drivers(&coll, cli.clients, &counters, &stop, &fresh);
    tasks.extend(spawn_hostile(cli, &addr, &counters, &stop));
    let samples = sample(cli, &client, pid, &counters, &stop).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    let answered = client
        .database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .is_ok();
    let Some(samples) = samples.filter(|_| answered) else {
        bail!(
            "the server died or stopped answering during the soak (see {})",
            log.display()
        );
    };
    let end_mark = Mark::read(&client, pid).await?;
    let (_, cursors_end) = cache_and_cursors(&client).await?;
    save_allocator_report(&client, &cli.out, "jemalloc-idle.txt").await?;
    let end = End {
        empty: idle_before_load,
        loaded,
        warm,
        end: end_mark,
        cursors_end,
        threads: [loaded_threads, proc_status(pid, "Threads:").unwrap_or(0.0)],
    };
    report(cli, &samples, &counters, &end)
}

/// Samples the server every second through the load and the idle phase (stopping the load on
/// time); saves the allocator's report each time its live heap reaches a new high
/// (`OUT/jemalloc-peak.txt`). `None` if the server died.
async fn sample(
    cli: &Cli,
    client: &mongodb::Client,
    pid: u32,
    counters: &Counters,
    stop: &AtomicBool,
) -> Option<Vec<Sample>> {
    let start = Instant::now();
    let load_for = Duration::from_secs_f64(cli.minutes * 60.0);
    let total = load_for + Duration::from_secs(cli.idle_secs);
    let mut samples = Vec::new();
    let mut high_mb = 0.0;
    while start.elapsed() < total {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if start.elapsed() >= load_for && !stop.load(Ordering::Relaxed) {
            stop.store(true, Ordering::Relaxed);
            eprintln!("load stopped; idling {} s", cli.idle_secs);
        }
        let rss = rss_mb(pid)?;
        let heap = heap_mb(client).await.ok();
        let allocated = heap.map_or(0.0, |h| h.allocated);
        if allocated > high_mb * 1.05 {
            high_mb = allocated;
            let _ = save_allocator_report(client, &cli.out, "jemalloc-peak.txt").await;
        }
        samples.push(Sample {
            secs: start.elapsed().as_secs_f64(),
            rss_mb: rss,
            allocated_mb: allocated,
            metadata_mb: heap.map_or(0.0, |h| h.metadata),
            ops: counters.ops.load(Ordering::Relaxed),
            hostile_ops: counters.hostile.load(Ordering::Relaxed),
        });
    }
    Some(samples)
}

/// What the server looked like at the marks of the run.
struct End {
    /// RSS of the empty server (MB).
    empty: f64,
    loaded: Mark,
    warm: Option<Mark>,
    end: Mark,
    /// The server's threads after loading and after idling.
    threads: [f64; 2],
    cursors_end: i64,
}

fn report(cli: &Cli, samples: &[Sample], counters: &Counters, end: &End) -> Result<()> {
    let load_secs = cli.minutes * 60.0;
    let peak = samples.iter().map(|s| s.rss_mb).fold(0.0, f64::max);
    let peak_allocated = samples.iter().map(|s| s.allocated_mb).fold(0.0, f64::max);
    let ops = counters.ops.load(Ordering::Relaxed);
    let hostile = counters.hostile.load(Ordering::Relaxed);
    let errors = counters.errors.load(Ordering::Relaxed);
    let mark = |m: &Mark| serde_json::json!({"rss": m.rss, "anon": m.anon, "cache": m.cache, "outside_cache": m.rest(), "heap": m.heap});
    let kinds: Vec<String> = cli
        .hostile_kinds
        .iter()
        .map(|k| format!("{k:?}").to_lowercase())
        .collect();
    let json = serde_json::json!({
        "minutes": cli.minutes, "idle_secs": cli.idle_secs, "clients": cli.clients,
        "hostile_clients": cli.hostile, "hostile_kinds": kinds, "docs": cli.docs,
        "warmup_secs": cli.warmup_secs, "settle_secs": cli.settle_secs,
        "empty_rss_mb": end.empty,
        "loaded": mark(&end.loaded),
        "warm": end.warm.as_ref().map(mark),
        "after_idle": mark(&end.end),
        "peak_rss_mb": peak, "peak_allocated_mb": peak_allocated,
        "threads": {"after_load": end.threads[0], "after_idle": end.threads[1]},
        "open_cursors_after_idle": end.cursors_end,
        "ops": ops, "hostile_ops": hostile, "errors": errors,
        "samples": samples,
    });
    std::fs::write(cli.out.join("soak.json"), serde_json::to_vec_pretty(&json)?)?;
    plot(cli, samples)?;
    let md = table(cli, end, peak, peak_allocated)
        + &format!(
            "\n{ops} driver operations ({:.0}/s), {errors} failed; {hostile} hostile connections ({}); {} cursors open after the idle phase.\n",
            ops as f64 / load_secs,
            kinds.join(", "),
            end.cursors_end,
        );
    std::fs::write(cli.out.join("soak.md"), &md)?;
    print!("{md}");
    Ok(())
}

/// The markdown table of the marks: RSS, page cache, RSS outside it, the allocator's counters,
/// and the end against each baseline.
fn table(cli: &Cli, end: &End, peak: f64, peak_allocated: f64) -> String {
    let growth = |base: f64, now: f64| format!("{:+.1}%", (now / base - 1.0) * 100.0);
    let (l, e) = (&end.loaded, &end.end);
    let w = end.warm;
    let cell = |f: &dyn Fn(&Mark) -> f64| w.map_or(String::new(), |m| format!("{:.1} MB", f(&m)));
    let vs_warm = |f: &dyn Fn(&Mark) -> f64| w.map_or(String::new(), |m| growth(f(&m), f(e)));
    let row = |name: &str, f: &dyn Fn(&Mark) -> f64, peak: String| {
        format!(
            "| {name} | {:.1} MB | {} | {peak} | {:.1} MB | {} | {} |\n",
            f(l),
            cell(f),
            f(e),
            growth(f(l), f(e)),
            vs_warm(f),
        )
    };
    let mut md = format!(
        "Empty server: {:.1} MB RSS.\n\n\
         | | after loading {} docs | warm ({} s of driver load, {} s idle) | peak under load | after {} s idle | after idle vs loaded | after idle vs warm |\n\
         |---|---|---|---|---|---|---|\n",
        end.empty, cli.docs, cli.warmup_secs, cli.settle_secs, cli.idle_secs
    );
    md += &row("RSS", &|m| m.rss, format!("{peak:.1} MB"));
    md += &row("page cache", &|m| m.cache, String::new());
    md += &row(
        "**RSS outside the page cache**",
        &|m| m.rest(),
        String::new(),
    );
    md += &row("anonymous RSS (`RssAnon`)", &|m| m.anon, String::new());
    md += &row(
        "anonymous RSS outside the page cache",
        &|m| m.anon - m.cache,
        String::new(),
    );
    md += &row(
        "heap allocated (cache included)",
        &|m| m.heap.allocated,
        format!("{peak_allocated:.1} MB"),
    );
    md += &row("allocator resident", &|m| m.heap.resident, String::new());
    md += &row("allocator metadata", &|m| m.heap.metadata, String::new());
    md += &format!(
        "| server threads | {} | | | {} | | |\n",
        end.threads[0], end.threads[1]
    );
    md
}

/// `OUT/soak.png`: RSS, the live heap, the allocator's metadata and the driver throughput over
/// the run.
fn plot(cli: &Cli, samples: &[Sample]) -> Result<()> {
    let pick = |f: &dyn Fn(&Sample) -> f64| samples.iter().map(|s| (s.secs, f(s))).collect();
    let mut rate = Vec::new();
    for w in samples.windows(2) {
        let dt = (w[1].secs - w[0].secs).max(1e-3);
        rate.push((w[1].secs, (w[1].ops - w[0].ops) as f64 / dt / 10.0));
    }
    let series = [
        Series {
            name: "server RSS (MB)".into(),
            points: pick(&|s| s.rss_mb),
        },
        Series {
            name: "heap allocated (MB)".into(),
            points: pick(&|s| s.allocated_mb),
        },
        Series {
            name: "allocator metadata (MB)".into(),
            points: pick(&|s| s.metadata_mb),
        },
        Series {
            name: "driver ops/s / 10".into(),
            points: rate,
        },
    ];
    let title = format!(
        "cairn-soak: {} clients + {} hostile, {:.0} min load, {} s idle",
        cli.clients, cli.hostile, cli.minutes, cli.idle_secs
    );
    let png = time_lines(
        &series,
        &title,
        "seconds since the load started",
        Some(cli.minutes * 60.0),
    )
    .map_err(anyhow::Error::msg)?;
    std::fs::write(cli.out.join("soak.png"), png)?;
    Ok(())
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(run(&cli))
}
