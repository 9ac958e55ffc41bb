//! Accumulators shared by `$group`, `$bucket`, `$bucketAuto` and `$setWindowFields`: parsing
//! `{$op: argument}` and folding values into a state. mongod's rules: `$min`/`$max`/`$maxN`/
//! `$minN`/`$mergeObjects` ignore null and missing; `$push`/`$addToSet` skip missing;
//! `$first`/`$last`/`$firstN`/`$lastN` keep nulls and read missing as null; numeric
//! accumulators ignore non-numbers. Every state reports the bytes it adds, for the
//! blocking-stage memory bound.

use super::ParseContext;
use super::codes::{self, perr};
use super::js_accum::{JsAccumulator, JsReduce, JsState};
use super::limits::ENTRY_OVERHEAD_BYTES;
use super::numeric::{NumSum, StdDev};
use super::raw_items::RawItems;
use super::run_context::value_size_bytes;
use super::stages::SortKeys;
use super::values::{raw_value_key, type_name, value_key};
use super::variables::{AggExpr, Value};
use crate::error::CommandResult;
use crate::query::expr::array_n::{self, ArrayNOp, validate_n};
use crate::query::expr::quantile::{self, QuantileOp};
use bson::{Bson, Document, RawDocument};
use std::cmp::Ordering;
use std::collections::{HashSet, VecDeque};

/// A parsed accumulator.
#[derive(Debug, Clone)]
pub enum Acc {
    Sum(AggExpr),
    Avg(AggExpr),
    Min(AggExpr),
    Max(AggExpr),
    First(AggExpr),
    Last(AggExpr),
    Push(AggExpr),
    AddToSet(AggExpr),
    Count,
    MergeObjects(AggExpr),
    StdDev {
        input: AggExpr,
        sample: bool,
    },
    /// `$top`/`$bottom` (n = None) and `$topN`/`$bottomN`.
    Top {
        sort: SortKeys,
        output: AggExpr,
        n: Option<usize>,
        bottom: bool,
    },
    FirstN {
        input: AggExpr,
        n: usize,
        last: bool,
    },
    ExtremeN {
        input: AggExpr,
        n: usize,
        max: bool,
    },
    /// `$percentile` / `$median`: the numbers are kept (as doubles, in a `State::List`) and
    /// ranked at the end.
    Quantile {
        input: AggExpr,
        op: QuantileOp,
        ps: Vec<f64>,
    },
    /// `$accumulator`.
    Js(Box<JsAccumulator>),
    /// mapReduce's reduce, `$_internalJsReduce`.
    JsReduce(Box<JsReduce>),
}

/// The running state of one accumulator in one group.
#[derive(Debug, Clone)]
pub enum State {
    Sum(NumSum),
    Extreme(Option<Bson>),
    First(Option<Bson>),
    Last(Bson),
    /// The items and, for `$percentile`, the bytes they hold (bounded by
    /// `limits::PUSH_BYTES_MAX`).
    List(Vec<Bson>, usize),
    /// `$push`: the items, raw (their bytes are what the bound counts).
    Pushed(RawItems),
    /// `$addToSet`: the items, raw, and their keys.
    Set(RawItems, HashSet<Vec<u8>>),
    Merge(Document),
    Dev(StdDev),
    Ranked(Vec<(Vec<Bson>, Bson)>),
    Window(VecDeque<Bson>),
    Js(JsState),
}

impl Acc {
    /// Parses `{op: arg}`; `None` when `op` is not an accumulator.
    pub fn parse(op: &str, arg: &Bson, ctx: &ParseContext) -> CommandResult<Option<Acc>> {
        let unary = |arg: &Bson| -> CommandResult<AggExpr> {
            if let Bson::Array(_) = arg {
                return Err(perr(
                    codes::ACCUMULATOR_ARRAY_ARG,
                    format!("The {op} accumulator is a unary operator"),
                ));
            }
            AggExpr::parse(arg, ctx)
        };
        let acc = match op {
            "$sum" => Acc::Sum(unary(arg)?),
            "$avg" => Acc::Avg(unary(arg)?),
            "$min" => Acc::Min(unary(arg)?),
            "$max" => Acc::Max(unary(arg)?),
            "$first" => Acc::First(unary(arg)?),
            "$last" => Acc::Last(unary(arg)?),
            "$push" => Acc::Push(unary(arg)?),
            "$addToSet" => Acc::AddToSet(unary(arg)?),
            "$mergeObjects" => Acc::MergeObjects(unary(arg)?),
            "$stdDevPop" => Acc::StdDev {
                input: unary(arg)?,
                sample: false,
            },
            "$stdDevSamp" => Acc::StdDev {
                input: unary(arg)?,
                sample: true,
            },
            "$count" => match arg {
                Bson::Document(d) if d.is_empty() => Acc::Count,
                _ => {
                    return Err(perr(
                        codes::TYPE_MISMATCH,
                        "$count takes no arguments, i.e. $count:{}",
                    ));
                }
            },
            "$top" | "$bottom" | "$topN" | "$bottomN" => parse_top(op, arg, ctx)?,
            "$firstN" | "$lastN" | "$maxN" | "$minN" => parse_n(op, arg, ctx)?,
            "$percentile" | "$median" => {
                let q = if op == "$median" {
                    QuantileOp::Median
                } else {
                    QuantileOp::Percentile
                };
                let spec = quantile::parse_spec(q, arg, true)?;
                Acc::Quantile {
                    input: AggExpr::parse(spec.input, ctx)?,
                    op: q,
                    ps: spec.ps,
                }
            }
            "$accumulator" => Acc::Js(Box::new(JsAccumulator::parse(arg, ctx)?)),
            "$_internalJsReduce" => Acc::JsReduce(Box::new(JsReduce::parse(arg, ctx)?)),
            _ => return Ok(None),
        };
        Ok(Some(acc))
    }

    pub fn new_state(&self) -> State {
        match self {
            Acc::Sum(_) | Acc::Avg(_) | Acc::Count => State::Sum(NumSum::default()),
            Acc::Min(_) | Acc::Max(_) => State::Extreme(None),
            Acc::First(_) => State::First(None),
            Acc::Last(_) => State::Last(Bson::Null),
            Acc::ExtremeN { .. } | Acc::Quantile { .. } => State::List(Vec::new(), 0),
            Acc::Push(_) => State::Pushed(RawItems::default()),
            Acc::AddToSet(_) => State::Set(RawItems::default(), HashSet::new()),
            Acc::MergeObjects(_) => State::Merge(Document::new()),
            Acc::StdDev { .. } => State::Dev(StdDev::default()),
            Acc::Top { .. } => State::Ranked(Vec::new()),
            Acc::FirstN { .. } => State::Window(VecDeque::new()),
            Acc::Js(_) | Acc::JsReduce(_) => State::Js(JsState::default()),
        }
    }

    /// True for the JavaScript accumulators, which only `$group` and `$bucket`/`$bucketAuto`
    /// take (not `$setWindowFields`, as mongod).
    pub fn is_js(&self) -> bool {
        matches!(self, Acc::Js(_) | Acc::JsReduce(_))
    }

    /// Folds one document into `state`; returns the bytes the state grew by (roughly).
    pub fn add(&self, state: &mut State, doc: &RawDocument) -> CommandResult<usize> {
        match (self, state) {
            (Acc::Count, State::Sum(s)) => {
                s.add(&Bson::Int32(1));
                Ok(0)
            }
            (Acc::Sum(e) | Acc::Avg(e), State::Sum(s)) => {
                // Arrays are not numbers: `$sum: "$arr"` in `$group` ignores them, as mongod does.
                // A field's number is read in place; nothing else is decoded.
                match e.eval_raw(doc)? {
                    Value::Raw(r) => {
                        s.add_raw(r);
                    }
                    Value::Owned(v) => {
                        s.add(&v);
                    }
                    Value::Missing => {}
                }
                Ok(0)
            }
            (Acc::Min(e) | Acc::Max(e), State::Extreme(best)) => {
                let want = if matches!(self, Acc::Max(_)) {
                    Ordering::Greater
                } else {
                    Ordering::Less
                };
                if let Some(v) = e
                    .eval_raw(doc)?
                    .into_owned()
                    .filter(|v| !matches!(v, Bson::Null | Bson::Undefined))
                {
                    let grows = value_size_bytes(&v);
                    if best
                        .as_ref()
                        .is_none_or(|b| crate::query::collator::compare_bson(&v, b) == want)
                    {
                        *best = Some(v);
                        return Ok(grows);
                    }
                }
                Ok(0)
            }
            (Acc::First(e), State::First(first)) => {
                if first.is_none() {
                    let v = e.eval_raw(doc)?.into_owned().unwrap_or(Bson::Null);
                    let grows = value_size_bytes(&v);
                    *first = Some(v);
                    return Ok(grows);
                }
                Ok(0)
            }
            (Acc::Last(e), State::Last(last)) => {
                *last = e.eval_raw(doc)?.into_owned().unwrap_or(Bson::Null);
                Ok(0)
            }
            (Acc::Push(e), State::Pushed(items)) => {
                let grows = items.push(e.eval_raw(doc)?)?;
                within_bound("$push", items.bytes())?;
                Ok(grows)
            }
            (Acc::AddToSet(e), State::Set(items, seen)) => {
                let v = e.eval_raw(doc)?;
                let key = match &v {
                    Value::Missing => return Ok(0),
                    Value::Raw(r) => {
                        let mut key = Vec::new();
                        raw_value_key(&mut key, *r);
                        key
                    }
                    Value::Owned(b) => value_key(b),
                };
                if seen.contains(&key) {
                    return Ok(0);
                }
                // The bound counts the values, as mongod's does; the stage's memory charge
                // counts their keys too.
                let grows = items.push(v)? + key.len() + ENTRY_OVERHEAD_BYTES;
                within_bound("$addToSet", items.bytes())?;
                seen.insert(key);
                Ok(grows)
            }
            (Acc::MergeObjects(e), State::Merge(out)) => {
                merge_into(out, e.eval_raw(doc)?.into_owned())
            }
            (Acc::StdDev { input, .. }, State::Dev(dev)) => {
                if let Some(v) = input.eval_raw(doc)?.into_owned() {
                    dev.add(&v);
                }
                Ok(0)
            }
            (
                Acc::Top {
                    sort, output, n, ..
                },
                State::Ranked(rows),
            ) => {
                let v = output.eval_raw(doc)?.into_owned().unwrap_or(Bson::Null);
                let grows = value_size_bytes(&v);
                rows.push((sort.key_of(doc), v));
                // Keep the state bounded: sort and trim once it doubles.
                let keep = self.ranked_keep(n);
                if rows.len() >= keep.saturating_mul(2).max(16) {
                    self.trim_ranked(rows);
                }
                Ok(grows)
            }
            (Acc::FirstN { input, n, last }, State::Window(items)) => {
                if !*last && items.len() >= *n {
                    return Ok(0);
                }
                let v = input.eval_raw(doc)?.into_owned().unwrap_or(Bson::Null);
                let grows = value_size_bytes(&v);
                items.push_back(v);
                if items.len() > *n {
                    items.pop_front();
                }
                Ok(grows)
            }
            (Acc::ExtremeN { input, n, max }, State::List(items, _)) => {
                let Some(v) = input
                    .eval_raw(doc)?
                    .into_owned()
                    .filter(|v| !matches!(v, Bson::Null | Bson::Undefined))
                else {
                    return Ok(0);
                };
                let grows = value_size_bytes(&v);
                items.push(v);
                if items.len() >= n.saturating_mul(2).max(16) {
                    sort_extremes(items, *max);
                    items.truncate(*n);
                }
                Ok(grows)
            }
            (Acc::Quantile { input, .. }, State::List(items, held)) => {
                let Some(x) = input
                    .eval_raw(doc)?
                    .into_owned()
                    .as_ref()
                    .and_then(quantile::sample)
                else {
                    return Ok(0);
                };
                push_some("$percentile", items, held, Some(Bson::Double(x)))
            }
            (Acc::Js(a), State::Js(s)) => a.add(s, doc),
            (Acc::JsReduce(r), State::Js(s)) => r.add(s, doc),
            _ => Ok(0),
        }
    }

    /// True when states of this accumulator folded over consecutive parts of an input can be
    /// merged into the state one fold over the whole input makes (see [`Acc::merge`]): the
    /// parallel scan (`exec::parallel`) groups only with these.
    pub fn merges(&self) -> bool {
        matches!(
            self,
            Acc::Sum(_)
                | Acc::Avg(_)
                | Acc::Count
                | Acc::Min(_)
                | Acc::Max(_)
                | Acc::First(_)
                | Acc::Last(_)
        )
    }

    /// False once `state` can no longer be merged with a later part's (a sum that saw a
    /// double): a parallel fold gives up at once rather than at the merge.
    pub fn still_merges(state: &State) -> bool {
        match state {
            State::Sum(s) => s.merges(),
            _ => true,
        }
    }

    /// Folds `later`, this accumulator's state over a later part of the input (one that saw at
    /// least one document of the group), into `state`. False when the merged state might differ
    /// from one fold over both parts (a sum that cannot be merged exactly, see
    /// `NumSum::merge`); the caller then folds in one pass.
    pub fn merge(&self, state: &mut State, later: State) -> bool {
        match (self, state, later) {
            (Acc::Sum(_) | Acc::Avg(_) | Acc::Count, State::Sum(a), State::Sum(b)) => a.merge(&b),
            (Acc::Min(_) | Acc::Max(_), State::Extreme(best), State::Extreme(other)) => {
                let want = if matches!(self, Acc::Max(_)) {
                    Ordering::Greater
                } else {
                    Ordering::Less
                };
                // As in `add`: only a strictly better value replaces, so the earliest of equal
                // extremes stays.
                if let Some(v) = other
                    && best
                        .as_ref()
                        .is_none_or(|b| crate::query::collator::compare_bson(&v, b) == want)
                {
                    *best = Some(v);
                }
                true
            }
            (Acc::First(_), State::First(first), State::First(other)) => {
                if first.is_none() {
                    *first = other;
                }
                true
            }
            (Acc::Last(_), State::Last(last), State::Last(other)) => {
                *last = other;
                true
            }
            _ => false,
        }
    }

    fn ranked_keep(&self, n: &Option<usize>) -> usize {
        n.unwrap_or(1)
    }

    fn trim_ranked(&self, rows: &mut Vec<(Vec<Bson>, Bson)>) {
        if let Acc::Top {
            sort, n, bottom, ..
        } = self
        {
            rows.sort_by(|a, b| sort.compare(&a.0, &b.0));
            let keep = n.unwrap_or(1);
            if *bottom {
                let drop = rows.len().saturating_sub(keep);
                rows.drain(..drop);
            } else {
                rows.truncate(keep);
            }
        }
    }

    /// The final value of `state` (only the JavaScript accumulators can fail here).
    pub fn finish(&self, state: &State) -> CommandResult<Bson> {
        Ok(match (self, state) {
            (Acc::Js(a), State::Js(s)) => return a.finish(s),
            (Acc::JsReduce(r), State::Js(s)) => return r.finish(s),
            (Acc::Avg(_), State::Sum(s)) => s.avg(),
            (_, State::Sum(s)) => s.sum(),
            (_, State::Extreme(v)) => v.clone().unwrap_or(Bson::Null),
            (_, State::First(v)) => v.clone().unwrap_or(Bson::Null),
            (_, State::Last(v)) => v.clone(),
            (Acc::ExtremeN { n, max, .. }, State::List(items, _)) => {
                let mut items = items.clone();
                sort_extremes(&mut items, *max);
                items.truncate(*n);
                Bson::Array(items)
            }
            (Acc::Quantile { op, ps, .. }, State::List(items, _)) => {
                let mut samples: Vec<f64> = items.iter().filter_map(quantile::sample).collect();
                quantile::format(*op, ps.len(), quantile::percentiles(&mut samples, ps))
            }
            (_, State::List(items, _)) => Bson::Array(items.clone()),
            (_, State::Pushed(items)) | (_, State::Set(items, ..)) => items.to_bson(),
            (_, State::Merge(d)) => Bson::Document(d.clone()),
            (Acc::StdDev { sample, .. }, State::Dev(dev)) => dev.result(*sample),
            (Acc::Top { n, .. }, State::Ranked(rows)) => {
                let mut rows = rows.clone();
                self.trim_ranked(&mut rows);
                let values: Vec<Bson> = rows.into_iter().map(|(_, v)| v).collect();
                match n {
                    Some(_) => Bson::Array(values),
                    None => values.into_iter().next().unwrap_or(Bson::Null),
                }
            }
            (_, State::Window(items)) => Bson::Array(items.iter().cloned().collect()),
            _ => Bson::Null,
        })
    }
}

/// Appends `v` (when present) for `$push`/`$addToSet`, which fail with ExceededMemoryLimit once
/// one group's array would hold more than `limits::PUSH_BYTES_MAX` (mongod's
/// `internalQueryMaxPushBytes` / `internalQueryMaxAddToSetBytes`): spilling other groups to
/// disk cannot shrink one array, so without the bound a single group grows without end.
fn push_some(
    op: &str,
    items: &mut Vec<Bson>,
    held: &mut usize,
    v: Option<Bson>,
) -> CommandResult<usize> {
    let Some(v) = v else { return Ok(0) };
    let grows = value_size_bytes(&v);
    let used = held.saturating_add(grows);
    within_bound(op, used)?;
    *held = used;
    items.push(v);
    Ok(grows)
}

/// ExceededMemoryLimit once one group's `$push`/`$addToSet`/`$percentile` holds more than
/// `limits::PUSH_BYTES_MAX`.
fn within_bound(op: &str, used: usize) -> CommandResult<()> {
    if used > super::limits::PUSH_BYTES_MAX {
        return Err(perr(
            codes::EXCEEDED_MEMORY_LIMIT,
            format!(
                "{op} used too much memory and cannot spill to disk. Used: {used} bytes. \
                 Memory limit: {} bytes",
                super::limits::PUSH_BYTES_MAX
            ),
        ));
    }
    Ok(())
}

/// `$mergeObjects`: later fields overwrite earlier ones; null and missing are skipped.
pub fn merge_into(out: &mut Document, v: Option<Bson>) -> CommandResult<usize> {
    match v {
        None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(0),
        Some(Bson::Document(d)) => {
            let grows = super::run_context::doc_size_bytes(&d);
            for (k, v) in d {
                out.insert(k, v);
            }
            Ok(grows)
        }
        Some(other) => Err(perr(
            codes::MERGE_OBJECTS_NOT_OBJECT,
            format!(
                "$mergeObjects requires object inputs, but input {other} is of type {}",
                type_name(&other)
            ),
        )),
    }
}

fn sort_extremes(items: &mut [Bson], max: bool) {
    items.sort_by(|a, b| {
        let o = crate::query::collator::compare_bson(a, b);
        if max { o.reverse() } else { o }
    });
}

/// Reads the `n` of the N accumulators: a constant positive integer.
fn parse_count_n(op: &str, spec: Option<&Bson>, ctx: &ParseContext) -> CommandResult<usize> {
    let spec =
        spec.ok_or_else(|| perr(codes::N_MISSING, format!("Missing value for 'n' in {op}")))?;
    let value = AggExpr::parse(spec, ctx)?
        .eval_on(&Document::new())?
        .unwrap_or(Bson::Null);
    let n = validate_n(&value)?;
    Ok(usize::try_from(n.min(super::limits::ACCUMULATOR_N_MAX)).unwrap_or(usize::MAX))
}

fn parse_n(op: &str, arg: &Bson, ctx: &ParseContext) -> CommandResult<Acc> {
    let Some(array_op) = ArrayNOp::from_name(op) else {
        return Err(perr(
            codes::N_UNKNOWN_FIELD,
            format!("{op} is not an 'n' accumulator"),
        ));
    };
    let (n, input) = array_n::parse_args(array_op, arg)?;
    let n = parse_count_n(op, Some(n), ctx)?;
    let input = AggExpr::parse(input, ctx)?;
    Ok(match op {
        "$firstN" => Acc::FirstN {
            input,
            n,
            last: false,
        },
        "$lastN" => Acc::FirstN {
            input,
            n,
            last: true,
        },
        "$maxN" => Acc::ExtremeN {
            input,
            n,
            max: true,
        },
        _ => Acc::ExtremeN {
            input,
            n,
            max: false,
        },
    })
}

fn parse_top(op: &str, arg: &Bson, ctx: &ParseContext) -> CommandResult<Acc> {
    // mongod's accumulatorNParseArgs: an object (5788001) whose fields are read in order, an
    // unknown one refused (5788002) and `sortBy` taken as an object (10065); then `n` (5788003),
    // `output` (5788004) and `sortBy` (5788005) must be there.
    let Bson::Document(d) = arg else {
        return Err(perr(
            codes::TOP_NOT_OBJECT,
            format!("specification must be an object; found {op}: {arg}"),
        ));
    };
    let with_n = op.ends_with('N');
    let mut sort = None;
    for (k, v) in d {
        match k.as_str() {
            "n" if with_n => {}
            "output" => {}
            "sortBy" => match v {
                Bson::Document(s) => sort = Some(s),
                _ => {
                    return Err(perr(
                        codes::NOT_AN_OBJECT,
                        "invalid parameter: expected an object (sortBy)",
                    ));
                }
            },
            other => {
                return Err(perr(
                    codes::TOP_UNKNOWN_FIELD,
                    format!("Unknown argument to {op} '{other}'"),
                ));
            }
        }
    }
    if with_n && !d.contains_key("n") {
        return Err(perr(codes::TOP_N_MISSING, "Missing value for 'n'"));
    }
    let output = d
        .get("output")
        .ok_or_else(|| perr(codes::TOP_OUTPUT_MISSING, "Missing value for 'output'"))?;
    let Some(sort) = sort else {
        return Err(perr(codes::TOP_SORT_MISSING, "Missing value for 'sortBy'"));
    };
    let sort = SortKeys::parse(sort)?;
    let n = if with_n {
        Some(parse_count_n(op, d.get("n"), ctx)?)
    } else {
        None
    };
    Ok(Acc::Top {
        sort,
        output: AggExpr::parse(output, ctx)?,
        n,
        bottom: op.starts_with("$bottom"),
    })
}
