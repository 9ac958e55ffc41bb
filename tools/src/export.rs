//! `export`: mongoexport's flags. Documents come from one `find` (query, projection from
//! `--fields`, sort, skip, limit) and are written as Extended JSON lines (relaxed by default,
//! `--jsonFormat canonical` for exact types), one `--jsonArray`, or CSV/TSV cells.

use std::io::Write;
use std::path::PathBuf;

use bson::{Document, RawDocumentBuf};
use clap::Args;
use futures_util::TryStreamExt;

use crate::common::{Bar, ConnArgs, Tally};
use crate::csvfmt;
use crate::extjson::{self, Mode};
use crate::import::FileType;
use crate::writer::lookup;

#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    #[arg(long, short = 'd')]
    pub db: Option<String>,
    #[arg(long, short = 'c')]
    pub collection: String,
    /// Output file; standard output when absent.
    #[arg(long, short = 'o', visible_alias = "file")]
    pub out: Option<PathBuf>,
    #[arg(long = "type", value_enum, default_value = "json")]
    pub file_type: FileType,
    #[arg(long = "jsonFormat", value_enum, default_value = "relaxed")]
    pub json_format: Mode,
    #[arg(long = "jsonArray")]
    pub json_array: bool,
    /// Indented JSON.
    #[arg(long)]
    pub pretty: bool,
    /// Filter in Extended JSON, e.g. '{"a": {"$gt": 1}}'.
    #[arg(long, short = 'q')]
    pub query: Option<String>,
    /// Comma-separated fields (required for CSV/TSV).
    #[arg(long, short = 'f')]
    pub fields: Option<String>,
    #[arg(long = "fieldFile")]
    pub field_file: Option<PathBuf>,
    /// CSV/TSV: no header line.
    #[arg(long = "noHeaderLine")]
    pub no_header_line: bool,
    /// Sort in Extended JSON, e.g. '{"a": 1}'.
    #[arg(long)]
    pub sort: Option<String>,
    #[arg(long)]
    pub skip: Option<u64>,
    #[arg(long)]
    pub limit: Option<i64>,
}

pub async fn run(args: ExportArgs) -> anyhow::Result<crate::Report> {
    let db = args
        .db
        .clone()
        .or_else(|| args.conn.uri_db())
        .unwrap_or_else(|| "test".into());
    let fields: Option<Vec<String>> = match (&args.fields, &args.field_file) {
        (Some(f), _) => Some(f.split(',').map(|s| s.trim().to_owned()).collect()),
        (None, Some(p)) => Some(
            std::fs::read_to_string(p)?
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| l.trim().to_owned())
                .collect(),
        ),
        (None, None) => None,
    };
    if args.file_type != FileType::Json && fields.is_none() {
        anyhow::bail!("CSV/TSV export needs --fields or --fieldFile");
    }
    let parse = |what: &str, text: &Option<String>| -> anyhow::Result<Option<Document>> {
        text.as_deref()
            .map(|t| extjson::parse_document(t).map_err(|e| anyhow::anyhow!("--{what}: {e}")))
            .transpose()
    };
    let filter = parse("query", &args.query)?.unwrap_or_default();
    let sort = parse("sort", &args.sort)?;
    let client = args.conn.client().await?;
    let coll = client
        .database(&db)
        .collection::<RawDocumentBuf>(&args.collection);
    let mut find = coll.find(filter);
    if let Some(f) = &fields {
        let mut projection = Document::new();
        for name in f {
            projection.insert(name.clone(), 1);
        }
        find = find.projection(projection);
    }
    if let Some(s) = sort {
        find = find.sort(s);
    }
    if let Some(n) = args.skip {
        find = find.skip(n);
    }
    if let Some(n) = args.limit.filter(|&n| n != 0) {
        find = find.limit(n);
    }
    let mut cursor = find.await?;
    let out: Box<dyn Write> = match &args.out {
        Some(p) => Box::new(
            std::fs::File::create(p)
                .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", p.display()))?,
        ),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut out = std::io::BufWriter::with_capacity(1 << 20, out);
    let bar = Bar::new(&format!("{db}.{}", args.collection), None, args.conn.quiet);
    let tally = Tally::new(args.conn.quiet);
    let names = fields.unwrap_or_default();
    let n = if args.file_type == FileType::Json {
        write_json(&mut cursor, &mut out, &args, &bar).await?
    } else {
        let mut w = csv::WriterBuilder::new()
            .delimiter(if args.file_type == FileType::Tsv {
                b'\t'
            } else {
                b','
            })
            .quote_style(if args.file_type == FileType::Tsv {
                csv::QuoteStyle::Never
            } else {
                csv::QuoteStyle::Necessary
            })
            .from_writer(&mut out);
        if !args.no_header_line {
            w.write_record(&names)?;
        }
        let mut n = 0u64;
        while let Some(raw) = cursor.try_next().await? {
            let doc = Document::try_from(raw.as_ref())?;
            w.write_record(names.iter().map(|f| csvfmt::export_cell(lookup(&doc, f))))?;
            n += 1;
            bar.advance(1, raw.as_bytes().len() as u64);
        }
        w.flush()?;
        n
    };
    out.flush()?;
    bar.finish();
    tally.ok.store(n, std::sync::atomic::Ordering::Relaxed);
    Ok(tally.report(format!("exported {n} record(s)")))
}

async fn write_json(
    cursor: &mut mongodb::Cursor<RawDocumentBuf>,
    out: &mut impl Write,
    args: &ExportArgs,
    bar: &Bar,
) -> anyhow::Result<u64> {
    if args.json_array {
        out.write_all(b"[")?;
    }
    let mut n = 0u64;
    let mut line = String::new();
    while let Some(raw) = cursor.try_next().await? {
        let doc = Document::try_from(raw.as_ref())?;
        line.clear();
        if args.json_array && n > 0 {
            line.push(',');
        }
        extjson::write_document(&mut line, &doc, args.json_format, args.pretty);
        if !args.json_array {
            line.push('\n');
        }
        out.write_all(line.as_bytes())?;
        n += 1;
        bar.advance(1, raw.as_bytes().len() as u64);
    }
    if args.json_array {
        out.write_all(b"]\n")?;
    }
    Ok(n)
}
