//! `$group` and `$sortByCount`. Groups are keyed by the order-preserving key encoding of the
//! `_id` value, so 1, 1.0 and NumberLong(1) share a group (the first one seen is the output
//! `_id`), and groups come out in the order their first document arrived.

use super::{Stage, spec_doc};
use crate::error::CommandResult;
use crate::query::pipeline::accum::{Acc, State};
use crate::query::pipeline::codes::{self, perr};
use crate::query::pipeline::common::{AggExpr, RunCx, to_raw, value_key, value_size_bytes};
use crate::query::pipeline::limits::ENTRY_OVERHEAD_BYTES;
use crate::query::pipeline::{DocStream, ParseContext};
use bson::{Bson, Document, RawDocument};
use std::collections::HashMap;

/// The codes for a bad output field: `$group` and `$bucket` use different ones.
pub struct FieldCodes {
    pub not_object: i32,
    pub dot: i32,
    pub dollar: i32,
}

pub const GROUP_FIELD_CODES: FieldCodes = FieldCodes {
    not_object: codes::GROUP_FIELD_NOT_OBJECT,
    dot: codes::GROUP_FIELD_DOT,
    dollar: codes::GROUP_FIELD_DOLLAR,
};

pub const BUCKET_FIELD_CODES: FieldCodes = FieldCodes {
    not_object: codes::BUCKET_FIELD_NOT_OBJECT,
    dot: codes::BUCKET_FIELD_DOT,
    dollar: codes::BUCKET_FIELD_DOLLAR,
};

/// Named accumulators (`{name: {$op: arg}}`) as `$group`, `$bucket` and `$bucketAuto` write them.
#[derive(Debug, Clone)]
pub struct GroupSpec {
    pub accs: Vec<(String, Acc)>,
}

impl GroupSpec {
    /// Parses every field of `d` except `skip` as a named accumulator.
    pub fn parse(
        d: &Document,
        skip: &[&str],
        field_codes: &FieldCodes,
        ctx: &ParseContext,
    ) -> CommandResult<GroupSpec> {
        let mut accs = Vec::new();
        for (name, value) in d {
            if skip.contains(&name.as_str()) {
                continue;
            }
            if name.starts_with('$') {
                return Err(perr(
                    field_codes.dollar,
                    format!("The field name '{name}' cannot be an operator name"),
                ));
            }
            if name.contains('.') {
                return Err(perr(
                    field_codes.dot,
                    format!("The field name '{name}' cannot contain '.'"),
                ));
            }
            let one = match value {
                Bson::Document(a) if a.len() == 1 => a.iter().next(),
                Bson::Document(_) => None,
                _ => {
                    return Err(perr(
                        field_codes.not_object,
                        format!("The field '{name}' must be an accumulator object"),
                    ));
                }
            };
            let Some((op, arg)) = one else {
                return Err(perr(
                    codes::GROUP_ONE_ACCUMULATOR,
                    format!("The field '{name}' must specify one accumulator"),
                ));
            };
            let acc = Acc::parse(op, arg, ctx)?.ok_or_else(|| {
                perr(
                    codes::GROUP_UNKNOWN_OPERATOR,
                    format!("unknown group operator '{op}'"),
                )
            })?;
            accs.push((name.clone(), acc));
        }
        Ok(GroupSpec { accs })
    }

    /// A spec with only `count: {$sum: 1}` (the default output of `$bucket`).
    pub fn count_only(ctx: &ParseContext) -> CommandResult<GroupSpec> {
        GroupSpec::parse(
            &bson::doc! {"count": {"$sum": 1}},
            &[],
            &GROUP_FIELD_CODES,
            ctx,
        )
    }

    /// Folds `input` into groups keyed by `key`; groups come out in first-seen order.
    pub fn fold(
        &self,
        input: DocStream<'_>,
        cx: RunCx<'_>,
        stage: &str,
        key: &mut dyn FnMut(&Document, &RawDocument) -> CommandResult<Bson>,
    ) -> CommandResult<Vec<(Bson, Vec<State>)>> {
        let mut index: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut groups: Vec<(Bson, Vec<State>)> = Vec::new();
        let mut used_bytes = 0usize;
        for item in input {
            let doc = item?;
            let raw = to_raw(&doc)?;
            let k = key(&doc, &raw)?;
            let hashed = value_key(&k);
            let slot = match index.get(&hashed) {
                Some(&i) => i,
                None => {
                    used_bytes +=
                        value_size_bytes(&k) * 2 + ENTRY_OVERHEAD_BYTES * (1 + self.accs.len());
                    index.insert(hashed, groups.len());
                    groups.push((k, self.accs.iter().map(|(_, a)| a.new_state()).collect()));
                    groups.len() - 1
                }
            };
            let states = &mut groups[slot].1;
            for ((_, acc), state) in self.accs.iter().zip(states.iter_mut()) {
                used_bytes += acc.add(state, &raw)?;
            }
            cx.charge(used_bytes, stage)?;
        }
        Ok(groups)
    }

    /// The output fields of one group, after `_id`.
    pub fn finish_into(&self, out: &mut Document, states: &[State]) {
        for ((name, acc), state) in self.accs.iter().zip(states) {
            out.insert(name.clone(), acc.finish(state));
        }
    }
}

/// `$group`.
#[derive(Debug)]
pub struct Group {
    id: AggExpr,
    spec: GroupSpec,
}

impl Group {
    pub fn parse(spec: &Bson, ctx: &ParseContext) -> CommandResult<Group> {
        let d = spec_doc(spec, codes::GROUP_NOT_OBJECT, "a group's fields")?;
        let id = d.get("_id").ok_or_else(|| {
            perr(
                codes::GROUP_NO_ID,
                "a group specification must include an _id",
            )
        })?;
        Ok(Group {
            id: AggExpr::parse(id, ctx)?,
            spec: GroupSpec::parse(d, &["_id"], &GROUP_FIELD_CODES, ctx)?,
        })
    }

    fn group(&self, input: DocStream<'_>, cx: RunCx<'_>) -> CommandResult<Vec<Document>> {
        let groups = self.spec.fold(input, cx, "$group", &mut |_, raw| {
            Ok(self.id.eval(raw)?.unwrap_or(Bson::Null))
        })?;
        Ok(groups
            .into_iter()
            .map(|(key, states)| {
                let mut out = Document::new();
                out.insert("_id", key);
                self.spec.finish_into(&mut out, &states);
                out
            })
            .collect())
    }
}

impl Stage for Group {
    fn run<'a>(&'a self, input: DocStream<'a>, cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        Ok(Box::new(self.group(input, cx)?.into_iter().map(Ok)))
    }
}

/// `$sortByCount`: `$group {_id: expr, count: {$sum: 1}}` then `$sort {count: -1}`.
#[derive(Debug)]
pub struct SortByCount {
    group: Group,
}

pub fn sort_by_count(spec: &Bson, ctx: &ParseContext) -> CommandResult<SortByCount> {
    let ok = match spec {
        Bson::String(s) => s.starts_with('$'),
        Bson::Document(d) => d.len() == 1 && d.keys().all(|k| k.starts_with('$')),
        _ => false,
    };
    if !matches!(spec, Bson::String(_) | Bson::Document(_)) {
        return Err(perr(
            codes::SORT_BY_COUNT_TYPE,
            "the sortByCount field must be specified as a string or as an object",
        ));
    }
    if !ok {
        return Err(perr(
            codes::SORT_BY_COUNT_BAD,
            "the sortByCount field must be defined as a $-prefixed path or an expression",
        ));
    }
    Ok(SortByCount {
        group: Group {
            id: AggExpr::parse(spec, ctx)?,
            spec: GroupSpec::count_only(ctx)?,
        },
    })
}

impl Stage for SortByCount {
    fn run<'a>(&'a self, input: DocStream<'a>, cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        let mut docs = self.group.group(input, cx)?;
        docs.sort_by(|a, b| {
            let count = |d: &Document| d.get("count").cloned().unwrap_or(Bson::Null);
            storage::order::compare_bson(&count(b), &count(a))
        });
        Ok(Box::new(docs.into_iter().map(Ok)))
    }
}
