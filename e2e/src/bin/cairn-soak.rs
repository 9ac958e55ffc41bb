//! `cairn-soak`: a long mixed workload with hostile clients, and the server's memory over time.
//! It starts a `cairn` of its own (so it can read its RSS from /proc), loads a collection, then
//! for `--minutes` runs `--clients` driver clients doing inserts, finds, updates, deletes,
//! `$group` and sorting aggregates, plus raw-wire clients that open cursors and vanish,
//! send a heavy aggregate and hang up at once, or ask for more than `maxTimeMS` allows. Then
//! the load stops and the server idles for `--idle-secs` while sampling goes on. The report
//! (JSON, markdown, and a PNG of RSS and throughput over time) says the RSS at start, at its
//! peak and after the idle phase, and whether the server stayed up. See docs/BENCHMARKS.md.

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
    /// Documents loaded before the load starts.
    #[arg(long, default_value_t = 100_000)]
    docs: i64,
    /// Where the report goes (created).
    #[arg(long, default_value = "target/soak")]
    out: PathBuf,
}

/// One sample of the server: seconds since the load started, RSS, operations done so far.
#[derive(serde::Serialize, Clone, Copy)]
struct Sample {
    secs: f64,
    rss_mb: f64,
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
async fn hostile_step(addr: &str, r: u64) -> Result<()> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    let body = match r % 3 {
        0 => doc! {"find": "items", "filter": {}, "batchSize": 2, "$db": "soak"},
        1 => doc! {
            "aggregate": "items",
            "pipeline": [{"$group": {"_id": "$s", "all": {"$push": "$$ROOT"}}}, {"$sort": {"_id": 1}}],
            "cursor": {},
            "$db": "soak",
        },
        _ => doc! {
            "find": "items",
            "filter": {"s": {"$regex": "(x+x+)+y"}},
            "maxTimeMS": 50,
            "$db": "soak",
        },
    };
    s.write_all(&op_msg(body)?).await?;
    if r.is_multiple_of(3) {
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
    let baseline = rss_mb(pid).context("rss")?;
    let loaded_threads = proc_status(pid, "Threads:").unwrap_or(0.0);
    let (cache_loaded, _) = cache_and_cursors(&client).await?;
    let heap_loaded = heap_mb(&client).await?;
    save_allocator_report(&client, &cli.out, "jemalloc-loaded.txt").await?;
    eprintln!(
        "loaded {} documents; RSS {baseline:.1} MB (empty server {idle_before_load:.1} MB)",
        cli.docs
    );

    let counters = Arc::new(Counters::default());
    let stop = Arc::new(AtomicBool::new(false));
    let fresh = Arc::new(AtomicU64::new(10_000_000));
    let mut tasks = Vec::new();
    for c in 0..cli.clients {
        let (coll, counters, stop, fresh) =
            (coll.clone(), counters.clone(), stop.clone(), fresh.clone());
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (c as u64 + 1));
            while !stop.load(Ordering::Relaxed) {
                match step(&coll, rng.next(), &fresh).await {
                    Ok(()) => counters.ops.fetch_add(1, Ordering::Relaxed),
                    Err(_) => counters.errors.fetch_add(1, Ordering::Relaxed),
                };
            }
        }));
    }
    for h in 0..cli.hostile {
        let (addr, counters, stop) = (addr.clone(), counters.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng(0x2545_f491_4f6c_dd1d ^ (h as u64 + 1));
            while !stop.load(Ordering::Relaxed) {
                if hostile_step(&addr, rng.next()).await.is_ok() {
                    counters.hostile.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }

    let start = Instant::now();
    let load_for = Duration::from_secs_f64(cli.minutes * 60.0);
    let total = load_for + Duration::from_secs(cli.idle_secs);
    let mut samples = Vec::new();
    let mut alive = true;
    while start.elapsed() < total {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if start.elapsed() >= load_for && !stop.load(Ordering::Relaxed) {
            stop.store(true, Ordering::Relaxed);
            eprintln!("load stopped; idling {} s", cli.idle_secs);
        }
        let Some(rss) = rss_mb(pid) else {
            alive = false;
            break;
        };
        samples.push(Sample {
            secs: start.elapsed().as_secs_f64(),
            rss_mb: rss,
            ops: counters.ops.load(Ordering::Relaxed),
            hostile_ops: counters.hostile.load(Ordering::Relaxed),
        });
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    let answered = client
        .database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .is_ok();
    if !alive || !answered {
        bail!(
            "the server died or stopped answering during the soak (see {})",
            log.display()
        );
    }
    let (cache_end, cursors_end) = cache_and_cursors(&client).await?;
    save_allocator_report(&client, &cli.out, "jemalloc-idle.txt").await?;
    let end = End {
        cache_loaded,
        cache_end,
        cursors_end,
        heap_loaded,
        heap_end: heap_mb(&client).await?,
        threads: [loaded_threads, proc_status(pid, "Threads:").unwrap_or(0.0)],
    };
    report(cli, baseline, idle_before_load, &samples, &counters, &end)
}

/// What `serverStatus` said after loading and after the idle phase.
struct End {
    cache_loaded: f64,
    /// The allocator's live bytes (MB), after loading and after idling.
    heap_loaded: Heap,
    heap_end: Heap,
    /// The server's threads after loading and after idling.
    threads: [f64; 2],
    cache_end: f64,
    cursors_end: i64,
}

fn report(
    cli: &Cli,
    baseline: f64,
    empty: f64,
    samples: &[Sample],
    counters: &Counters,
    end: &End,
) -> Result<()> {
    let load_secs = cli.minutes * 60.0;
    let peak = samples.iter().map(|s| s.rss_mb).fold(0.0, f64::max);
    let last = samples.last().map_or(baseline, |s| s.rss_mb);
    let ops = counters.ops.load(Ordering::Relaxed);
    let hostile = counters.hostile.load(Ordering::Relaxed);
    let errors = counters.errors.load(Ordering::Relaxed);
    let json = serde_json::json!({
        "minutes": cli.minutes, "idle_secs": cli.idle_secs, "clients": cli.clients,
        "hostile_clients": cli.hostile, "docs": cli.docs,
        "rss_mb": {"empty": empty, "baseline_after_load": baseline, "peak": peak, "after_idle": last},
        "cache_mb": {"after_load": end.cache_loaded, "after_idle": end.cache_end},
        "heap_mb": {"after_load": end.heap_loaded, "after_idle": end.heap_end},
        "threads": {"after_load": end.threads[0], "after_idle": end.threads[1]},
        "open_cursors_after_idle": end.cursors_end,
        "ops": ops, "hostile_ops": hostile, "errors": errors,
        "samples": samples,
    });
    std::fs::write(cli.out.join("soak.json"), serde_json::to_vec_pretty(&json)?)?;
    let mut rss = Vec::new();
    let mut rate = Vec::new();
    let mut prev: Option<Sample> = None;
    for s in samples {
        rss.push((s.secs, s.rss_mb));
        if let Some(p) = prev {
            let dt = (s.secs - p.secs).max(1e-3);
            rate.push((s.secs, (s.ops - p.ops) as f64 / dt / 10.0));
        }
        prev = Some(*s);
    }
    let series = [
        Series {
            name: "server RSS (MB)".into(),
            points: rss,
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
        Some(load_secs),
    )
    .map_err(anyhow::Error::msg)?;
    std::fs::write(cli.out.join("soak.png"), png)?;
    let (base_rest, last_rest) = (baseline - end.cache_loaded, last - end.cache_end);
    let md = format!(
        "| | empty | after loading {} docs | peak under load | after {} s idle | after idle vs loaded |\n\
         |---|---|---|---|---|---|\n\
         | RSS | {empty:.1} MB | {baseline:.1} MB | {peak:.1} MB | {last:.1} MB | {:+.1}% |\n\
         | page cache | | {:.1} MB | | {:.1} MB | |\n\
         | RSS outside the page cache | | {base_rest:.1} MB | | {last_rest:.1} MB | {:+.1}% |\n\
         | heap allocated (`serverStatus.jemalloc.allocated`, cache included) | | {:.1} MB | | {:.1} MB | |\n\
         | allocator resident (`serverStatus.jemalloc.resident`) | | {:.1} MB | | {:.1} MB | |\n\
         | server threads | | {} | | {} | |\n\n\
         {ops} driver operations ({:.0}/s), {errors} failed; {hostile} hostile connections (abandoned cursors, hang-ups, cut-short queries); {} cursors open after the idle phase.\n",
        cli.docs,
        cli.idle_secs,
        (last / baseline - 1.0) * 100.0,
        end.cache_loaded,
        end.cache_end,
        (last_rest / base_rest - 1.0) * 100.0,
        end.heap_loaded.allocated,
        end.heap_end.allocated,
        end.heap_loaded.resident,
        end.heap_end.resident,
        end.threads[0],
        end.threads[1],
        ops as f64 / load_secs,
        end.cursors_end,
    );
    std::fs::write(cli.out.join("soak.md"), &md)?;
    print!("{md}");
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
