//! `$group` and `$sortByCount`. Groups are keyed by the order-preserving key encoding of the
//! `_id` value, so 1, 1.0 and NumberLong(1) share a group (the first one seen is the output
//! `_id`), and groups come out in the order their first document arrived.
//!
//! With `allowDiskUse`, once the group table passes the memory bound no new group enters it:
//! documents of groups already there are still folded in memory, and the others go to an
//! external sort (`spill::Sorter`) by (group key, input position). After the in-memory groups,
//! the sorted documents are folded one group at a time, so each group is folded by exactly one
//! path, in input order, and no partial accumulator state ever needs merging. The groups
//! already in memory can still grow (a `$push` into an existing group is not spilled).
//!
//! A parallel scan (`exec::parallel`) folds parts of the input into separate tables
//! ([`GroupTable`]) and merges them in input order ([`Group::merge_tables`]), only for
//! accumulators whose states merge exactly (`Acc::merges`) and never with spilling: a part that
//! passes the bound gives up and the serial fold above runs.

use super::{Drain, Stage, spec_doc};
use crate::error::CommandResult;
use crate::query::budget::Held;
use crate::query::pipeline::accum::{Acc, State};
use crate::query::pipeline::codes::{self, perr};
use crate::query::pipeline::limits::ENTRY_OVERHEAD_BYTES;
use crate::query::pipeline::run_context::{RunCx, value_size_bytes};
use crate::query::pipeline::spill::{KeyOf, KeyOrder, RowStream, Sorter};
use crate::query::pipeline::values::{raw_value_key, to_raw, value_key};
use crate::query::pipeline::variables::{AggExpr, Value};
use crate::query::pipeline::{DocStream, Flow, ParseContext, RawStream};
use bson::{Bson, Document, RawDocument, RawDocumentBuf};
use std::collections::HashMap;
use std::ops::Deref;
use std::sync::Arc;

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
            // mongod refuses an array argument before looking the accumulator up, whatever
            // its name (the window-function parser does not).
            if matches!(arg, Bson::Array(_)) {
                return Err(perr(
                    codes::ACCUMULATOR_ARRAY_ARG,
                    format!("The {op} accumulator is a unary operator"),
                ));
            }
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
        let mut held = Held::global();
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
            cx.charge(&mut held, used_bytes, stage)?;
        }
        Ok(groups)
    }

    /// The output fields of one group, after `_id`.
    pub fn finish_into(&self, out: &mut Document, states: &[State]) -> CommandResult<()> {
        for ((name, acc), state) in self.accs.iter().zip(states) {
            out.insert(name.clone(), acc.finish(state)?);
        }
        Ok(())
    }
}

/// `$group`. Cloned (once per run) into the drain a suspended pipeline keeps.
#[derive(Debug, Clone)]
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

    fn id_of(&self, raw: &RawDocument) -> CommandResult<Bson> {
        Ok(self.id.eval(raw)?.unwrap_or(Bson::Null))
    }

    fn output(&self, key: Bson, states: &[State]) -> CommandResult<Document> {
        let mut out = Document::new();
        out.insert("_id", key);
        self.spec.finish_into(&mut out, states)?;
        Ok(out)
    }

    /// Folds `doc` into `states`, returning the bytes the states grew by.
    fn add(&self, states: &mut [State], raw: &RawDocument) -> CommandResult<usize> {
        let mut grown_bytes = 0;
        for ((_, acc), state) in self.spec.accs.iter().zip(states.iter_mut()) {
            grown_bytes += acc.add(state, raw)?;
        }
        Ok(grown_bytes)
    }

    /// The group key of `raw` written into `key` (the order-preserving key encoding, so values
    /// that compare equal share it), and the `_id` value for a new group. A field path is
    /// encoded straight from the raw value; the value is copied out only for a new group.
    fn key_of<'d>(&self, raw: &'d RawDocument, key: &mut Vec<u8>) -> CommandResult<Value<'d>> {
        let v = self.id.eval_raw(raw)?;
        match &v {
            Value::Raw(r) => raw_value_key(key, *r),
            Value::Owned(b) => *key = value_key(b),
            Value::Missing => *key = value_key(&Bson::Null),
        }
        Ok(v)
    }

    /// Groups in memory; with `allowDiskUse`, once the table passes the bound, documents of
    /// groups not yet in it are set aside in an external sort by group key (see the module note).
    /// Documents arrive raw and are never decoded here (those set aside stay raw too).
    fn fold_input(&self, input: RawStream<'_>, cx: RunCx<'_>) -> CommandResult<Folded> {
        let mut table = self.table();
        let mut held = Held::global();
        let mut spilled: Option<Sorter<'static, Vec<u8>>> = None;
        let mut spilled_bytes = 0usize;
        let mut spilled_held = Held::global();
        for (seq, item) in (0u64..).zip(input) {
            let raw = item?;
            let id = self.key_in(&mut table, &raw)?;
            if let (None, Some(sorter)) = (table.index.get(table.key.as_slice()), spilled.as_mut())
            {
                spilled_bytes += raw.as_bytes().len() + ENTRY_OVERHEAD_BYTES;
                sorter.push((table.key.clone(), seq, raw));
                if cx.charge_spillable(&mut spilled_held, spilled_bytes, "$group")? {
                    sorter.spill()?;
                    spilled_bytes = 0;
                    spilled_held.set(0);
                }
                continue;
            }
            self.fold_into(&mut table, &raw, id)?;
            // Past the bound (the stage's or the server's), with `allowDiskUse`, the table stops
            // taking new groups: their documents go to an external sort instead.
            if cx.charge_spillable(&mut held, table.used_bytes, "$group")? && spilled.is_none() {
                let order: KeyOrder<'static, Vec<u8>> = Arc::new(|a, b| a.cmp(b));
                let id = self.id.clone();
                let key_of: KeyOf<'static, Vec<u8>> =
                    Arc::new(move |raw| Ok(value_key(&id.eval(raw)?.unwrap_or(Bson::Null))));
                spilled = Some(Sorter::new(order, key_of));
            }
        }
        Ok(Folded {
            groups: table.groups,
            spilled,
            held: [held, spilled_held],
        })
    }

    /// Writes the group key of `raw` into `t.key` and returns the `_id` for a new group. A
    /// constant `_id` (`null`, `1`, ...) is evaluated once, with the first document.
    fn key_in<'d>(&self, t: &mut GroupTable, raw: &'d RawDocument) -> CommandResult<Value<'d>> {
        if let Some((k, v)) = &t.constant {
            t.key.clone_from(k);
            return Ok(Value::Owned(v.clone()));
        }
        if self.id.is_constant() {
            let v = self
                .key_of(raw, &mut t.key)?
                .into_owned()
                .unwrap_or(Bson::Null);
            t.constant = Some((t.key.clone(), v.clone()));
            return Ok(Value::Owned(v));
        }
        self.key_of(raw, &mut t.key)
    }

    /// Folds `raw` into the group of `t.key` (made with `id` when new); returns its slot.
    fn fold_into(
        &self,
        t: &mut GroupTable,
        raw: &RawDocument,
        id: Value<'_>,
    ) -> CommandResult<usize> {
        let slot = match t.index.get(t.key.as_slice()) {
            Some(&i) => i,
            None => {
                let k = id.into_owned().unwrap_or(Bson::Null);
                t.used_bytes +=
                    value_size_bytes(&k) * 2 + ENTRY_OVERHEAD_BYTES * (1 + self.spec.accs.len());
                t.index.insert(t.key.clone(), t.groups.len());
                let states = self.spec.accs.iter().map(|(_, a)| a.new_state()).collect();
                t.groups.push((k, states));
                t.groups.len() - 1
            }
        };
        t.used_bytes += self.add(&mut t.groups[slot].1, raw)?;
        Ok(slot)
    }

    /// True when a fold over parts of the input can be merged exactly ([`Group::merge_tables`]):
    /// every accumulator merges (`Acc::merges`).
    pub fn merges(&self) -> bool {
        self.spec.accs.iter().all(|(_, a)| a.merges())
    }

    /// An empty table, for one part of the input (`exec::parallel`).
    pub fn table(&self) -> GroupTable {
        GroupTable {
            index: HashMap::new(),
            groups: Vec::new(),
            used_bytes: 0,
            key: Vec::new(),
            constant: None,
        }
    }

    /// Folds one document of a part into its table; returns the bytes the table holds, or
    /// `None` once the group's state can no longer merge (`Acc::still_merges`: a sum saw a
    /// double), so the parallel fold gives up early.
    pub fn fold_part(&self, t: &mut GroupTable, raw: &RawDocument) -> CommandResult<Option<usize>> {
        let id = self.key_in(t, raw)?;
        let slot = self.fold_into(t, raw, id)?;
        let merges = t.groups[slot].1.iter().all(Acc::still_merges);
        Ok(merges.then_some(t.used_bytes))
    }

    /// The tables of consecutive parts of the input, in input order, merged into the table one
    /// fold over the whole input makes: groups keep their first-seen order (a group first seen
    /// in a later part comes after every group of the earlier ones, as it would have), and a
    /// group's `_id` is its first document's. `None` when a state does not merge exactly.
    pub fn merge_tables(&self, tables: Vec<GroupTable>) -> Option<GroupTable> {
        let mut tables = tables.into_iter();
        let mut out = tables.next()?;
        for t in tables {
            let mut keys: Vec<(usize, Vec<u8>)> =
                t.index.into_iter().map(|(k, slot)| (slot, k)).collect();
            keys.sort_unstable_by_key(|(slot, _)| *slot);
            for ((_, key), (id, states)) in keys.into_iter().zip(t.groups) {
                match out.index.get(&key) {
                    Some(&i) => {
                        let mine = &mut out.groups[i].1;
                        for (((_, acc), state), later) in
                            self.spec.accs.iter().zip(mine.iter_mut()).zip(states)
                        {
                            if !acc.merge(state, later) {
                                return None;
                            }
                        }
                    }
                    None => {
                        out.index.insert(key, out.groups.len());
                        out.groups.push((id, states));
                    }
                }
            }
            out.used_bytes += t.used_bytes;
        }
        Some(out)
    }

    /// The output documents of a merged table, raw, in first-seen order.
    pub fn table_output(&self, t: GroupTable) -> CommandResult<Vec<RawDocumentBuf>> {
        t.groups
            .into_iter()
            .map(|(key, states)| to_raw(&self.output(key, &states)?))
            .collect()
    }
}

/// A `$group`'s in-memory table: groups in first-seen order, found by the order-preserving
/// encoding of their key, and the bytes they hold (an estimate, for the memory bound).
pub struct GroupTable {
    index: HashMap<Vec<u8>, usize>,
    groups: Vec<(Bson, Vec<State>)>,
    used_bytes: usize,
    /// The current document's key (reused between documents).
    key: Vec<u8>,
    /// A constant `_id`'s key and value, once evaluated.
    constant: Option<(Vec<u8>, Bson)>,
}

/// A `$group`'s input folded: the groups in memory in first-seen order, the documents of the
/// others in an external sort, and the charges for both (given back when this is dropped).
struct Folded {
    groups: Vec<(Bson, Vec<State>)>,
    spilled: Option<Sorter<'static, Vec<u8>>>,
    held: [Held; 2],
}

/// The output documents of `folded`, made one at a time as they are pulled: the groups in
/// memory, then those folded from the sorted documents. `g` is the stage borrowed (a run) or
/// owned (a suspended pipeline's drain).
fn emit<'g, G>(
    g: G,
    folded: Folded,
) -> CommandResult<impl Iterator<Item = CommandResult<Document>> + 'g>
where
    G: Deref<Target = Group> + Clone + 'g,
{
    let Folded {
        groups,
        spilled,
        held,
    } = folded;
    let sorted = match spilled {
        Some(sorter) => Some(fold_sorted(g.clone(), sorter.finish()?)),
        None => None,
    };
    let in_memory = groups
        .into_iter()
        .map(move |(key, states)| g.output(key, &states));
    Ok(in_memory
        .chain(sorted.into_iter().flatten())
        .inspect(move |_| {
            let _ = &held;
        }))
}

/// Folds rows sorted by (group key, input position) one group at a time; each group's `_id` is
/// the value of its first document, as in memory.
fn fold_sorted<'g, G>(
    g: G,
    rows: RowStream<'static, Vec<u8>>,
) -> impl Iterator<Item = CommandResult<Document>> + 'g
where
    G: Deref<Target = Group> + 'g,
{
    let mut rows = rows.peekable();
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed {
            return None;
        }
        let mut one = || -> CommandResult<Option<Document>> {
            let Some(first) = rows.next() else {
                return Ok(None);
            };
            let (key, _, raw) = first?;
            let id = g.id_of(&raw)?;
            let mut states: Vec<State> = g.spec.accs.iter().map(|(_, a)| a.new_state()).collect();
            g.add(&mut states, &raw)?;
            while let Some(Ok((k, _, _))) = rows.peek()
                && *k == key
            {
                if let Some(Ok((_, _, d))) = rows.next() {
                    g.add(&mut states, &d)?;
                }
            }
            Ok(Some(g.output(id, &states)?))
        };
        match one() {
            Ok(Some(d)) => Some(Ok(d)),
            Ok(None) => None,
            Err(e) => {
                failed = true;
                Some(Err(e))
            }
        }
    })
}

impl Group {
    fn group<'a>(&'a self, input: RawStream<'a>, cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        let folded = self.fold_input(input, cx)?;
        Ok(Box::new(emit(self, folded)?))
    }
}

impl Stage for Group {
    fn mergeable(&self) -> Option<super::Mergeable<'_>> {
        self.merges().then_some(super::Mergeable::Group(self))
    }

    fn run<'a>(&'a self, input: DocStream<'a>, cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        self.group(Flow::Docs(input).into_raw(), cx)
    }

    fn run_raw<'a>(&'a self, input: RawStream<'a>, cx: RunCx<'a>) -> CommandResult<Flow<'a>> {
        Ok(Flow::Docs(self.group(input, cx)?))
    }

    /// The group table (and the sorted documents of spilled groups) kept by an owned copy of
    /// the stage; each output document is finished only when it is pulled.
    fn drain(&self, input: RawStream<'_>, cx: RunCx<'_>) -> CommandResult<Drain> {
        let folded = self.fold_input(input, cx)?;
        let out = emit(Arc::new(self.clone()), folded)?;
        Ok(Box::new(out.map(|d| to_raw(&d?))))
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
        let mut docs = self
            .group
            .group(Flow::Docs(input).into_raw(), cx)?
            .collect::<CommandResult<Vec<_>>>()?;
        docs.sort_by(|a, b| {
            let count = |d: &Document| d.get("count").cloned().unwrap_or(Bson::Null);
            crate::query::collator::compare_bson(&count(b), &count(a))
        });
        Ok(Box::new(docs.into_iter().map(Ok)))
    }
}

#[cfg(test)]
mod tests {
    //! Proves a `$group` that spills gives the same groups (same `_id`s and accumulator values,
    //! including order-sensitive ones) as one held in memory, and 292 without `allowDiskUse`.
    //! How: thousands of seeded random documents in ~1,500 groups, tiny bounds, outputs
    //! compared after ordering both by `_id`.
    use crate::query::pipeline::Pipeline;
    use crate::query::pipeline::tests::{MapEnv, code_of, ctx, stages_of};
    use bson::{Bson, Document, bson, doc};
    use rand::{Rng, SeedableRng, rngs::StdRng};

    fn random_docs(n: usize) -> Vec<Document> {
        let mut rng = StdRng::seed_from_u64(7);
        (0..n)
            .map(|i| {
                // Integer and double keys that compare equal must share a group.
                let k = rng.random_range(0..1500);
                let key = if rng.random_range(0..3) == 0 {
                    Bson::Double(f64::from(k))
                } else {
                    Bson::Int32(k)
                };
                doc! {"i": i as i64, "k": key, "v": rng.random_range(-50..50),
                "pad": "x".repeat(rng.random_range(0..40))}
            })
            .collect()
    }

    fn grouped_with(memory_max_bytes: usize, disk: bool, input: &[Document]) -> Vec<Document> {
        let mut c = ctx();
        c.memory_max_bytes = memory_max_bytes;
        c.allow_disk_use = disk;
        let stages = stages_of(bson!([{"$group": {
            "_id": "$k",
            "n": {"$count": {}},
            "s": {"$sum": "$v"},
            "a": {"$avg": "$v"},
            "lo": {"$min": "$v"},
            "hi": {"$max": "$v"},
            "f": {"$first": "$i"},
            "l": {"$last": "$i"},
            "p": {"$push": "$i"},
            "u": {"$addToSet": "$v"},
        }}]));
        let p = Pipeline::parse(&stages, &c).expect("parses");
        let mut out = p.run_vec(input.to_vec(), &MapEnv::default()).expect("runs");
        out.sort_by(|a, b| {
            let id = |d: &Document| d.get("_id").cloned().unwrap_or(Bson::Null);
            crate::query::collator::compare_bson(&id(a), &id(b))
        });
        out
    }

    #[test]
    fn spilled_group_matches_in_memory() {
        let input = random_docs(5000);
        let expected = grouped_with(usize::MAX, false, &input);
        assert!(expected.len() > 1000, "many groups");
        assert_eq!(grouped_with(3_000, true, &input), expected);
        assert_eq!(grouped_with(60_000, true, &input), expected);
    }

    #[test]
    fn without_disk_use_the_bound_fails() {
        let input = random_docs(5000);
        let mut c = ctx();
        c.memory_max_bytes = 60_000;
        let p = Pipeline::parse(
            &stages_of(bson!([{"$group": {"_id": "$k", "p": {"$push": "$i"}}}])),
            &c,
        )
        .expect("parses");
        let e = p
            .run_vec(input, &MapEnv::default())
            .expect_err("over the bound");
        assert_eq!(code_of(&e), 292);
    }

    #[test]
    fn one_groups_push_or_add_to_set_stops_at_its_byte_bound_even_with_disk_use() {
        // 101 distinct 1 MiB strings into one group: past the 100 MiB bound on the 101st.
        let mib = 1024 * 1024;
        let input: Vec<Document> = (0..101)
            .map(|i| doc! {"k": 1, "s": format!("{i:04}{}", "x".repeat(mib))})
            .collect();
        for op in ["$push", "$addToSet"] {
            let mut c = ctx();
            c.allow_disk_use = true;
            c.memory_max_bytes = usize::MAX;
            let p = Pipeline::parse(
                &stages_of(bson!([{"$group": {"_id": "$k", "p": {op: "$s"}}}])),
                &c,
            )
            .expect("parses");
            let e = p
                .run_vec(input.clone(), &MapEnv::default())
                .expect_err("over the bound");
            assert_eq!(code_of(&e), 146, "{op}");
            // Under the bound the same group succeeds.
            let ok = p
                .run_vec(input[..90].to_vec(), &MapEnv::default())
                .expect("under the bound");
            assert_eq!(ok[0].get_array("p").expect("array").len(), 90, "{op}");
        }
    }
}
