//! Applying a parsed update to an owned document: walking (and, for setting operators,
//! creating) the path of each operation with mongod's rules, then running the operator at the
//! end of the path. `$[]` and `$[<id>]` fan out over array elements; `$` has already been
//! replaced by the matched position.

use super::arrays;
use super::display;
use super::ops::Arg;
use super::{ApplyContext, OpKind, OperatorUpdate, UpdateOp, filter_identifier};
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::limits::ARRAY_INDEX_CREATE_MAX;
use crate::query::path::array_index;
use crate::query::types;
use bson::{Bson, Document, Timestamp, doc};
use std::cmp::Ordering;
use storage::order;

/// A place a value lives or may be put: a document field or an array element.
pub(super) enum Slot<'a> {
    Field(&'a mut Document, &'a str),
    Elem(&'a mut Vec<Bson>, usize),
}

impl Slot<'_> {
    pub(super) fn get(&self) -> Option<&Bson> {
        match self {
            Slot::Field(d, k) => d.get(*k),
            Slot::Elem(a, i) => a.get(*i),
        }
    }

    pub(super) fn get_mut(&mut self) -> Option<&mut Bson> {
        match self {
            Slot::Field(d, k) => d.get_mut(*k),
            Slot::Elem(a, i) => a.get_mut(*i),
        }
    }

    /// Sets the value; an array grows with nulls up to the index.
    pub(super) fn set(&mut self, v: Bson) {
        match self {
            Slot::Field(d, k) => {
                d.insert(*k, v);
            }
            Slot::Elem(a, i) => {
                if *i >= a.len() {
                    a.resize(*i + 1, Bson::Null);
                }
                a[*i] = v;
            }
        }
    }

    /// Removes the value; array elements become null, as `$unset` does in mongod.
    fn remove(&mut self) -> Option<Bson> {
        match self {
            Slot::Field(d, k) => d.remove(*k),
            Slot::Elem(a, i) => a.get_mut(*i).map(|e| std::mem::replace(e, Bson::Null)),
        }
    }
}

/// True when two values are the same bytes (type, field order, -0.0 vs 0.0 all matter).
pub(super) fn identical(a: &Bson, b: &Bson) -> bool {
    match (a, b) {
        (Bson::Double(x), Bson::Double(y)) => x.to_bits() == y.to_bits(),
        (Bson::Document(x), Bson::Document(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y.iter())
                    .all(|((ka, va), (kb, vb))| ka == kb && identical(va, vb))
        }
        (Bson::Array(x), Bson::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| identical(p, q))
        }
        _ => a == b,
    }
}

/// A replacement keeps the old `_id` and refuses to change it.
pub(super) fn replace(doc: &mut Document, r: &Document) -> CommandResult<bool> {
    let old_id = doc.get("_id").cloned();
    if let (Some(old), Some(new)) = (&old_id, r.get("_id"))
        && !identical(old, new)
        && order::compare_bson(old, new) != Ordering::Equal
    {
        return Err(err(
            ErrorCode::ImmutableField,
            format!(
                "After applying the update, the (immutable) field '_id' was found to have been altered to _id: {}",
                display::value(new)
            ),
        ));
    }
    let mut next = Document::new();
    if let Some(id) = old_id.or_else(|| r.get("_id").cloned()) {
        next.insert("_id", id);
    }
    for (k, v) in r {
        if k != "_id" {
            next.insert(k.clone(), v.clone());
        }
    }
    let changed = !identical(&Bson::Document(doc.clone()), &Bson::Document(next.clone()));
    *doc = next;
    Ok(changed)
}

pub(super) fn apply_operators(
    u: &OperatorUpdate,
    doc: &mut Document,
    ctx: &ApplyContext,
) -> CommandResult<bool> {
    let old_id = doc.get("_id").cloned();
    let id_text = display::id_of(doc);
    let mut root = Bson::Document(std::mem::take(doc));
    let result = apply_all(u, &mut root, ctx, &id_text);
    if let Bson::Document(d) = root {
        *doc = d;
    }
    let changed = result?;
    if let Some(old) = old_id {
        let still = doc.get("_id").is_some_and(|new| identical(&old, new));
        if !still {
            return Err(err(
                ErrorCode::ImmutableField,
                "Performing an update on the path '_id' would modify the immutable field '_id'",
            ));
        }
    }
    Ok(changed)
}

fn apply_all(
    u: &OperatorUpdate,
    root: &mut Bson,
    ctx: &ApplyContext,
    id_text: &str,
) -> CommandResult<bool> {
    let mut changed = false;
    for op in &u.ops {
        if op.kind == OpKind::SetOnInsert && !ctx.is_insert {
            continue;
        }
        let comps = resolve_positional(&op.components, ctx)?;
        let walker = Walker {
            update: u,
            id_text,
            path: &op.path,
        };
        changed |= if let Arg::Rename(to) = &op.arg {
            rename(&walker, root, &comps, to)?
        } else {
            let create = !matches!(
                op.kind,
                OpKind::Unset | OpKind::Pop | OpKind::Pull | OpKind::PullAll
            );
            walker.walk(root, "", &comps, create, &mut |slot: Slot<'_>| {
                run(op, slot, ctx, id_text)
            })?
        };
    }
    Ok(changed)
}

fn resolve_positional(comps: &[String], ctx: &ApplyContext) -> CommandResult<Vec<String>> {
    comps
        .iter()
        .map(|c| {
            if c != "$" {
                return Ok(c.clone());
            }
            match ctx.positional {
                Some(i) if !ctx.is_insert => Ok(i.to_string()),
                _ => Err(err(
                    ErrorCode::BadValue,
                    "The positional operator did not find the match needed from the query.",
                )),
            }
        })
        .collect()
}

/// The operator at the end of the path.
fn run(
    op: &UpdateOp,
    mut slot: Slot<'_>,
    ctx: &ApplyContext,
    id_text: &str,
) -> CommandResult<bool> {
    let field = op.components.last().map(String::as_str).unwrap_or("");
    let set_if_different = |slot: &mut Slot<'_>, v: Bson| {
        if slot.get().is_some_and(|old| identical(old, &v)) {
            return false;
        }
        slot.set(v);
        true
    };
    match (&op.arg, op.kind) {
        (Arg::Value(v), OpKind::Set | OpKind::SetOnInsert) => {
            Ok(set_if_different(&mut slot, v.clone()))
        }
        (Arg::Unset, _) => Ok(slot.remove().is_some()),
        (Arg::Value(v), OpKind::Inc | OpKind::Mul) => {
            let next = arithmetic(op.kind, slot.get(), v, field, id_text)?;
            Ok(set_if_different(&mut slot, next))
        }
        (Arg::Value(v), OpKind::Min | OpKind::Max) => {
            let want = if op.kind == OpKind::Min {
                Ordering::Less
            } else {
                Ordering::Greater
            };
            match slot.get() {
                Some(old) if crate::query::collator::compare_bson(v, old) != want => Ok(false),
                _ => Ok(set_if_different(&mut slot, v.clone())),
            }
        }
        (Arg::CurrentDate { timestamp }, _) => {
            let v = if *timestamp {
                let secs = u32::try_from(ctx.now.timestamp_millis().div_euclid(1000)).unwrap_or(0);
                Bson::Timestamp(Timestamp {
                    time: secs,
                    increment: 1,
                })
            } else {
                Bson::DateTime(ctx.now)
            };
            Ok(set_if_different(&mut slot, v))
        }
        (Arg::Bit(steps), _) => {
            let next = bitwise(slot.get(), steps, field, id_text)?;
            Ok(set_if_different(&mut slot, next))
        }
        (Arg::Push(spec), _) => arrays::push(&mut slot, spec, field, id_text),
        (Arg::AddToSet(values), _) => arrays::add_to_set(&mut slot, values, field),
        (Arg::Pop { first }, _) => arrays::pop(&mut slot, *first, &op.path),
        (Arg::Pull(cond), _) => arrays::pull(&mut slot, |e| arrays::pull_matches(cond, e)),
        (Arg::PullAll(values), _) => arrays::pull(&mut slot, |e| {
            values
                .iter()
                .any(|v| crate::query::collator::compare_bson(v, e) == Ordering::Equal)
        }),
        _ => Err(err(
            ErrorCode::InternalError,
            format!("update operation {:?} has a mismatched argument", op.kind),
        )),
    }
}

/// `$inc` / `$mul` with mongod's type promotion.
fn arithmetic(
    kind: OpKind,
    old: Option<&Bson>,
    arg: &Bson,
    field: &str,
    id_text: &str,
) -> CommandResult<Bson> {
    let name = if kind == OpKind::Inc { "$inc" } else { "$mul" };
    let Some(old) = old else {
        // A missing field starts at the argument ($inc) or at a zero of its type ($mul).
        return Ok(if kind == OpKind::Inc {
            arg.clone()
        } else {
            zero_like(arg)
        });
    };
    if !types::is_number(old) {
        return Err(err(
            ErrorCode::TypeMismatch,
            format!(
                "Cannot apply {name} to a value of non-numeric type. {id_text} has the field '{field}' of non-numeric type {}",
                types::type_name(types::type_code(old))
            ),
        ));
    }
    let int = |a: i64, b: i64| {
        if kind == OpKind::Inc {
            a.checked_add(b)
        } else {
            a.checked_mul(b)
        }
    };
    let float = |a: f64, b: f64| if kind == OpKind::Inc { a + b } else { a * b };
    let result = match (old, arg) {
        (Bson::Int32(a), Bson::Int32(b)) => int(i64::from(*a), i64::from(*b))
            .map(|n| i32::try_from(n).map_or(Bson::Int64(n), Bson::Int32)),
        (Bson::Int32(_) | Bson::Int64(_), Bson::Int32(_) | Bson::Int64(_)) => int(
            types::as_i64_exact(old).unwrap_or(0),
            types::as_i64_exact(arg).unwrap_or(0),
        )
        .map(Bson::Int64),
        (Bson::Decimal128(_), _) | (_, Bson::Decimal128(_)) => {
            if kind == OpKind::Inc {
                crate::query::decimal::add(old, arg)
            } else {
                crate::query::decimal::mul(old, arg)
            }
        }
        _ => Some(Bson::Double(float(
            types::as_f64(old).unwrap_or(f64::NAN),
            types::as_f64(arg).unwrap_or(f64::NAN),
        ))),
    };
    result.ok_or_else(|| {
        err(
            ErrorCode::BadValue,
            format!(
                "Failed to apply {name} operations to current value ({}) for document {id_text}",
                long_text(old)
            ),
        )
    })
}

/// `$bit`: a missing field starts at 0; int32 stays int32 unless an operand is int64.
fn bitwise(
    old: Option<&Bson>,
    steps: &[(super::ops::BitOp, Bson)],
    field: &str,
    id_text: &str,
) -> CommandResult<Bson> {
    use super::ops::BitOp;
    let (mut value, mut wide) = match old {
        None => (0i64, false),
        Some(Bson::Int32(i)) => (i64::from(*i), false),
        Some(Bson::Int64(i)) => (*i, true),
        Some(other) => {
            return Err(err(
                ErrorCode::BadValue,
                format!(
                    "Cannot apply $bit to a value of non-integral type.{id_text} has the field {field} of non-integer type {}",
                    types::type_name(types::type_code(other))
                ),
            ));
        }
    };
    for (op, operand) in steps {
        let n = match operand {
            Bson::Int32(i) => i64::from(*i),
            Bson::Int64(i) => {
                wide = true;
                *i
            }
            _ => 0,
        };
        value = match op {
            BitOp::And => value & n,
            BitOp::Or => value | n,
            BitOp::Xor => value ^ n,
        };
    }
    // Narrow results come from 32-bit operands, so the value fits (sign-extended) in an i32.
    Ok(if wide {
        Bson::Int64(value)
    } else {
        Bson::Int32(i32::try_from(value).unwrap_or(i32::MIN))
    })
}

fn long_text(v: &Bson) -> String {
    match v {
        Bson::Int64(i) => format!("(NumberLong){i}"),
        Bson::Int32(i) => format!("(NumberInt){i}"),
        other => display::value(other),
    }
}

fn zero_like(v: &Bson) -> Bson {
    match v {
        Bson::Int32(_) => Bson::Int32(0),
        Bson::Int64(_) => Bson::Int64(0),
        Bson::Decimal128(_) => "0"
            .parse::<bson::Decimal128>()
            .map_or(Bson::Double(0.0), Bson::Decimal128),
        _ => Bson::Double(0.0),
    }
}

/// `$rename`: take the value from the source (no creation), put it at the target (creating).
fn rename(w: &Walker<'_>, root: &mut Bson, from: &[String], to: &[String]) -> CommandResult<bool> {
    let mut taken = None;
    w.walk(root, "", from, false, &mut |mut slot: Slot<'_>| {
        if matches!(slot, Slot::Elem(..)) {
            return Err(err(
                ErrorCode::BadValue,
                format!(
                    "The source field cannot be an array element, '{}' in doc with {}",
                    from.join("."),
                    w.id_text
                ),
            ));
        }
        taken = slot.remove();
        Ok(taken.is_some())
    })?;
    let Some(value) = taken else { return Ok(false) };
    w.walk(root, "", to, true, &mut |mut slot: Slot<'_>| {
        if matches!(slot, Slot::Elem(..)) {
            return Err(err(
                ErrorCode::BadValue,
                format!(
                    "The destination field cannot be an array element, '{}' in doc with {}",
                    to.join("."),
                    w.id_text
                ),
            ));
        }
        slot.set(value.clone());
        Ok(true)
    })
}

/// Walks one operation's path through the document.
#[derive(Clone, Copy)]
struct Walker<'a> {
    update: &'a OperatorUpdate,
    id_text: &'a str,
    path: &'a str,
}

type Leaf<'f> = dyn FnMut(Slot<'_>) -> CommandResult<bool> + 'f;

impl Walker<'_> {
    /// `node` is the document or array in which `comps[0]` is looked up; `name` is its field
    /// name (for messages). `create` makes missing parents as setting operators do.
    fn walk(
        &self,
        node: &mut Bson,
        name: &str,
        comps: &[String],
        create: bool,
        leaf: &mut Leaf<'_>,
    ) -> CommandResult<bool> {
        let Some(comp) = comps.first() else {
            return Ok(false);
        };
        let rest = &comps[1..];
        if comp == "$[]" || filter_identifier(comp).is_some() {
            return self.fan_out(node, name, comp, rest, create, leaf);
        }
        match node {
            Bson::Document(d) => {
                if rest.is_empty() {
                    return leaf(Slot::Field(d, comp));
                }
                if !d.contains_key(comp) {
                    if !create {
                        return Ok(false);
                    }
                    if rest[0].starts_with("$[") {
                        return Err(err(
                            ErrorCode::BadValue,
                            format!(
                                "The path '{}' must exist in the document in order to apply array updates.",
                                self.prefix(comps)
                            ),
                        ));
                    }
                    d.insert(comp.clone(), Document::new());
                }
                match d.get_mut(comp) {
                    Some(child) => self.descend(child, comp, rest, create, leaf),
                    None => Ok(false),
                }
            }
            Bson::Array(a) => {
                let Some(index) = array_index(comp) else {
                    if !create {
                        return Ok(false);
                    }
                    return Err(err(
                        ErrorCode::PathNotViable,
                        format!(
                            "Cannot create field '{comp}' in element {}",
                            display::element(name, &Bson::Array(a.clone()))
                        ),
                    ));
                };
                if index >= a.len() && !create {
                    return Ok(false);
                }
                if index > ARRAY_INDEX_CREATE_MAX {
                    return Err(err(
                        ErrorCode::PathNotViable,
                        "can't backfill array to larger than 1500000 elements",
                    ));
                }
                if rest.is_empty() {
                    return leaf(Slot::Elem(a, index));
                }
                if index >= a.len() {
                    a.resize(index, Bson::Null);
                    a.push(Bson::Document(Document::new()));
                }
                self.descend(&mut a[index], comp, rest, create, leaf)
            }
            _ => Ok(false),
        }
    }

    /// Continues into `child`, which must be a container unless nothing is to be created.
    fn descend(
        &self,
        child: &mut Bson,
        name: &str,
        rest: &[String],
        create: bool,
        leaf: &mut Leaf<'_>,
    ) -> CommandResult<bool> {
        match child {
            Bson::Document(_) | Bson::Array(_) => self.walk(child, name, rest, create, leaf),
            other if rest[0].starts_with("$[") => Err(err(
                ErrorCode::BadValue,
                format!(
                    "Cannot apply array updates to non-array element {}",
                    display::element(name, other)
                ),
            )),
            other if create => Err(err(
                ErrorCode::PathNotViable,
                format!(
                    "Cannot create field '{}' in element {}",
                    rest[0],
                    display::element(name, other)
                ),
            )),
            _ => Ok(false),
        }
    }

    /// `$[]` / `$[<id>]`: every (matching) element of the array `node`.
    fn fan_out(
        &self,
        node: &mut Bson,
        name: &str,
        comp: &str,
        rest: &[String],
        create: bool,
        leaf: &mut Leaf<'_>,
    ) -> CommandResult<bool> {
        let Bson::Array(a) = node else {
            return Err(err(
                ErrorCode::BadValue,
                format!(
                    "Cannot apply array updates to non-array element {}",
                    display::element(name, node)
                ),
            ));
        };
        let filter = filter_identifier(comp)
            .and_then(|id| self.update.array_filters.iter().find(|(k, _)| k == id));
        let mut changed = false;
        for i in 0..a.len() {
            if let Some((id, f)) = filter {
                let wrapper = bson::RawDocumentBuf::try_from(&doc! {id.as_str(): a[i].clone()})
                    .map_err(|e| err(ErrorCode::InternalError, e.to_string()))?;
                if f.try_matches(&wrapper)?.is_none() {
                    continue;
                }
            }
            changed |= if rest.is_empty() {
                leaf(Slot::Elem(a, i))?
            } else {
                self.descend(&mut a[i], &i.to_string(), rest, create, leaf)?
            };
        }
        Ok(changed)
    }

    fn prefix(&self, remaining: &[String]) -> String {
        let all: Vec<&str> = self.path.split('.').collect();
        let keep = all.len().saturating_sub(remaining.len() - 1);
        all[..keep].join(".")
    }
}
