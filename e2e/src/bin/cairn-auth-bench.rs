//! `cairn-auth-bench`: what authentication and TLS cost. Starts one `cairn --auth --tlsMode
//! preferTLS` (plain and TLS on the same port) with a certificate made on the spot, then times,
//! per new connection, everything from `connect` to the reply of the first command: plain with
//! no login, SCRAM-SHA-256 and SCRAM-SHA-1 logins (speculative, as drivers do; with the client's
//! SaltedPassword cached, as drivers do after their first connection, and without), the TLS
//! handshake alone, and TLS with a login. The kinds take turns so that the machine's load weighs
//! on all alike. Then findOne by `_id` throughput through the Rust driver, plain against TLS,
//! one client task and several. Prints markdown tables (docs/BENCHMARKS.md).

use anyhow::{Context, Result, bail};
use bson::{Document, doc};
use cairn_e2e::Server;
use cairn_e2e::auth::{
    Login, Mech, command, login, make_tls_files, reply_code, tls_client_config, tls_connect,
};
use clap::Parser;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Connections of each kind opened before measuring.
const WARMUP_CONNECTIONS: usize = 20;
/// Connections of one kind in a row before the next kind's turn.
const SLICE: usize = 10;
/// Documents findOne picks from.
const DOCS: i32 = 10_000;

#[derive(Parser)]
#[command(
    name = "cairn-auth-bench",
    about = "Handshake, SCRAM and TLS costs of cairn"
)]
struct Cli {
    /// The cairn binary to start (use a release build).
    #[arg(long, default_value = "target/release/cairn")]
    bin: String,
    /// Measured connections of each kind.
    #[arg(long, default_value_t = 300)]
    connections: usize,
    /// Seconds each findOne throughput run lasts.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Concurrent client tasks of the second findOne run.
    #[arg(long, default_value_t = 8)]
    tasks: usize,
}

const USER: &str = "bench";
const PASSWORD: &str = "bench-password";

fn quantile_us(sorted: &[Duration], q: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

fn ping<S: std::io::Read + std::io::Write>(s: &mut S) -> Result<()> {
    let r = command(s, &doc! { "ping": 1, "$db": "admin" })?;
    if reply_code(&r) != 0 {
        bail!("ping failed: {r}");
    }
    Ok(())
}

fn hello<S: std::io::Read + std::io::Write>(s: &mut S) -> Result<()> {
    command(s, &doc! { "hello": 1, "$db": "admin" })?;
    Ok(())
}

fn do_login<S: std::io::Read + std::io::Write>(
    s: &mut S,
    mech: Mech,
    salted: Option<&[u8]>,
) -> Result<Vec<u8>> {
    let l = Login {
        user: USER,
        password: PASSWORD,
        db: "admin",
        mech,
        speculative: true,
        wrong_proof: false,
        salted,
    };
    login(s, &l)?.map_err(|r| anyhow::anyhow!("login failed: {r}"))
}

fn tcp(addr: &str) -> Result<TcpStream> {
    let s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    Ok(s)
}

struct Kind<'a> {
    name: &'static str,
    run: Box<dyn FnMut() -> Result<()> + 'a>,
    samples: Vec<Duration>,
}

fn connection_kinds(
    addr: &str,
    ca_der: &[u8],
    connections: usize,
) -> Result<Vec<(String, f64, f64)>> {
    let cfg = tls_client_config(ca_der);
    // The SaltedPassword a driver caches after its first login (same salt and iterations).
    let mut first = tcp(addr)?;
    let salted256 = do_login(&mut first, Mech::Sha256, None)?;
    let salted1 = do_login(&mut tcp(addr)?, Mech::Sha1, None)?;
    let mut kinds: Vec<Kind> = vec![
        Kind {
            name: "plain: hello + ping, no login",
            run: Box::new(|| {
                let mut s = tcp(addr)?;
                hello(&mut s)?;
                ping(&mut s)
            }),
            samples: vec![],
        },
        Kind {
            name: "plain: SCRAM-SHA-256 login + ping (client key cached)",
            run: Box::new(|| {
                let mut s = tcp(addr)?;
                do_login(&mut s, Mech::Sha256, Some(&salted256))?;
                ping(&mut s)
            }),
            samples: vec![],
        },
        Kind {
            name: "plain: SCRAM-SHA-1 login + ping (client key cached)",
            run: Box::new(|| {
                let mut s = tcp(addr)?;
                do_login(&mut s, Mech::Sha1, Some(&salted1))?;
                ping(&mut s)
            }),
            samples: vec![],
        },
        Kind {
            name: "plain: SCRAM-SHA-256 login + ping (client derives its key: 15,000 PBKDF2 iterations)",
            run: Box::new(|| {
                let mut s = tcp(addr)?;
                do_login(&mut s, Mech::Sha256, None)?;
                ping(&mut s)
            }),
            samples: vec![],
        },
        Kind {
            name: "TLS: handshake only (TLS 1.3, ECDSA P-256)",
            run: Box::new(|| {
                tls_connect(addr, &cfg)?;
                Ok(())
            }),
            samples: vec![],
        },
        Kind {
            name: "TLS: handshake + hello + ping, no login",
            run: Box::new(|| {
                let mut s = tls_connect(addr, &cfg)?;
                hello(&mut s)?;
                ping(&mut s)
            }),
            samples: vec![],
        },
        Kind {
            name: "TLS: handshake + SCRAM-SHA-256 login + ping (client key cached)",
            run: Box::new(|| {
                let mut s = tls_connect(addr, &cfg)?;
                do_login(&mut s, Mech::Sha256, Some(&salted256))?;
                ping(&mut s)
            }),
            samples: vec![],
        },
    ];
    for k in &mut kinds {
        for _ in 0..WARMUP_CONNECTIONS {
            (k.run)().with_context(|| k.name)?;
        }
    }
    let mut done = 0;
    while done < connections {
        let n = SLICE.min(connections - done);
        for k in &mut kinds {
            for _ in 0..n {
                let t = Instant::now();
                (k.run)().with_context(|| k.name)?;
                k.samples.push(t.elapsed());
            }
        }
        done += n;
    }
    Ok(kinds
        .into_iter()
        .map(|mut k| {
            k.samples.sort();
            (
                k.name.to_string(),
                quantile_us(&k.samples, 0.5),
                quantile_us(&k.samples, 0.9),
            )
        })
        .collect())
}

async fn find_one_rate(uri: &str, seconds: f64, tasks: usize) -> Result<(f64, f64)> {
    let client = mongodb::Client::with_uri_str(uri).await?;
    let coll = client.database("bench").collection::<Document>("docs");
    coll.find_one(doc! { "_id": 0 }).await?;
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let mut handles = Vec::new();
    for t in 0..tasks {
        let coll = coll.clone();
        handles.push(tokio::spawn(async move {
            let mut n: u64 = 0;
            let mut lat = Vec::new();
            while Instant::now() < deadline {
                let id = ((n as i64 * 7919 + t as i64 * 104_729) % DOCS as i64) as i32;
                let started = Instant::now();
                let d = coll.find_one(doc! { "_id": id }).await?;
                lat.push(started.elapsed());
                if d.is_none() {
                    bail!("document {id} missing");
                }
                n += 1;
            }
            Ok::<_, anyhow::Error>((n, lat))
        }));
    }
    let started = Instant::now();
    let mut total = 0;
    let mut lat = Vec::new();
    for h in handles {
        let (n, l) = h.await??;
        total += n;
        lat.extend(l);
    }
    lat.sort();
    Ok((
        total as f64 / started.elapsed().as_secs_f64().max(seconds),
        quantile_us(&lat, 0.5),
    ))
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let dir = tempfile::tempdir()?;
    let files = make_tls_files(dir.path());
    let server = Server::start(
        &cli.bin,
        &[
            "--auth",
            "--tlsMode",
            "preferTLS",
            "--tlsCertificateKeyFile",
            files.server.to_str().unwrap_or_default(),
        ],
    );
    let addr = server.addr();
    let r = command(
        &mut tcp(&addr)?,
        &doc! { "createUser": USER, "pwd": PASSWORD, "roles": ["root"], "$db": "admin" },
    )?;
    if reply_code(&r) != 0 {
        bail!("createUser: {r}");
    }
    let plain = format!(
        "mongodb://{USER}:{PASSWORD}@127.0.0.1:{}/?directConnection=true",
        server.port
    );
    let tls = format!(
        "mongodb://{USER}:{PASSWORD}@localhost:{}/?directConnection=true&tls=true&tlsCAFile={}",
        server.port,
        files.ca.display()
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let c = mongodb::Client::with_uri_str(&plain).await?;
        let docs: Vec<Document> = (0..DOCS)
            .map(|i| doc! { "_id": i, "name": format!("user{i}"), "n": i })
            .collect();
        c.database("bench")
            .collection::<Document>("docs")
            .insert_many(docs)
            .await?;
        Ok::<_, anyhow::Error>(())
    })?;

    println!(
        "### New connection to first reply (µs, {} connections of each kind)\n",
        cli.connections
    );
    println!("| connection | median | p90 |\n| --- | ---: | ---: |");
    for (name, p50, p90) in connection_kinds(&addr, &files.ca_der, cli.connections)? {
        println!("| {name} | {p50:.0} | {p90:.0} |");
    }
    println!(
        "\n### findOne by _id through the Rust driver ({} s per run)\n",
        cli.seconds
    );
    println!("| transport | client tasks | ops/s | median µs/op |\n| --- | ---: | ---: | ---: |");
    for tasks in [1, cli.tasks] {
        for (name, uri) in [("plain", &plain), ("TLS", &tls)] {
            let (rate, p50) = rt.block_on(find_one_rate(uri, cli.seconds, tasks))?;
            println!("| {name} | {tasks} | {rate:.0} | {p50:.0} |");
        }
    }
    Ok(())
}
