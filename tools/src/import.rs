//! `import`: mongoimport's flags and behaviour. One reader thread cuts the input into chunks
//! (JSON lines, JSON array elements or CSV/TSV rows, with their line numbers, at most
//! `BATCH_BYTES_MAX` input bytes or `--batchSize` documents each); `--numInsertionWorkers` tasks
//! parse a chunk off the async threads and write it as one unordered batch. A bad line or a
//! failed document is reported with its line number and the reason, and the run goes on unless
//! `--stopOnError`. The summary is mongoimport's: "N document(s) imported successfully. M
//! document(s) failed to import."

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bson::RawDocumentBuf;
use clap::{Args, ValueEnum};
use tokio::sync::{Mutex, mpsc};

use crate::common::{Bar, ConnArgs, Tally};
use crate::csvfmt::{self, Field};
use crate::extjson;
use crate::writer::{BATCH_BYTES_MAX, BATCH_COUNT_MAX, Target, WriteMode};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FileType {
    Json,
    Csv,
    Tsv,
}

#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    #[arg(long, short = 'd')]
    pub db: Option<String>,
    /// Default: the input file's name without its extension.
    #[arg(long, short = 'c')]
    pub collection: Option<String>,
    /// Input file; standard input when absent (also accepted as the last argument).
    #[arg(long)]
    pub file: Option<PathBuf>,
    #[arg(conflicts_with = "file", value_name = "FILE")]
    pub file_arg: Option<PathBuf>,
    #[arg(long = "type", value_enum, default_value = "json")]
    pub file_type: FileType,
    /// The input is one JSON array of documents instead of one document per line.
    #[arg(long = "jsonArray")]
    pub json_array: bool,
    /// CSV/TSV: the first line names the fields.
    #[arg(long = "headerline")]
    pub headerline: bool,
    /// CSV/TSV: comma-separated field names (name.type() with --columnsHaveTypes).
    #[arg(long, short = 'f')]
    pub fields: Option<String>,
    /// CSV/TSV: a file with one field name per line.
    #[arg(long = "fieldFile")]
    pub field_file: Option<PathBuf>,
    #[arg(long = "columnsHaveTypes")]
    pub columns_have_types: bool,
    /// CSV/TSV: leave out fields whose cell is empty.
    #[arg(long = "ignoreBlanks")]
    pub ignore_blanks: bool,
    #[arg(long, value_enum, default_value = "insert")]
    pub mode: WriteMode,
    /// Comma-separated fields that identify a document in upsert/merge/delete mode.
    #[arg(long = "upsertFields", default_value = "_id")]
    pub upsert_fields: String,
    /// Drop the collection first.
    #[arg(long)]
    pub drop: bool,
    /// Stop at the first bad line or failed document.
    #[arg(long = "stopOnError")]
    pub stop_on_error: bool,
    #[arg(long = "numInsertionWorkers", short = 'j', default_value_t = 2)]
    pub workers: usize,
    /// Documents per batch at most (batches are also cut at 4 MiB of input).
    #[arg(long = "batchSize", default_value_t = BATCH_COUNT_MAX)]
    pub batch_size: usize,
}

/// How an input item is to be turned into a document.
enum Raw {
    /// A JSON text (one line).
    Text(String),
    /// Already parsed (a `--jsonArray` element).
    Json(extjson::Json),
    /// A CSV/TSV row.
    Row(csv::StringRecord),
    /// Unreadable input at this position.
    Bad(String),
}

struct Chunk {
    /// (line number, item)
    items: Vec<(u64, Raw)>,
    bytes: u64,
    fields: Arc<Vec<Field>>,
}

pub async fn run(mut args: ImportArgs) -> anyhow::Result<crate::Report> {
    if args.file.is_none() {
        args.file = args.file_arg.take();
    }
    let db = args
        .db
        .clone()
        .or_else(|| args.conn.uri_db())
        .unwrap_or_else(|| "test".into());
    let coll = match (&args.collection, &args.file) {
        (Some(c), _) => c.clone(),
        (None, Some(f)) => f
            .file_stem()
            .and_then(|s| s.to_str())
            .map(str::to_owned)
            .ok_or_else(|| anyhow::anyhow!("cannot name a collection after {}", f.display()))?,
        (None, None) => anyhow::bail!("--collection is required when reading standard input"),
    };
    let given_fields = given_fields(&args)?;
    if args.file_type != FileType::Json && given_fields.is_none() && !args.headerline {
        anyhow::bail!("CSV/TSV import needs --headerline, --fields or --fieldFile");
    }
    if args.file_type == FileType::Json && (args.headerline || given_fields.is_some()) {
        anyhow::bail!("--headerline, --fields and --fieldFile are for CSV/TSV input");
    }
    let (input, total): (Box<dyn Read + Send>, Option<u64>) = match &args.file {
        Some(p) => {
            let f = std::fs::File::open(p)
                .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", p.display()))?;
            let len = f.metadata().ok().map(|m| m.len());
            (Box::new(f), len)
        }
        None => (Box::new(std::io::stdin()), None),
    };
    let client = args.conn.client().await?;
    let upsert_fields: Vec<String> = args
        .upsert_fields
        .split(',')
        .map(|s| s.trim().to_owned())
        .collect();
    let target = Target::new(
        &client,
        &db,
        &coll,
        args.mode,
        upsert_fields,
        args.stop_on_error,
    );
    if args.drop {
        target.coll.drop().await?;
    }
    let bar = Bar::new(&format!("{db}.{coll}"), total, args.conn.quiet);
    let tally = Arc::new(Tally::new(args.conn.quiet));
    let stop = Arc::new(AtomicBool::new(false));
    // --stopOnError: one worker, so nothing after the first error is in flight.
    let workers = if args.stop_on_error {
        1
    } else {
        args.workers.max(1)
    };
    let (tx, rx) = mpsc::channel::<Chunk>(workers * 2);
    let reader = {
        let (args, stop, tally, bar) = (args.clone(), stop.clone(), tally.clone(), bar.clone());
        std::thread::spawn(move || read_input(input, &args, given_fields, tx, &stop, &tally, &bar))
    };
    let rx = Arc::new(Mutex::new(rx));
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let (rx, target, tally, bar, stop) = (
            rx.clone(),
            target.clone(),
            tally.clone(),
            bar.clone(),
            stop.clone(),
        );
        let ignore_blanks = args.ignore_blanks;
        tasks.push(tokio::spawn(async move {
            loop {
                let Some(chunk) = rx.lock().await.recv().await else {
                    break;
                };
                if stop.load(Ordering::Relaxed) {
                    continue; // drain so the reader is never blocked
                }
                write_chunk(chunk, &target, &tally, &bar, &stop, ignore_blanks).await?;
            }
            anyhow::Ok(())
        }));
    }
    let mut fatal = None;
    for t in tasks {
        if let Err(e) = t.await.map_err(anyhow::Error::from).and_then(|r| r) {
            stop.store(true, Ordering::Relaxed);
            fatal.get_or_insert(e);
        }
    }
    let read_result = reader
        .join()
        .map_err(|_| anyhow::anyhow!("reader thread panicked"))?;
    bar.finish();
    if let Some(e) = fatal {
        return Err(e);
    }
    read_result?;
    let ok = tally.ok.load(Ordering::Relaxed);
    let failed = tally.failed.load(Ordering::Relaxed);
    let verb = if args.mode == WriteMode::Delete {
        "deleted"
    } else {
        "imported"
    };
    Ok(tally.report(format!(
        "{ok} document(s) {verb} successfully. {failed} document(s) failed to import."
    )))
}

/// `--fields` or `--fieldFile`, parsed.
fn given_fields(args: &ImportArgs) -> anyhow::Result<Option<Vec<Field>>> {
    let typed = args.columns_have_types;
    let fields = match (&args.fields, &args.field_file) {
        (Some(_), Some(_)) => anyhow::bail!("give --fields or --fieldFile, not both"),
        (Some(list), None) => csvfmt::parse_fields(list, typed).map_err(anyhow::Error::msg)?,
        (None, Some(p)) => std::fs::read_to_string(p)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))?
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| csvfmt::parse_field(l, typed))
            .collect::<Result<_, _>>()
            .map_err(anyhow::Error::msg)?,
        (None, None) => return Ok(None),
    };
    Ok(Some(fields))
}

/// Parse a chunk (on a blocking thread), write it, count and report.
async fn write_chunk(
    chunk: Chunk,
    target: &Target,
    tally: &Tally,
    bar: &Bar,
    stop: &AtomicBool,
    ignore_blanks: bool,
) -> anyhow::Result<()> {
    let bytes = chunk.bytes;
    let (docs, lines, bad) =
        tokio::task::spawn_blocking(move || parse_chunk(chunk, ignore_blanks)).await?;
    let mut bad = bad;
    if target.ordered {
        // --stopOnError: the first bad line ends the run; later ones are not reported.
        bad.sort_unstable_by_key(|(line, _)| *line);
        bad.truncate(1);
    }
    let bad_count = bad.len() as u64;
    for (line, why) in &bad {
        tally.problem(bar, format!("line {line}: {why}"));
    }
    let n = docs.len() as u64;
    // With --stopOnError nothing from the first bad line on is written.
    let docs = match bad.iter().map(|(line, _)| *line).min() {
        Some(first_bad) if target.ordered => {
            stop.store(true, Ordering::Relaxed);
            let keep = lines.iter().take_while(|&&l| l < first_bad).count();
            docs.into_iter().take(keep).collect()
        }
        _ => docs,
    };
    let written = docs.len() as u64;
    let failures = target.write(docs).await?;
    for (i, why) in &failures {
        let line = lines.get(*i).copied().unwrap_or(0);
        tally.problem(bar, format!("line {line}: {why}"));
    }
    let failed = failures.len() as u64;
    if target.ordered && failed > 0 {
        stop.store(true, Ordering::Relaxed);
    }
    // An ordered batch stops at its first failure: the documents after it were not written.
    let ok = if target.ordered && failed > 0 {
        failures.iter().map(|(i, _)| *i as u64).min().unwrap_or(0)
    } else {
        written - failed
    };
    tally.ok.fetch_add(ok, Ordering::Relaxed);
    tally
        .failed
        .fetch_add(bad_count + failed, Ordering::Relaxed);
    bar.advance(n, bytes);
    Ok(())
}

type Parsed = (Vec<RawDocumentBuf>, Vec<u64>, Vec<(u64, String)>);

fn parse_chunk(chunk: Chunk, ignore_blanks: bool) -> Parsed {
    let mut docs = Vec::with_capacity(chunk.items.len());
    let mut lines = Vec::with_capacity(chunk.items.len());
    let mut bad = Vec::new();
    for (line, raw) in chunk.items {
        let doc = match raw {
            Raw::Text(t) => extjson::parse_line(&t),
            Raw::Json(j) => extjson::to_document(j),
            Raw::Row(r) => csvfmt::row(&chunk.fields, &r, ignore_blanks),
            Raw::Bad(why) => Err(why),
        };
        match doc.and_then(|d| RawDocumentBuf::try_from(&d).map_err(|e| e.to_string())) {
            Ok(d) => {
                docs.push(d);
                lines.push(line);
            }
            Err(why) => bad.push((line, why)),
        }
    }
    (docs, lines, bad)
}

/// Cuts the input into chunks; runs on its own thread.
struct Chunker<'a> {
    tx: mpsc::Sender<Chunk>,
    items: Vec<(u64, Raw)>,
    bytes: u64,
    count_max: usize,
    fields: Arc<Vec<Field>>,
    stop: &'a AtomicBool,
}

impl Chunker<'_> {
    /// Add an item; false when the run is stopping.
    fn push(&mut self, line: u64, raw: Raw, bytes: u64) -> bool {
        self.items.push((line, raw));
        self.bytes += bytes;
        if self.items.len() >= self.count_max || self.bytes >= BATCH_BYTES_MAX as u64 {
            return self.flush();
        }
        !self.stop.load(Ordering::Relaxed)
    }

    fn flush(&mut self) -> bool {
        if !self.items.is_empty() {
            let chunk = Chunk {
                items: std::mem::take(&mut self.items),
                bytes: std::mem::take(&mut self.bytes),
                fields: self.fields.clone(),
            };
            if self.tx.blocking_send(chunk).is_err() {
                return false;
            }
        }
        !self.stop.load(Ordering::Relaxed)
    }
}

fn read_input(
    input: Box<dyn Read + Send>,
    args: &ImportArgs,
    fields: Option<Vec<Field>>,
    tx: mpsc::Sender<Chunk>,
    stop: &AtomicBool,
    tally: &Tally,
    bar: &Bar,
) -> anyhow::Result<()> {
    let mut chunker = Chunker {
        tx,
        items: Vec::new(),
        bytes: 0,
        count_max: args.batch_size.max(1),
        fields: Arc::new(fields.unwrap_or_default()),
        stop,
    };
    let input = BufReader::with_capacity(1 << 20, input);
    match args.file_type {
        FileType::Json if args.json_array => read_array(input, &mut chunker, tally, bar)?,
        FileType::Json => read_lines(input, &mut chunker)?,
        FileType::Csv | FileType::Tsv => read_rows(input, args, &mut chunker)?,
    }
    chunker.flush();
    Ok(())
}

/// JSON documents, normally one per line. A document may also span lines (as `--pretty` output
/// does): a line that leaves braces open continues on the next lines until they close, unless
/// a line starts with `{` in its first column, which always starts a new document, so one
/// unbalanced line costs one document, not the rest of the file.
fn read_lines(mut input: impl BufRead, chunker: &mut Chunker) -> anyhow::Result<()> {
    let mut line_no = 0u64;
    // (first line, text so far, bytes, nesting depth)
    let mut pending: Option<(u64, Vec<u8>, u64, i64)> = None;
    let emit = |chunker: &mut Chunker, (line, text, bytes, _): (u64, Vec<u8>, u64, i64)| {
        let raw = match String::from_utf8(text) {
            Ok(s) => Raw::Text(s),
            Err(_) => Raw::Bad("not valid UTF-8".into()),
        };
        chunker.push(line, raw, bytes)
    };
    loop {
        let mut buf = Vec::new();
        let n = input.read_until(b'\n', &mut buf)?;
        if n == 0 {
            if let Some(p) = pending.take() {
                emit(chunker, p);
            }
            return Ok(());
        }
        line_no += 1;
        if line_no == 1 && buf.starts_with(b"\xef\xbb\xbf") {
            buf.drain(..3); // a UTF-8 byte order mark
        }
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let starts_doc = buf.first() == Some(&b'{');
        let item = match pending.take() {
            Some(p) if starts_doc => {
                if !emit(chunker, p) {
                    return Ok(());
                }
                (line_no, buf, n as u64, 0)
            }
            Some((line, mut text, bytes, depth)) => {
                text.extend_from_slice(&buf);
                (line, text, bytes + n as u64, depth)
            }
            None => (line_no, buf, n as u64, 0),
        };
        let (line, text, bytes, depth) = item;
        let start = text.len() - (n.min(text.len()));
        let depth = depth + nesting(&text[start..]);
        if depth > 0 {
            pending = Some((line, text, bytes, depth));
        } else if !emit(chunker, (line, text, bytes, depth)) {
            return Ok(());
        }
    }
}

/// Opened minus closed braces and brackets outside strings in one line.
fn nesting(line: &[u8]) -> i64 {
    let (mut depth, mut in_string, mut escaped) = (0i64, false, false);
    for &b in line {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
        } else {
            match b {
                b'"' => in_string = true,
                b'{' | b'[' => depth += 1,
                b'}' | b']' => depth -= 1,
                _ => {}
            }
        }
    }
    depth
}

/// `--jsonArray`: the elements of one top-level array, each with the line it starts on. A
/// syntax error ends the input (there is no next element to resynchronise on).
fn read_array(
    mut input: impl Read,
    chunker: &mut Chunker,
    tally: &Tally,
    bar: &Bar,
) -> anyhow::Result<()> {
    let mut text = String::new();
    input.read_to_string(&mut text)?;
    let bytes = text.as_bytes();
    let mut pos = 0;
    let mut line = 1u64;
    let skip_ws = |pos: &mut usize, line: &mut u64| {
        while let Some(&b) = bytes.get(*pos) {
            if !b.is_ascii_whitespace() {
                break;
            }
            *line += u64::from(b == b'\n');
            *pos += 1;
        }
    };
    skip_ws(&mut pos, &mut line);
    if bytes.get(pos) != Some(&b'[') {
        tally.failed.fetch_add(1, Ordering::Relaxed);
        tally.problem(
            bar,
            format!("line {line}: --jsonArray input must start with '['"),
        );
        return Ok(());
    }
    pos += 1;
    loop {
        skip_ws(&mut pos, &mut line);
        match bytes.get(pos) {
            Some(b']') => return Ok(()),
            None => {
                tally.failed.fetch_add(1, Ordering::Relaxed);
                tally.problem(bar, format!("line {line}: the array is not closed"));
                return Ok(());
            }
            _ => {}
        }
        let mut stream =
            serde_json::Deserializer::from_str(&text[pos..]).into_iter::<extjson::Json>();
        let start_line = line;
        match stream.next() {
            Some(Ok(v)) => {
                let len = stream.byte_offset();
                line += text[pos..pos + len].bytes().filter(|&b| b == b'\n').count() as u64;
                pos += len;
                if !chunker.push(start_line, Raw::Json(v), len as u64) {
                    return Ok(());
                }
            }
            Some(Err(e)) => {
                chunker.push(start_line + e.line() as u64 - 1, Raw::Bad(e.to_string()), 0);
                return Ok(());
            }
            None => return Ok(()),
        }
        skip_ws(&mut pos, &mut line);
        match bytes.get(pos) {
            Some(b',') => pos += 1,
            Some(b']') => return Ok(()),
            _ => {
                chunker.push(
                    line,
                    Raw::Bad("expected ',' or ']' after an array element".into()),
                    0,
                );
                return Ok(());
            }
        }
    }
}

fn read_rows(input: impl Read, args: &ImportArgs, chunker: &mut Chunker) -> anyhow::Result<()> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .delimiter(if args.file_type == FileType::Tsv {
            b'\t'
        } else {
            b','
        })
        .quoting(args.file_type == FileType::Csv)
        .from_reader(input);
    let mut last_byte = 0u64;
    let mut first = args.headerline;
    loop {
        let mut r = csv::StringRecord::new();
        let (line, raw) = match reader.read_record(&mut r) {
            Ok(false) => break,
            Ok(true) => {
                let line = r.position().map_or(0, |p| p.line());
                if first {
                    first = false;
                    let names: Vec<&str> = r.iter().collect();
                    let fields = csvfmt::parse_fields(&names.join(","), args.columns_have_types)
                        .map_err(|e| anyhow::anyhow!("line {line}: header: {e}"))?;
                    chunker.fields = Arc::new(fields);
                    continue;
                }
                (line, Raw::Row(r))
            }
            Err(e) => {
                let line = e.position().map_or(0, |p| p.line());
                (line, Raw::Bad(e.to_string()))
            }
        };
        let byte = reader.position().byte();
        let bytes = byte.saturating_sub(last_byte);
        last_byte = byte;
        if !chunker.push(line, raw, bytes) {
            break;
        }
    }
    Ok(())
}
