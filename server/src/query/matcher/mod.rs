//! The filter language of `find`, `update`, `delete`, `count` and `$match`: parsing a filter
//! document strictly (mongod's error codes and messages) into a [`Filter`] tree, and matching
//! raw documents against it without decoding them.
//!
//! Shape of the tree: logical nodes (`And`, `Or`, `Nor`, `Not`) over leaves that test one path
//! with one [`Op`]. Negative operators are rewritten into `Not` (`$ne` is `Not(Eq)`, `$nin` is
//! `Not(In)`, `$exists: false` is `Not(Exists)`) because mongod gives them whole-path meaning:
//! `{a: {$ne: 1}}` rejects `{a: [1, 2]}`. The tree is public so that a planner can read it.

mod eval;
mod geo;
mod parse;
mod regex;
mod schema;
#[cfg(test)]
mod tests;

pub use self::regex::RegexPred;
pub use geo::{
    GeoShape, NearMetric, NearSpec, Part as GeoPart, part_vertices as geo_part_vertices,
};
pub use schema::Schema;

use crate::error::CommandResult;
use crate::query::expr::Expr;
use bson::{Bson, Document, RawDocument};

/// A parsed filter.
#[derive(Debug, Clone)]
pub enum Filter {
    /// Matches when every child matches; the empty filter is `And(vec![])`.
    And(Vec<Filter>),
    Or(Vec<Filter>),
    Nor(Vec<Filter>),
    Not(Box<Filter>),
    /// One operator applied to the values a dotted path reaches. An empty path means "the value
    /// itself" (inside a value-form `$elemMatch`).
    Path {
        path: String,
        components: Vec<String>,
        op: Op,
    },
    Expr(Box<Expr>),
    Schema(Box<Schema>),
    /// `$alwaysTrue` / `$alwaysFalse`.
    Const(bool),
    /// `$text` (see `query::text`): only in the top-level conjunction.
    Text(std::sync::Arc<crate::query::text::TextQuery>),
}

/// A test on one value.
#[derive(Debug, Clone)]
pub enum Op {
    Eq(Bson),
    Gt(Bson),
    Gte(Bson),
    Lt(Bson),
    Lte(Bson),
    In {
        values: Vec<Bson>,
        regexes: Vec<RegexPred>,
    },
    Exists,
    /// `$type` codes (`"number"` already expanded).
    Type(Vec<i32>),
    Regex(RegexPred),
    Mod {
        divisor: i64,
        remainder: i64,
    },
    Size(i64),
    /// Object form: some element (a document or an array) matches the whole filter.
    ElemMatchObject(Box<Filter>),
    /// Value form: some element satisfies the tree, whose leaves have empty paths.
    ElemMatchValue(Box<Filter>),
    Bits {
        test: BitTest,
        positions: Vec<u32>,
    },
    /// `$geoWithin` (and the legacy `$within`), matched without an index.
    GeoWithin(Box<GeoShape>),
    /// `$geoIntersects {$geometry}`, in the plane of the coordinates.
    GeoIntersects(Box<Vec<geo::Part>>),
    /// `$near`/`$nearSphere`: within the distances; the executor orders by distance.
    Near(Box<NearSpec>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BitTest {
    AllSet,
    AllClear,
    AnySet,
    AnyClear,
}

/// The outcome of a match that also reports where in an array it happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatchDetails {
    /// The array position the positional `$` refers to, when the match went through an array.
    pub array_pos: Option<usize>,
}

impl Filter {
    /// Parses a filter document, strictly.
    pub fn parse(filter: &Document) -> CommandResult<Filter> {
        let f = parse::parse_filter(filter, 0)?;
        crate::query::text::check_placement(&f)?;
        Ok(f)
    }

    /// True when `doc` matches. A runtime error inside `$expr` counts as no match; use
    /// [`Filter::try_matches`] to see it.
    pub fn matches(&self, doc: &RawDocument) -> bool {
        matches!(self.try_matches(doc), Ok(Some(_)))
    }

    /// `Ok(Some(details))` when `doc` matches, `Ok(None)` when not, `Err` when an expression
    /// failed at run time (mongod fails the whole operation then).
    pub fn try_matches(&self, doc: &RawDocument) -> CommandResult<Option<MatchDetails>> {
        let mut details = MatchDetails { array_pos: None };
        if eval::eval(self, doc, &mut details)? {
            Ok(Some(details))
        } else {
            Ok(None)
        }
    }

    /// True when the single value `value` satisfies this filter as a `$pull` condition or an
    /// `$elemMatch` would: documents are matched as documents, other values against leaves
    /// with an empty path.
    pub fn matches_value(&self, value: bson::RawBsonRef<'_>) -> bool {
        eval::matches_value(self, value)
    }

    /// True for the filter that matches everything (`{}`).
    pub fn is_empty(&self) -> bool {
        matches!(self, Filter::And(children) if children.is_empty())
    }

    /// The `path == value` equalities an upsert copies into its new document: top-level
    /// equalities (`{a: 1}`, `{a: {$eq: 1}}`, a one-element `$in`) and those inside a top-level
    /// `$and`, in filter order.
    pub fn equality_fields(&self) -> Vec<(String, Bson)> {
        let mut out = Vec::new();
        collect_equalities(self, &mut out);
        out
    }
}

fn collect_equalities(filter: &Filter, out: &mut Vec<(String, Bson)>) {
    match filter {
        Filter::And(children) => children.iter().for_each(|c| collect_equalities(c, out)),
        Filter::Path {
            path,
            op: Op::Eq(v),
            ..
        } if !path.is_empty() => out.push((path.clone(), v.clone())),
        Filter::Path {
            path,
            op: Op::In { values, regexes },
            ..
        } if !path.is_empty() && values.len() == 1 && regexes.is_empty() => {
            out.push((path.clone(), values[0].clone()))
        }
        _ => {}
    }
}
