//! `$sort`: sort keys as mongod builds them (an array contributes its smallest element to an
//! ascending key and its largest to a descending one; missing reads as null), compared with
//! `storage::order`. The sort is stable. When a `$limit` follows (possibly after `$skip`s),
//! only the best `skip + limit` documents are kept: a top-k that holds O(k) memory.
//! Otherwise, with `allowDiskUse`, a buffer that passes the memory bound is sorted and written
//! to disk as a run (see `spill`); at the end the runs and the last buffer are merged lazily
//! with a heap ordered by (sort key, input position), so ties keep their input order.

use super::{Drain, Stage};
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::budget::Held;
use crate::query::path;
use crate::query::pipeline::codes::{self, perr};
use crate::query::pipeline::limits::ENTRY_OVERHEAD_BYTES;
use crate::query::pipeline::run_context::{RunCx, doc_size_bytes, holding, value_size_bytes};
use crate::query::pipeline::spill::{KeyOf, KeyOrder, RowStream, Sorter};
use crate::query::pipeline::values::{integral, to_doc, to_raw};
use crate::query::pipeline::{DocStream, Flow, RawStream};
use crate::query::types;
use bson::{Bson, Document, RawBsonRef, RawDocument, RawDocumentBuf};
use std::cmp::Ordering;
use std::ops::ControlFlow;
use std::sync::Arc;
use storage::keycode;

/// A parsed sort specification.
#[derive(Debug, Clone)]
pub struct SortKeys {
    keys: Vec<(Vec<String>, bool)>,
}

impl SortKeys {
    /// Parses `{field: 1 | -1, ...}`.
    pub fn parse(spec: &Document) -> CommandResult<SortKeys> {
        if spec.is_empty() {
            return Err(perr(
                codes::SORT_EMPTY,
                "$sort stage must have at least one sort key",
            ));
        }
        let mut keys = Vec::with_capacity(spec.len());
        for (field, dir) in spec {
            let descending = match dir {
                // Highest score first, read from the score field (`query::meta`).
                _ if crate::query::sort::is_text_score(dir) => {
                    keys.push((vec![crate::query::meta::TEXT_SCORE_FIELD.to_string()], true));
                    continue;
                }
                Bson::Document(d) if d.contains_key("$meta") => {
                    return Err(err(
                        ErrorCode::NotImplemented,
                        format!("$sort by {{$meta: ...}} on '{field}' is not supported by cairn"),
                    ));
                }
                Bson::Document(_) => {
                    return Err(perr(
                        codes::SORT_BAD_KEY,
                        format!("Illegal key in $sort specification: {field}: {dir}"),
                    ));
                }
                other => match integral(other) {
                    Some(1) => false,
                    Some(-1) => true,
                    _ if types::is_number(other) => {
                        return Err(perr(
                            codes::SORT_BAD_ORDER,
                            "$sort key ordering must be 1 (for ascending) or -1 (for descending)",
                        ));
                    }
                    _ => {
                        return Err(perr(
                            codes::SORT_BAD_KEY,
                            format!("Illegal key in $sort specification: {field}: {dir}"),
                        ));
                    }
                },
            };
            if field.is_empty() || field.split('.').any(str::is_empty) || field.starts_with('$') {
                return Err(perr(
                    codes::FIELD_PATH_EMPTY,
                    format!(
                        "FieldPath field names may not be empty strings or start with '$': {field}"
                    ),
                ));
            }
            keys.push((path::split(field), descending));
        }
        Ok(SortKeys { keys })
    }

    /// The sort key of a document.
    pub fn key_of(&self, doc: &RawDocument) -> Vec<Bson> {
        self.keys
            .iter()
            .map(|(p, descending)| key_for_path(doc, p, *descending))
            .collect()
    }

    /// The sort key of a raw document in the index key encoding (a descending field's bytes
    /// inverted), written into `out`: two documents' encoded keys compare as bytes exactly as
    /// [`SortKeys::compare`] orders their [`SortKeys::key_of`] keys, and nothing is decoded.
    pub fn encoded_key_of(&self, doc: &RawDocument, out: &mut Vec<u8>, scratch: &mut Vec<u8>) {
        out.clear();
        for (p, descending) in &self.keys {
            let start = out.len();
            encoded_key_for_path(doc, p, *descending, out, scratch);
            if *descending {
                keycode::invert(&mut out[start..]);
            }
        }
    }

    /// Compares two sort keys made by [`SortKeys::key_of`].
    pub fn compare(&self, a: &[Bson], b: &[Bson]) -> Ordering {
        for (i, (_, descending)) in self.keys.iter().enumerate() {
            let (Some(x), Some(y)) = (a.get(i), b.get(i)) else {
                break;
            };
            let o = crate::query::collator::compare_bson(x, y);
            let o = if *descending { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    }

    /// A document's sort key as a number, cheaply, when that is all it can be: one key, whose
    /// path passes through documents only (no array) to a double or an int32. `None` otherwise
    /// (a missing field, another type, an array on the way): the caller encodes the key.
    fn plain_number(&self, doc: &RawDocument) -> Option<f64> {
        let [(path, _)] = self.keys.as_slice() else {
            return None;
        };
        let (last, parents) = path.split_last()?;
        let mut at = doc;
        for p in parents {
            at = crate::query::elements::find(at, p)?.as_document()?;
        }
        crate::query::elements::find(at, last)?.as_f64()
    }

    /// The single path when the specification has exactly one key (for `$setWindowFields`).
    pub fn single_path(&self) -> Option<(&[String], bool)> {
        match self.keys.as_slice() {
            [(p, d)] => Some((p.as_slice(), *d)),
            _ => None,
        }
    }
}

/// The smallest (ascending) or largest (descending) value `path` reaches; arrays stand for
/// their elements; missing is null; an empty array is undefined (below null).
fn key_for_path(doc: &RawDocument, path: &[String], descending: bool) -> Bson {
    let mut best: Option<Bson> = None;
    let mut saw_any = false;
    let _ = path::walk::<()>(doc, path, &mut |c| {
        let v = match c.value {
            Some(bson::RawBsonRef::Array(_)) if !c.expanded => return ControlFlow::Continue(()),
            Some(v) => types::to_owned(v),
            None => Bson::Null,
        };
        saw_any = true;
        let better = best.as_ref().is_none_or(|b| {
            let o = crate::query::collator::compare_bson(&v, b);
            if descending {
                o == Ordering::Greater
            } else {
                o == Ordering::Less
            }
        });
        if better {
            best = Some(v);
        }
        ControlFlow::Continue(())
    });
    match best {
        Some(b) => b,
        None if saw_any => Bson::Null,
        None => Bson::Undefined,
    }
}

/// [`key_for_path`] in the key encoding: the candidates are encoded and the smallest
/// (ascending) or largest (descending) encoding is appended to `out` (not yet inverted).
fn encoded_key_for_path(
    doc: &RawDocument,
    path: &[String],
    descending: bool,
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
) {
    let start = out.len();
    let mut saw_any = false;
    let _ = path::walk::<()>(doc, path, &mut |c| {
        let v = match c.value {
            Some(RawBsonRef::Array(_)) if !c.expanded => return ControlFlow::Continue(()),
            Some(v) => v,
            None => RawBsonRef::Null,
        };
        if !saw_any {
            saw_any = true;
            crate::query::collator::encode_value(out, v);
            return ControlFlow::Continue(());
        }
        scratch.clear();
        crate::query::collator::encode_value(scratch, v);
        let o = scratch.as_slice().cmp(&out[start..]);
        let better = if descending {
            o == Ordering::Greater
        } else {
            o == Ordering::Less
        };
        if better {
            out.truncate(start);
            out.extend_from_slice(scratch);
        }
        ControlFlow::Continue(())
    });
    if !saw_any {
        keycode::encode_value(out, RawBsonRef::Undefined);
    }
}

/// How many documents a `$sort` must keep given the stages after it.
pub fn top_k_bound(following: &[Document]) -> Option<u64> {
    let mut skipped: u64 = 0;
    for stage in following {
        let (name, value) = stage.iter().next()?;
        let n = integral(value).and_then(|n| u64::try_from(n).ok())?;
        match name.as_str() {
            "$limit" => return skipped.checked_add(n),
            "$skip" => skipped = skipped.checked_add(n)?,
            _ => return None,
        }
    }
    None
}

/// `$sort`.
#[derive(Debug)]
pub struct Sort {
    keys: SortKeys,
    top_k: Option<u64>,
}

impl Sort {
    pub fn parse(spec: &Bson, top_k: Option<u64>) -> CommandResult<Sort> {
        let Bson::Document(d) = spec else {
            return Err(perr(
                codes::SORT_NOT_OBJECT,
                "the $sort key specification must be an object",
            ));
        };
        Ok(Sort {
            keys: SortKeys::parse(d)?,
            top_k,
        })
    }
}

impl Stage for Sort {
    fn mergeable(&self) -> Option<super::Mergeable<'_>> {
        self.top_k.map(|k| super::Mergeable::TopK(&self.keys, k))
    }

    fn run<'a>(&'a self, input: DocStream<'a>, cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        crate::interrupt::note_flags(crate::interrupt::plan_flags::HAS_SORT_STAGE);
        match self.top_k {
            Some(k) => {
                let kept = top_k_documents(&self.keys, input, k, cx)?;
                Ok(Box::new(kept.into_iter().map(Ok)))
            }
            None => sort_documents(&self.keys, input, cx),
        }
    }

    /// A top-k over raw documents compares encoded sort keys and keeps the raw documents; a
    /// document that cannot enter the top k is dropped after its key is encoded, unread
    /// otherwise. A full sort keeps (and spills) the raw documents, keyed by their decoded sort
    /// keys, and hands them on raw.
    fn run_raw<'a>(&'a self, input: RawStream<'a>, cx: RunCx<'a>) -> CommandResult<Flow<'a>> {
        crate::interrupt::note_flags(crate::interrupt::plan_flags::HAS_SORT_STAGE);
        match self.top_k {
            Some(k) => {
                let kept = top_k_raw(&self.keys, input, k, cx)?;
                Ok(Flow::Raw(Box::new(kept.into_iter().map(Ok))))
            }
            None => {
                let (rows, held) = sorted_rows(&self.keys, input, cx)?;
                let sorted = rows.map(|r| r.map(|(_, _, d)| d));
                Ok(Flow::Raw(Box::new(sorted.inspect(move |_| {
                    let _ = &held;
                }))))
            }
        }
    }

    /// The kept top k, or the sorted buffer (or the lazy merge of its spilled runs) handed out
    /// one document at a time; the charge stays until the drain is dropped.
    fn drain(&self, input: RawStream<'_>, cx: RunCx<'_>) -> CommandResult<Drain> {
        crate::interrupt::note_flags(crate::interrupt::plan_flags::HAS_SORT_STAGE);
        if let Some(k) = self.top_k {
            let kept = top_k_raw(&self.keys, input, k, cx)?;
            return Ok(Box::new(kept.into_iter().map(Ok)));
        }
        let (rows, held) = sorted_rows(&self.keys, input, cx)?;
        Ok(Box::new(rows.map(move |r| {
            let _ = &held;
            Ok(r?.2)
        })))
    }
}

/// [`top_k_documents`] over raw documents with encoded keys (see `Sort::run_raw`).
fn top_k_raw(
    keys: &SortKeys,
    input: RawStream<'_>,
    k: u64,
    cx: RunCx<'_>,
) -> CommandResult<Vec<RawDocumentBuf>> {
    let mut top = TopK::new(keys, k);
    let mut held = Held::global();
    for item in input {
        let used_bytes = top.push(item?);
        // Most documents do not enter the top k: nothing changed, nothing to charge.
        if used_bytes != held.bytes() {
            cx.charge(&mut held, used_bytes, "Sort")?;
        }
    }
    Ok(top.finish())
}

/// The best `k` documents of a stream by a sort, stable (of equal keys the earlier wins),
/// holding O(k) of them: raw, each with its encoded sort key, so nothing is decoded and a
/// document that cannot enter the top k is dropped once its key is encoded. A parallel scan
/// (`exec::parallel`) keeps one per part of its input and merges them ([`TopK::merge`]).
pub struct TopK<'s> {
    keys: &'s SortKeys,
    k: usize,
    rows: Vec<(Vec<u8>, RawDocumentBuf)>,
    /// The k-th best key once k documents are kept: a later document must beat it (a tie
    /// loses, the sort being stable).
    threshold: Option<Vec<u8>>,
    /// The same key as a number when it is one (`SortKeys::plain_number`): a document whose key
    /// is a plain number worse than it is dropped without encoding its key.
    threshold_number: Option<f64>,
    used_bytes: usize,
    key: Vec<u8>,
    scratch: Vec<u8>,
}

impl<'s> TopK<'s> {
    pub fn new(keys: &'s SortKeys, k: u64) -> TopK<'s> {
        TopK {
            keys,
            k: usize::try_from(k).unwrap_or(usize::MAX),
            rows: Vec::new(),
            threshold: None,
            threshold_number: None,
            used_bytes: 0,
            key: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// Offers the next document; returns the bytes held.
    pub fn push(&mut self, raw: RawDocumentBuf) -> usize {
        if let Some(t) = self.threshold_number
            && let Some(v) = self.keys.plain_number(&raw)
        {
            // Numbers order as mongod orders them (NaN lowest): a NaN on either side compares
            // false here and takes the encoded path.
            let descending = self.keys.keys.first().is_some_and(|(_, d)| *d);
            if (descending && v < t) || (!descending && v > t) {
                return self.used_bytes;
            }
        }
        self.keys
            .encoded_key_of(&raw, &mut self.key, &mut self.scratch);
        if self.threshold.as_ref().is_some_and(|t| self.key >= *t) {
            return self.used_bytes;
        }
        self.used_bytes += raw.as_bytes().len() + self.key.len();
        self.rows.push((self.key.clone(), raw));
        if self.rows.len() >= self.k.saturating_mul(2).max(2) {
            // Amortised top-k: sorting then truncating at 2k keeps O(n log k) work.
            self.trim();
            self.used_bytes = self
                .rows
                .iter()
                .map(|(k, d)| k.len() + d.as_bytes().len())
                .sum();
            let kth = self.rows.get(self.k.saturating_sub(1));
            self.threshold = kth.map(|(key, _)| key.clone());
            self.threshold_number = kth.and_then(|(_, d)| self.keys.plain_number(d));
        }
        self.used_bytes
    }

    fn trim(&mut self) {
        // Stable: of equal keys the earlier row (earlier input) stays first.
        self.rows.sort_by(|a, b| a.0.cmp(&b.0));
        self.rows.truncate(self.k);
    }

    /// The kept documents, best first.
    pub fn finish(mut self) -> Vec<RawDocumentBuf> {
        self.trim();
        self.rows.into_iter().map(|(_, d)| d).collect()
    }

    /// The top k of consecutive parts of one input, in input order: what one `TopK` over the
    /// whole input keeps (each part kept every document of the overall top k it saw, and rows
    /// appended in part order then sorted stably keep input order among equal keys).
    pub fn merge(parts: Vec<TopK<'s>>) -> Vec<RawDocumentBuf> {
        let mut parts = parts.into_iter();
        let Some(mut out) = parts.next() else {
            return Vec::new();
        };
        for mut p in parts {
            p.trim();
            out.rows.append(&mut p.rows);
        }
        out.finish()
    }
}

/// Sorts a whole stream (stable). With `allowDiskUse`, each time the buffer passes the memory
/// bound it is sorted and written as a run; the runs and the last buffer are merged lazily.
pub fn sort_documents<'a>(
    keys: &SortKeys,
    input: DocStream<'a>,
    cx: RunCx<'a>,
) -> CommandResult<DocStream<'a>> {
    let (rows, held) = sorted_rows(keys, Flow::Docs(input).into_raw(), cx)?;
    Ok(holding(Box::new(rows.map(|r| to_doc(&r?.2))), held))
}

/// [`sort_documents`]' rows in order, owning everything they read (the keys are copied), with
/// the charge of the buffer they come from. Rows hold the documents raw: as compact as BSON,
/// and never decoded here.
fn sorted_rows(
    keys: &SortKeys,
    input: RawStream<'_>,
    cx: RunCx<'_>,
) -> CommandResult<(RowStream<'static, Vec<Bson>>, Held)> {
    let shared = Arc::new(keys.clone());
    let by = shared.clone();
    let order: KeyOrder<'static, Vec<Bson>> = Arc::new(move |a, b| by.compare(a, b));
    let key_of: KeyOf<'static, Vec<Bson>> = Arc::new(move |raw| Ok(shared.key_of(raw)));
    let mut sorter = Sorter::new(order, key_of);
    let mut used_bytes = 0usize;
    let mut held = Held::global();
    for (seq, item) in (0u64..).zip(input) {
        let raw = item?;
        let key = keys.key_of(&raw);
        used_bytes += raw.as_bytes().len()
            + key.iter().map(value_size_bytes).sum::<usize>()
            + ENTRY_OVERHEAD_BYTES;
        sorter.push((key, seq, raw));
        if cx.charge_spillable(&mut held, used_bytes, "Sort")? {
            sorter.spill()?;
            used_bytes = 0;
            held.set(0);
        }
    }
    Ok((sorter.finish()?, held))
}

/// Keeps the best `k` documents of a stream, in order (stable); holds O(k) documents.
fn top_k_documents(
    keys: &SortKeys,
    input: DocStream<'_>,
    k: u64,
    cx: RunCx<'_>,
) -> CommandResult<Vec<Document>> {
    let k = usize::try_from(k).unwrap_or(usize::MAX);
    let mut rows: Vec<(Vec<Bson>, Document)> = Vec::new();
    let mut used_bytes = 0usize;
    let mut held = Held::global();
    for item in input {
        let doc = item?;
        let key = keys.key_of(&to_raw(&doc)?);
        used_bytes += doc_size_bytes(&doc);
        rows.push((key, doc));
        if rows.len() >= k.saturating_mul(2).max(2) {
            // Amortised top-k: sorting then truncating at 2k keeps O(n log k) work.
            rows.sort_by(|a, b| keys.compare(&a.0, &b.0));
            rows.truncate(k);
            used_bytes = rows.iter().map(|(_, d)| doc_size_bytes(d)).sum();
        }
        cx.charge(&mut held, used_bytes, "Sort")?;
    }
    rows.sort_by(|a, b| keys.compare(&a.0, &b.0));
    rows.truncate(k);
    Ok(rows.into_iter().map(|(_, d)| d).collect())
}

#[cfg(test)]
mod tests {
    //! Proves a spilled `$sort` gives exactly the order of a stable in-memory sort, and that
    //! without `allowDiskUse` the same input fails with 292.
    //! How: thousands of seeded random documents with many ties, sorted under tiny bounds.
    use crate::query::pipeline::Pipeline;
    use crate::query::pipeline::tests::{MapEnv, code_of, ctx, stages_of};
    use bson::{Bson, Document, bson, doc};
    use rand::{Rng, SeedableRng, rngs::StdRng};

    fn random_docs(n: usize) -> Vec<Document> {
        let mut rng = StdRng::seed_from_u64(6);
        (0..n)
            .map(|i| {
                let mut d = doc! {"i": i as i64, "k": rng.random_range(0..40)};
                match rng.random_range(0..4) {
                    0 => {}
                    1 => {
                        d.insert("b", rng.random_range(0..5));
                    }
                    2 => {
                        d.insert("b", bson!([rng.random_range(0..5), "s"]));
                    }
                    _ => {
                        d.insert("b", Bson::Null);
                    }
                }
                d.insert("pad", "x".repeat(rng.random_range(0..60)));
                d
            })
            .collect()
    }

    fn sorted_with(memory_max_bytes: usize, disk: bool, input: &[Document]) -> Vec<Document> {
        let mut c = ctx();
        c.memory_max_bytes = memory_max_bytes;
        c.allow_disk_use = disk;
        let p =
            Pipeline::parse(&stages_of(bson!([{"$sort": {"k": 1, "b": -1}}])), &c).expect("parses");
        p.run_vec(input.to_vec(), &MapEnv::default()).expect("runs")
    }

    #[test]
    fn spilled_sort_matches_a_stable_in_memory_sort() {
        let input = random_docs(5000);
        let keys = super::SortKeys::parse(&doc! {"k": 1, "b": -1}).expect("keys");
        let mut expected: Vec<(Vec<Bson>, Document)> = input
            .iter()
            .map(|d| {
                let raw = bson::RawDocumentBuf::try_from(d).expect("raw");
                (keys.key_of(&raw), d.clone())
            })
            .collect();
        expected.sort_by(|a, b| keys.compare(&a.0, &b.0));
        let expected: Vec<Document> = expected.into_iter().map(|(_, d)| d).collect();
        assert_eq!(sorted_with(usize::MAX, false, &input), expected);
        // ~20 documents a run: hundreds of runs, so runs are merged into runs along the way.
        assert_eq!(sorted_with(2_000, true, &input), expected);
        // A few dozen runs merged once at the end.
        assert_eq!(sorted_with(20_000, true, &input), expected);
    }

    /// The numeric shortcut of the top-k (a worse plain number is dropped before its key is
    /// encoded) keeps exactly what a stable full sort keeps first, whatever the mix of types.
    #[test]
    fn top_k_equals_the_head_of_a_stable_sort() {
        let mut rng = StdRng::seed_from_u64(11);
        let values = || -> Vec<Bson> {
            vec![
                Bson::Double(f64::NAN),
                Bson::Double(-0.0),
                Bson::Int32(0),
                Bson::Int64(3),
                Bson::String("s".into()),
                bson!([2, 9.5]),
                Bson::Null,
                bson!({"x": 1}),
            ]
        };
        for (spec, nested) in [("k", false), ("o.k", true)] {
            let input: Vec<Document> = (0..3000)
                .map(|i| {
                    let v = match rng.random_range(0..10) {
                        0 => values()[rng.random_range(0..8)].clone(),
                        1 => Bson::Int32(rng.random_range(-50..50)),
                        _ => Bson::Double(rng.random_range(-50.0..50.0_f64).round() / 4.0),
                    };
                    let mut d = doc! {"i": i};
                    if rng.random_range(0..20) != 0 {
                        if nested {
                            d.insert("o", doc! {"k": v});
                        } else {
                            d.insert("k", v);
                        }
                    }
                    d
                })
                .collect();
            for dir in [1, -1] {
                for k in [1, 7, 40] {
                    let c = ctx();
                    let sort = doc! {"$sort": {spec: dir}};
                    let full = Pipeline::parse(&stages_of(bson!([sort.clone()])), &c).unwrap();
                    let mut want = full.run_vec(input.clone(), &MapEnv::default()).unwrap();
                    want.truncate(k);
                    let top = Pipeline::parse(&stages_of(bson!([sort, {"$limit": k as i32}])), &c)
                        .unwrap();
                    let raw: Vec<bson::RawDocumentBuf> = input
                        .iter()
                        .map(|d| bson::RawDocumentBuf::try_from(d).unwrap())
                        .collect();
                    let env = MapEnv::default();
                    let flow = crate::query::pipeline::Flow::Raw(Box::new(raw.into_iter().map(Ok)));
                    let got: Vec<Document> = top
                        .run_flow(0, flow, &env)
                        .unwrap()
                        .into_docs()
                        .collect::<Result<_, _>>()
                        .unwrap();
                    assert_eq!(got, want, "{spec} {dir} top {k}");
                }
            }
        }
    }

    #[test]
    fn without_disk_use_the_bound_fails() {
        let input = random_docs(5000);
        let mut c = ctx();
        c.memory_max_bytes = 20_000;
        let p = Pipeline::parse(&stages_of(bson!([{"$sort": {"k": 1}}])), &c).expect("parses");
        let e = p
            .run_vec(input, &MapEnv::default())
            .expect_err("over the bound");
        assert_eq!(code_of(&e), 292);
    }
}
