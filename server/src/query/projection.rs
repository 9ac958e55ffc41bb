//! Find projections (`find`'s `projection`, `findAndModify`'s `fields`): inclusion or exclusion
//! of dotted paths (through arrays), `_id` rules, `$slice`, `$elemMatch`, the positional
//! `field.$`, and computed fields through the expression language. A projection is either an
//! inclusion or an exclusion; mixing is an error with mongod's codes. The input is a raw stored
//! document; the output is a new owned document.

use crate::error::{CommandResult, ErrorCode, err};
use crate::query::expr::Expr;
use crate::query::matcher::Filter;
use crate::query::types;
use bson::{Bson, Document, RawDocument, RawDocumentBuf, doc};

/// What a projection does to one path.
#[derive(Debug, Clone)]
enum Node {
    Include,
    Exclude,
    Computed(Expr),
    Slice {
        skip: Option<i64>,
        limit: i64,
    },
    /// Keeps the first element matching the filter (`{<field>: {$elemMatch: ...}}`).
    ElemMatch(Box<Filter>),
    /// `field.$`: the element at the matched array position.
    Positional,
    Children(Vec<(String, Node)>),
}

/// A parsed projection.
#[derive(Debug, Clone)]
pub struct Projection {
    nodes: Vec<(String, Node)>,
    /// Top-level fields set to the text score (`{f: {$meta: "textScore"}}`); they make the
    /// projection neither an inclusion nor an exclusion.
    text_score: Vec<String>,
    inclusion: bool,
    id_included: bool,
}

/// Whether a node forces inclusion (`Some(true)`), exclusion (`Some(false)`), or neither.
fn kind(node: &Node) -> Option<bool> {
    match node {
        Node::Include | Node::Computed(_) | Node::Positional => Some(true),
        Node::Exclude => Some(false),
        Node::Slice { .. } | Node::ElemMatch(_) => None,
        Node::Children(c) => c.iter().find_map(|(_, n)| kind(n)),
    }
}

fn parse_value(path: &str, v: &Bson) -> CommandResult<Node> {
    match v {
        Bson::Boolean(b) => Ok(if *b { Node::Include } else { Node::Exclude }),
        v if types::is_number(v) => Ok(if types::as_f64(v).is_some_and(|d| d != 0.0) {
            Node::Include
        } else {
            Node::Exclude
        }),
        Bson::Document(d) => match d.keys().next().map(String::as_str) {
            None => Err(err(
                ErrorCode::BadValue,
                format!(
                    "An empty sub-projection is not a valid value. Found empty object at path {path}"
                ),
            )),
            Some("$slice") => parse_slice(d.get("$slice").unwrap_or(&Bson::Null)),
            Some("$elemMatch") => {
                if path.contains('.') {
                    return Err(err(
                        ErrorCode::Location31275,
                        "Cannot use $elemMatch projection on a nested field.",
                    ));
                }
                let spec = d.get("$elemMatch").cloned().unwrap_or(Bson::Null);
                Ok(Node::ElemMatch(Box::new(Filter::parse(
                    &doc! {"v": {"$elemMatch": spec}},
                )?)))
            }
            Some("$meta") => Err(err(
                ErrorCode::NotImplemented,
                format!("$meta projection on '{path}' is not supported yet"),
            )),
            Some(k) if k.starts_with('$') => Ok(Node::Computed(Expr::parse(v)?)),
            Some(_) => {
                let mut children = Vec::new();
                for (k, sub) in d {
                    insert(
                        &mut children,
                        path,
                        k,
                        parse_value(&format!("{path}.{k}"), sub)?,
                    )?;
                }
                Ok(Node::Children(children))
            }
        },
        // Strings, arrays and other literals are expressions in 4.4+ find projections.
        other => Ok(Node::Computed(Expr::parse(other)?)),
    }
}

fn parse_slice(v: &Bson) -> CommandResult<Node> {
    let int = |v: &Bson| {
        types::as_f64(v)
            .filter(|d| d.is_finite())
            .map(|d| d.trunc() as i64)
    };
    match v {
        Bson::Array(items) if items.len() == 2 => {
            let (Some(skip), Some(limit)) = (int(&items[0]), int(&items[1])) else {
                return Err(err(
                    ErrorCode::BadValue,
                    "$slice only supports numbers and [skip, limit] arrays",
                ));
            };
            if limit <= 0 {
                return Err(err(
                    ErrorCode::Location28724,
                    format!("$slice limit must be positive, got {limit}"),
                ));
            }
            Ok(Node::Slice {
                skip: Some(skip),
                limit,
            })
        }
        v => match int(v) {
            Some(limit) => Ok(Node::Slice { skip: None, limit }),
            None => Err(err(
                ErrorCode::BadValue,
                "$slice only supports numbers and [skip, limit] arrays",
            )),
        },
    }
}

/// Inserts `node` at the dotted `path` below `nodes`, detecting path collisions.
fn insert(
    nodes: &mut Vec<(String, Node)>,
    prefix: &str,
    path: &str,
    node: Node,
) -> CommandResult<()> {
    let full = if prefix.is_empty() {
        path.to_string()
    } else {
        format!("{prefix}.{path}")
    };
    let (head, rest) = match path.split_once('.') {
        Some((h, r)) => (h, Some(r)),
        None => (path, None),
    };
    let existing = nodes.iter_mut().position(|(k, _)| k == head);
    match (existing, rest) {
        (None, None) => nodes.push((head.to_string(), node)),
        (None, Some(r)) => {
            let mut children = Vec::new();
            insert(&mut children, "", r, node)?;
            nodes.push((head.to_string(), Node::Children(children)));
        }
        (Some(i), Some(r)) => match &mut nodes[i].1 {
            Node::Children(children) => insert(children, "", r, node)?,
            _ => {
                return Err(err(
                    ErrorCode::Location31250,
                    format!("Path collision at {full} remaining portion {r}"),
                ));
            }
        },
        (Some(_), None) => {
            return Err(err(
                ErrorCode::Location31249,
                format!("Path collision at {full}"),
            ));
        }
    }
    Ok(())
}

impl Projection {
    pub fn parse(spec: &Document) -> CommandResult<Projection> {
        let mut nodes = Vec::new();
        let mut positional = 0;
        let mut text_score = Vec::new();
        for (key, v) in spec {
            if crate::query::sort::is_text_score(v) && !key.starts_with('$') && !key.contains('.') {
                text_score.push(key.clone());
                continue;
            }
            if let Some(base) = key.strip_suffix(".$") {
                if base.split('.').any(|c| c == "$" || c.is_empty())
                    || !types::as_f64(v).is_some_and(|d| d != 0.0)
                        && !matches!(v, Bson::Boolean(true))
                {
                    return Err(err(
                        ErrorCode::BadValue,
                        format!(
                            "positional projection '{key}' must be an inclusion of a path ending in '.$'"
                        ),
                    ));
                }
                positional += 1;
                insert(&mut nodes, "", base, Node::Positional)?;
                continue;
            }
            if key.is_empty()
                || key.starts_with('$')
                || key.split('.').any(|c| c.is_empty() || c == "$")
            {
                return Err(err(
                    ErrorCode::BadValue,
                    format!("Invalid projection field name '{key}'"),
                ));
            }
            insert(&mut nodes, "", key, parse_value(key, v)?)?;
        }
        if positional > 1 {
            return Err(err(
                ErrorCode::Location31276,
                "Cannot specify more than one positional proj. per query.",
            ));
        }
        let mut p = Self::classify(nodes)?;
        p.text_score = text_score;
        Ok(p)
    }

    /// Whether the projection asks for `{$meta: "textScore"}`.
    pub fn wants_text_score(&self) -> bool {
        !self.text_score.is_empty()
    }

    /// [`Projection::apply_raw`], then the text-score fields set to `score`.
    pub fn apply_scored(
        &self,
        doc: &RawDocument,
        positional: Option<usize>,
        score: f64,
    ) -> CommandResult<RawDocumentBuf> {
        let raw = self.apply_raw(doc, positional)?;
        if self.text_score.is_empty() {
            return Ok(raw);
        }
        let internal = |e: bson::error::Error| err(ErrorCode::InternalError, e.to_string());
        let mut d = Document::try_from(raw.as_ref()).map_err(internal)?;
        for f in &self.text_score {
            d.insert(f.clone(), score);
        }
        RawDocumentBuf::try_from(&d).map_err(internal)
    }

    /// Decides inclusion vs exclusion, refusing mixtures (only `_id` may differ).
    fn classify(mut nodes: Vec<(String, Node)>) -> CommandResult<Projection> {
        let id_pos = nodes.iter().position(|(k, _)| k == "_id");
        let id_node = id_pos.map(|i| nodes.remove(i).1);
        let mut mode: Option<(bool, String)> = None;
        for (k, n) in &nodes {
            check_mode(k, n, &mut mode)?;
        }
        // `{_id: 1}` alone is an inclusion of `_id` only.
        let inclusion = mode
            .as_ref()
            .map_or(matches!(id_node, Some(Node::Include)), |(m, _)| *m);
        let id_included = !matches!(id_node, Some(Node::Exclude));
        match id_node {
            Some(Node::Include) | Some(Node::Exclude) | None => {}
            // `_id` with a sub-projection, slice or expression behaves like any other field.
            Some(other) => {
                if !inclusion && kind(&other) == Some(true) && mode.is_some() {
                    return Err(err(
                        ErrorCode::Location31253,
                        "Cannot do inclusion on field _id in exclusion projection",
                    ));
                }
                nodes.insert(0, ("_id".to_string(), other));
                let inclusion = inclusion || mode.is_none() && kind(&nodes[0].1) == Some(true);
                return Ok(Projection {
                    nodes,
                    text_score: Vec::new(),
                    inclusion,
                    id_included: true,
                });
            }
        }
        Ok(Projection {
            nodes,
            text_score: Vec::new(),
            inclusion,
            id_included,
        })
    }

    /// True when this is an inclusion projection (fields not named are dropped).
    pub fn is_inclusion(&self) -> bool {
        self.inclusion
    }

    /// Projects `doc` into an owned document. `positional` is the matched array position from
    /// the filter (for `.$`).
    pub fn apply(&self, doc: &RawDocument, positional: Option<usize>) -> CommandResult<Document> {
        let raw = self.apply_raw(doc, positional)?;
        Document::try_from(raw.as_ref()).map_err(|e| err(ErrorCode::InternalError, e.to_string()))
    }

    /// Projects `doc` straight into raw BSON: included fields are copied as bytes, never decoded.
    pub fn apply_raw(
        &self,
        doc: &RawDocument,
        positional: Option<usize>,
    ) -> CommandResult<RawDocumentBuf> {
        apply::project(self, doc, positional)
    }
}

fn check_mode(path: &str, n: &Node, mode: &mut Option<(bool, String)>) -> CommandResult<()> {
    if let Node::Children(children) = n {
        for (k, c) in children {
            check_mode(&format!("{path}.{k}"), c, mode)?;
        }
        return Ok(());
    }
    let Some(k) = kind(n) else { return Ok(()) };
    match mode {
        None => *mode = Some((k, path.to_string())),
        Some((true, _)) if !k => {
            return Err(err(
                ErrorCode::Location31254,
                format!("Cannot do exclusion on field {path} in inclusion projection"),
            ));
        }
        Some((false, _)) if k => {
            return Err(err(
                ErrorCode::Location31253,
                format!("Cannot do inclusion on field {path} in exclusion projection"),
            ));
        }
        _ => {}
    }
    Ok(())
}

mod apply;

#[cfg(test)]
#[path = "projection_tests.rs"]
mod tests;
