//! Structured inputs for the fuzz targets. libFuzzer hands each target raw bytes; mutating
//! encoded BSON byte by byte mostly produces documents every parser rejects at once, so the
//! targets that exercise the query language build BSON trees from the bytes instead: keys come
//! from a vocabulary of field paths and operator, stage and accumulator names, values from the
//! storage crate's ordering corpus (every BSON type with its edge values) plus small numbers and
//! path-like strings. The same bytes always give the same tree, so a crash reproduces from its
//! artifact file.

use arbitrary::{Result, Unstructured};
use bson::{Bson, Document, RawDocumentBuf};
use cairn_server::query::vocabulary::{
    EXPRESSIONS, QUERY_OPERATORS, STAGES, TOP_LEVEL_QUERY, UPDATE_OPERATORS,
};
use std::sync::OnceLock;

/// Field paths, including positional and array-filter forms and the awkward ones.
pub const FIELDS: &[&str] = &[
    "_id", "a", "b", "c", "a.b", "a.0", "a.1", "b.c.d", "a.$", "a.$[]", "a.$[x]", "x", "x.y", "",
    "a..b", "a.", "$a", "0",
];

/// Operands and schema keywords of filters that the server's operator lists do not name.
pub const QUERY_OPERANDS: &[&str] = &[
    "$options",
    "$alwaysTrue",
    "$alwaysFalse",
    "$box",
    "$center",
    "$centerSphere",
    "$polygon",
    "$geometry",
    "bsonType",
    "required",
    "properties",
    "minimum",
    "items",
    "enum",
    "additionalProperties",
    "pattern",
];

/// Modifiers and operands of update operators.
pub const UPDATE_OPERANDS: &[&str] = &[
    "$each",
    "$slice",
    "$sort",
    "$position",
    "and",
    "or",
    "xor",
    "$type",
];

/// Named arguments of expression operators.
pub const EXPRESSION_ARGS: &[&str] = &[
    "input",
    "as",
    "in",
    "vars",
    "cond",
    "then",
    "else",
    "if",
    "branches",
    "default",
    "initialValue",
    "to",
    "onError",
    "onNull",
    "format",
    "timezone",
    "date",
    "unit",
    "amount",
    "startDate",
    "endDate",
    "n",
    "sortBy",
    "field",
    "value",
    "find",
    "replacement",
    "regex",
    "options",
    "chars",
    "inputs",
    "useLongestLength",
    "defaults",
    "p",
    "method",
];

/// Named arguments of pipeline stages.
pub const STAGE_ARGS: &[&str] = &[
    "path",
    "preserveNullAndEmptyArrays",
    "includeArrayIndex",
    "newRoot",
    "groupBy",
    "boundaries",
    "buckets",
    "from",
    "localField",
    "foreignField",
    "pipeline",
    "startWith",
    "connectFromField",
    "connectToField",
    "maxDepth",
    "partitionBy",
    "sortBy",
    "output",
    "window",
    "documents",
    "range",
    "step",
    "bounds",
    "size",
];

pub const ACCUMULATORS: &[&str] = &[
    "$sum",
    "$avg",
    "$push",
    "$addToSet",
    "$first",
    "$last",
    "$max",
    "$min",
    "$count",
    "$stdDevPop",
    "$stdDevSamp",
    "$mergeObjects",
    "$top",
    "$bottom",
    "$topN",
    "$bottomN",
    "$firstN",
    "$lastN",
    "$maxN",
    "$minN",
    "$median",
    "$percentile",
    "$rank",
    "$denseRank",
    "$documentNumber",
    "$shift",
    "$derivative",
    "$integral",
    "$expMovingAvg",
    "$locf",
    "$linearFill",
    "$covariancePop",
];

/// Strings that mean something to one parser or another (field references, variables,
/// regex options, type names, units, time zones).
pub const STRINGS: &[&str] = &[
    "$a",
    "$b",
    "$a.b",
    "$_id",
    "$$ROOT",
    "$$CURRENT",
    "$$NOW",
    "$$REMOVE",
    "$$x",
    "$$this",
    "$$value",
    "$",
    "$$",
    "a",
    "b",
    "",
    "x",
    "i",
    "ms",
    "string",
    "int",
    "long",
    "double",
    "decimal",
    "object",
    "array",
    "number",
    "day",
    "hour",
    "week",
    "year",
    "UTC",
    "Europe/Paris",
    "+05:30",
    "%Y-%m-%d",
    "%H:%M:%S%z",
    "2024-02-29T12:00:00Z",
    "^a.*",
    "(a+)+$",
    "descend",
    "prune",
    "keep",
    "textScore",
    "whenMatched",
    "merge",
    "fail",
    "linear",
    "locf",
];

/// Where a document key is drawn from.
#[derive(Clone, Copy)]
pub enum Keys {
    Filter,
    Update,
    Expression,
    Stage,
}

impl Keys {
    fn vocabularies(self) -> &'static [&'static [&'static str]] {
        match self {
            Keys::Filter => &[
                FIELDS,
                QUERY_OPERATORS,
                TOP_LEVEL_QUERY,
                QUERY_OPERANDS,
                EXPRESSIONS,
            ],
            Keys::Update => &[UPDATE_OPERATORS, UPDATE_OPERANDS, FIELDS],
            Keys::Expression => &[EXPRESSIONS, EXPRESSION_ARGS, FIELDS, ACCUMULATORS],
            Keys::Stage => &[
                STAGES,
                STAGE_ARGS,
                FIELDS,
                EXPRESSIONS,
                EXPRESSION_ARGS,
                ACCUMULATORS,
                QUERY_OPERATORS,
            ],
        }
    }
}

/// Every BSON type with its edge values (the storage crate's ordering corpus), built once.
fn atoms() -> &'static [Bson] {
    static ATOMS: OnceLock<Vec<Bson>> = OnceLock::new();
    ATOMS.get_or_init(|| {
        storage::order::corpus()
            .into_iter()
            .filter(|v| !matches!(v, Bson::Array(_) | Bson::Document(_)))
            .collect()
    })
}

/// Nesting bound: deep enough for `$let` inside `$map` inside `$cond`, shallow enough that one
/// input stays cheap to run.
const DEPTH_MAX: usize = 5;
const WIDTH_MAX: usize = 4;

fn pick<'a>(u: &mut Unstructured<'_>, from: &'a [&'a str]) -> Result<&'a str> {
    Ok(*u.choose(from)?)
}

pub fn key(u: &mut Unstructured<'_>, keys: Keys) -> Result<String> {
    let vocabularies = keys.vocabularies();
    let vocabulary = *u.choose(vocabularies)?;
    Ok(pick(u, vocabulary)?.to_string())
}

pub fn value(u: &mut Unstructured<'_>, keys: Keys, depth: usize) -> Result<Bson> {
    let deeper = depth < DEPTH_MAX;
    Ok(match u.int_in_range(0u8..=11)? {
        0..=2 => Bson::Int32(u.int_in_range(-3..=5)?),
        3 => Bson::String(pick(u, STRINGS)?.to_string()),
        4 => Bson::String(format!("${}", pick(u, FIELDS)?)),
        5 => u.choose(atoms())?.clone(),
        6 => Bson::Double(f64::from(u.int_in_range(-4i8..=4)?) / 2.0),
        7 => Bson::Boolean(u.arbitrary()?),
        8 | 9 if deeper => {
            let n = u.int_in_range(0..=WIDTH_MAX)?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(value(u, keys, depth + 1)?);
            }
            Bson::Array(items)
        }
        10 | 11 if deeper => Bson::Document(document(u, keys, depth + 1)?),
        _ => Bson::Null,
    })
}

pub fn document(u: &mut Unstructured<'_>, keys: Keys, depth: usize) -> Result<Document> {
    let n = u.int_in_range(0..=WIDTH_MAX)?;
    let mut out = Document::new();
    for _ in 0..n {
        let k = key(u, keys)?;
        let v = value(u, keys, depth)?;
        out.insert(k, v);
    }
    Ok(out)
}

/// A few plain documents for the parsed thing to run over (fields from `FIELDS`' roots).
pub fn documents(u: &mut Unstructured<'_>, count_max: usize) -> Result<Vec<RawDocumentBuf>> {
    let n = u.int_in_range(0..=count_max)?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let mut d = Document::new();
        d.insert("_id", i as i32);
        for _ in 0..u.int_in_range(0..=WIDTH_MAX)? {
            let k = pick(u, &["a", "b", "c", "x"])?;
            d.insert(k, value(u, Keys::Expression, 2)?);
        }
        if let Ok(raw) = RawDocumentBuf::try_from(&d) {
            out.push(raw);
        }
    }
    Ok(out)
}

/// True when the tree holds an operator whose result is not a function of its input
/// (`$rand`, `$sampleRate`, `$$NOW`...), so laws comparing two evaluations don't apply.
pub fn nondeterministic(d: &Document) -> bool {
    let text = format!("{d}");
    ["$rand", "$sampleRate", "$$NOW", "$$CLUSTER_TIME", "$sample"]
        .iter()
        .any(|w| text.contains(w))
}
