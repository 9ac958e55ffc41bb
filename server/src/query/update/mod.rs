//! Update documents: parsing (replacement vs operators, arrayFilters, path conflicts) and
//! applying them to an owned document with mongod's semantics and errors.
//!
//! Invariants: a parsed [`Update`] has no two operations whose paths overlap (mongod's
//! `ConflictingUpdateOperators`), every `$[<id>]` has exactly one array filter and every array
//! filter is used. `apply` reports whether the document changed, byte for byte, so that
//! `nModified` counts only real modifications; operations run in path order, which is why new
//! fields appear in lexicographic order as they do with mongod.

mod apply;
mod arrays;
mod display;
mod modification;
mod ops;
mod seed;
#[cfg(test)]
mod tests;

pub use modification::Modification;
pub use seed::upsert_seed;

use crate::error::{CommandResult, ErrorCode, err};
use crate::query::matcher::Filter;
use bson::{Bson, DateTime, Document};

/// What the caller knows about the update being applied.
#[derive(Debug, Clone, Copy)]
pub struct ApplyContext {
    /// True when the document is being created by an upsert: `$setOnInsert` applies.
    pub is_insert: bool,
    /// The array position the query matched (for the positional `$`).
    pub positional: Option<usize>,
    /// The time `$currentDate` writes.
    pub now: DateTime,
}

/// A parsed update.
#[derive(Debug, Clone)]
pub enum Update {
    /// A whole new document (its `_id`, if any, must equal the old one).
    Replacement(Document),
    Operators(OperatorUpdate),
}

/// An operator update: the operations in apply order plus the array filters they use.
#[derive(Debug, Clone)]
pub struct OperatorUpdate {
    pub ops: Vec<UpdateOp>,
    array_filters: Vec<(String, Filter)>,
}

/// One `$operator: {path: argument}` entry.
#[derive(Debug, Clone)]
pub struct UpdateOp {
    pub kind: OpKind,
    pub path: String,
    pub components: Vec<String>,
    pub arg: ops::Arg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    Set,
    Unset,
    Inc,
    Mul,
    Min,
    Max,
    Rename,
    CurrentDate,
    SetOnInsert,
    Push,
    AddToSet,
    Pop,
    Pull,
    PullAll,
    Bit,
}

const OPERATORS: &[(&str, OpKind)] = &[
    ("$set", OpKind::Set),
    ("$unset", OpKind::Unset),
    ("$inc", OpKind::Inc),
    ("$mul", OpKind::Mul),
    ("$min", OpKind::Min),
    ("$max", OpKind::Max),
    ("$rename", OpKind::Rename),
    ("$currentDate", OpKind::CurrentDate),
    ("$setOnInsert", OpKind::SetOnInsert),
    ("$push", OpKind::Push),
    ("$addToSet", OpKind::AddToSet),
    ("$pop", OpKind::Pop),
    ("$pull", OpKind::Pull),
    ("$pullAll", OpKind::PullAll),
    ("$bit", OpKind::Bit),
];

fn unknown_modifier(name: &str) -> crate::error::CommandError {
    err(
        ErrorCode::FailedToParse,
        format!(
            "Unknown modifier: {name}. Expected a valid update modifier or pipeline-style update specified as an array"
        ),
    )
}

impl Update {
    /// Parses an update document (`u` of an update statement).
    pub fn parse(update: &Document, array_filters: Option<&[Document]>) -> CommandResult<Update> {
        let is_operators = update.keys().next().is_some_and(|k| k.starts_with('$'));
        if !is_operators {
            validate_replacement(update)?;
            if array_filters.is_some_and(|f| !f.is_empty()) {
                return Err(err(
                    ErrorCode::FailedToParse,
                    "arrayFilters may not be specified for replacement-style updates",
                ));
            }
            return Ok(Update::Replacement(update.clone()));
        }
        let mut ops = Vec::new();
        for (name, fields) in update {
            let Some((_, kind)) = OPERATORS.iter().find(|(n, _)| n == name) else {
                return Err(unknown_modifier(name));
            };
            let Bson::Document(fields) = fields else {
                return Err(err(
                    ErrorCode::FailedToParse,
                    format!(
                        "Modifiers operate on fields but we found type {} instead. For example: {{$mod: {{<field>: ...}}}} not {{{name}: {}}}",
                        crate::query::types::type_name(crate::query::types::type_code(fields)),
                        display::value(fields)
                    ),
                ));
            };
            for (path, arg) in fields {
                ops.extend(ops::parse_op(*kind, path, arg)?);
            }
        }
        check_conflicts(&ops)?;
        let array_filters = parse_array_filters(array_filters.unwrap_or(&[]), &ops, update)?;
        // Stable sort: path order, as mongod's update tree applies its children.
        ops.sort_by(|a, b| a.components.cmp(&b.components));
        Ok(Update::Operators(OperatorUpdate { ops, array_filters }))
    }

    /// True for a replacement document.
    pub fn is_replacement(&self) -> bool {
        matches!(self, Update::Replacement(_))
    }

    /// Applies the update to `doc` in place; returns whether anything changed.
    pub fn apply(&self, doc: &mut Document, ctx: &ApplyContext) -> CommandResult<bool> {
        match self {
            Update::Replacement(r) => apply::replace(doc, r),
            Update::Operators(u) => apply::apply_operators(u, doc, ctx),
        }
    }
}

/// Checks a replacement document: no `$`-prefixed top-level field.
pub fn validate_replacement(doc: &Document) -> CommandResult<()> {
    if let Some(k) = doc.keys().find(|k| k.starts_with('$')) {
        return Err(err(
            ErrorCode::DollarPrefixedFieldName,
            format!(
                "The dollar ($) prefixed field '{k}' in '{k}' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith."
            ),
        ));
    }
    Ok(())
}

/// Two operations conflict when one path is a prefix of (or equal to) the other.
fn check_conflicts(ops: &[UpdateOp]) -> CommandResult<()> {
    let mut seen: Vec<&[String]> = Vec::with_capacity(ops.len());
    for op in ops {
        let mut paths: Vec<&[String]> = vec![&op.components];
        if let ops::Arg::Rename(to) = &op.arg {
            paths.push(to);
        }
        for path in paths {
            for earlier in &seen {
                let common = earlier.len().min(path.len());
                if earlier[..common] == path[..common] {
                    return Err(err(
                        ErrorCode::ConflictingUpdateOperators,
                        format!(
                            "Updating the path '{}' would create a conflict at '{}'",
                            path.join("."),
                            path[..common].join(".")
                        ),
                    ));
                }
            }
            seen.push(path);
        }
    }
    Ok(())
}

/// The first components of the field names an array filter tests, looking through
/// `$and/$or/$nor` (a filter like `{$or: [{"x.a": 1}, {"x.b": 2}]}` is about `x`).
fn top_level_names<'d>(f: &'d Document, out: &mut Vec<&'d str>) {
    for (k, v) in f {
        match (k.as_str(), v) {
            ("$and" | "$or" | "$nor", Bson::Array(items)) => {
                for item in items {
                    if let Bson::Document(d) = item {
                        top_level_names(d, out);
                    }
                }
            }
            (k, _) if k.starts_with('$') => {}
            (k, _) => out.push(k.split('.').next().unwrap_or("")),
        }
    }
}

/// The identifier of a `$[<id>]` component, if it is one.
fn filter_identifier(component: &str) -> Option<&str> {
    component
        .strip_prefix("$[")?
        .strip_suffix(']')
        .filter(|id| !id.is_empty())
}

fn parse_array_filters(
    filters: &[Document],
    ops: &[UpdateOp],
    update: &Document,
) -> CommandResult<Vec<(String, Filter)>> {
    let mut out: Vec<(String, Filter)> = Vec::with_capacity(filters.len());
    for f in filters {
        let mut names = Vec::new();
        top_level_names(f, &mut names);
        let mut ids = names.into_iter();
        let Some(id) = ids.next() else {
            return Err(err(
                ErrorCode::FailedToParse,
                "Cannot use an expression without a top-level field name in arrayFilters",
            ));
        };
        if let Some(other) = ids.find(|o| *o != id) {
            return Err(err(
                ErrorCode::FailedToParse,
                format!(
                    "Error parsing array filter :: caused by :: Expected a single top-level field name, found '{id}' and '{other}'"
                ),
            ));
        }
        let valid = id.chars().next().is_some_and(|c| c.is_ascii_lowercase())
            && id.chars().all(|c| c.is_ascii_alphanumeric());
        if !valid {
            return Err(err(
                ErrorCode::BadValue,
                format!(
                    "Error parsing array filter :: caused by :: The top-level field name must be an alphanumeric string beginning with a lowercase letter, found '{id}'"
                ),
            ));
        }
        if out.iter().any(|(existing, _)| existing == id) {
            return Err(err(
                ErrorCode::FailedToParse,
                format!("Found multiple array filters with the same top-level field name {id}"),
            ));
        }
        out.push((id.to_string(), Filter::parse(f)?));
    }
    let used = |id: &str| ops.iter().any(|op| op_identifiers(op).any(|x| x == id));
    for op in ops {
        for id in op_identifiers(op) {
            if !out.iter().any(|(known, _)| known == id) {
                return Err(err(
                    ErrorCode::BadValue,
                    format!(
                        "No array filter found for identifier '{id}' in path '{}'",
                        op.path
                    ),
                ));
            }
        }
    }
    if let Some((id, _)) = out.iter().find(|(id, _)| !used(id)) {
        return Err(err(
            ErrorCode::FailedToParse,
            format!(
                "The array filter for identifier '{id}' was not used in the update {}",
                display::document(update)
            ),
        ));
    }
    Ok(out)
}

fn op_identifiers(op: &UpdateOp) -> impl Iterator<Item = &str> {
    op.components.iter().filter_map(|c| filter_identifier(c))
}
