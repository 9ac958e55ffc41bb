//! Find projections (`find`'s `projection`, `findAndModify`'s `fields`): inclusion or exclusion
//! of dotted paths (through arrays), `_id` rules, `$slice`, `$elemMatch`, the positional
//! `field.$`, and computed fields through the expression language. A projection is either an
//! inclusion or an exclusion; mixing is an error with mongod's codes. The input is a raw stored
//! document; the output is a new owned document.

use crate::error::{CommandResult, ErrorCode, err};
use crate::query::expr::Expr;
use crate::query::matcher::Filter;
use crate::query::types;
use bson::{Bson, Document, RawBsonRef, RawDocument, doc};

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
        for (key, v) in spec {
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
        Self::classify(nodes)
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
                    inclusion,
                    id_included: true,
                });
            }
        }
        Ok(Projection {
            nodes,
            inclusion,
            id_included,
        })
    }

    /// True when this is an inclusion projection (fields not named are dropped).
    pub fn is_inclusion(&self) -> bool {
        self.inclusion
    }

    /// Projects `doc`. `positional` is the matched array position from the filter (for `.$`).
    pub fn apply(&self, doc: &RawDocument, positional: Option<usize>) -> CommandResult<Document> {
        let ctx = Ctx {
            root: doc,
            positional,
        };
        if self.inclusion {
            let mut out = Document::new();
            if self.id_included
                && !self.nodes.iter().any(|(k, _)| k == "_id")
                && let Some(id) = doc.get("_id").ok().flatten()
            {
                out.insert("_id", types::to_owned(id));
            }
            include_into(&ctx, doc, &self.nodes, &mut out)?;
            Ok(out)
        } else {
            let mut out = exclude_doc(&ctx, doc, &self.nodes)?;
            if !self.id_included {
                out.remove("_id");
            }
            Ok(out)
        }
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

struct Ctx<'a> {
    root: &'a RawDocument,
    positional: Option<usize>,
}

fn include_into(
    ctx: &Ctx<'_>,
    doc: &RawDocument,
    nodes: &[(String, Node)],
    out: &mut Document,
) -> CommandResult<()> {
    for (k, v) in doc.iter().map_while(Result::ok) {
        let Some((_, node)) = nodes.iter().find(|(name, _)| name == k.as_str()) else {
            continue;
        };
        if let Some(projected) = project_included(ctx, v, node)? {
            out.insert(k.as_str(), projected);
        }
    }
    // Computed fields come after the copied ones, in the order the projection names them.
    for (name, node) in nodes {
        match node {
            Node::Computed(e) => {
                if let Some(v) = e.evaluate_value(ctx.root)? {
                    out.insert(name.clone(), v);
                }
            }
            Node::Children(c) if has_computed(c) && !out.contains_key(name) => {
                out.insert(name.clone(), computed_only(ctx, c)?);
            }
            _ => {}
        }
    }
    Ok(())
}

/// The computed fields below a path the document lacks (mongod creates the parents).
fn computed_only(ctx: &Ctx<'_>, nodes: &[(String, Node)]) -> CommandResult<Document> {
    let mut out = Document::new();
    for (name, node) in nodes {
        match node {
            Node::Computed(e) => {
                if let Some(v) = e.evaluate_value(ctx.root)? {
                    out.insert(name.clone(), v);
                }
            }
            Node::Children(c) if has_computed(c) => {
                out.insert(name.clone(), computed_only(ctx, c)?);
            }
            _ => {}
        }
    }
    Ok(out)
}

fn has_computed(nodes: &[(String, Node)]) -> bool {
    nodes.iter().any(|(_, n)| match n {
        Node::Computed(_) => true,
        Node::Children(c) => has_computed(c),
        _ => false,
    })
}

/// The projected value of a field under an inclusion node, or `None` to drop it.
fn project_included(ctx: &Ctx<'_>, v: RawBsonRef<'_>, node: &Node) -> CommandResult<Option<Bson>> {
    Ok(match node {
        Node::Include => Some(types::to_owned(v)),
        Node::Children(c) => match v {
            RawBsonRef::Document(d) => {
                let mut sub = Document::new();
                include_into(ctx, d, c, &mut sub)?;
                Some(Bson::Document(sub))
            }
            RawBsonRef::Array(a) => Some(Bson::Array(include_array(ctx, a, c)?)),
            _ => None,
        },
        Node::Computed(_) | Node::Exclude => None,
        other => special(ctx, v, other)?,
    })
}

fn include_array(
    ctx: &Ctx<'_>,
    a: &bson::RawArray,
    c: &[(String, Node)],
) -> CommandResult<Vec<Bson>> {
    let mut out = Vec::new();
    for e in a.into_iter().map_while(Result::ok) {
        match e {
            RawBsonRef::Document(d) => {
                let mut sub = Document::new();
                include_into(ctx, d, c, &mut sub)?;
                out.push(Bson::Document(sub));
            }
            RawBsonRef::Array(inner) => out.push(Bson::Array(include_array(ctx, inner, c)?)),
            _ => {}
        }
    }
    Ok(out)
}

/// `$slice`, `$elemMatch` and positional nodes, shared by both modes.
fn special(ctx: &Ctx<'_>, v: RawBsonRef<'_>, node: &Node) -> CommandResult<Option<Bson>> {
    Ok(match (node, v) {
        (Node::Slice { skip, limit }, RawBsonRef::Array(a)) => {
            let items: Vec<Bson> = a
                .into_iter()
                .map_while(Result::ok)
                .map(types::to_owned)
                .collect();
            Some(Bson::Array(slice(items, *skip, *limit)))
        }
        (Node::Slice { .. }, other) => Some(types::to_owned(other)),
        (Node::ElemMatch(f), RawBsonRef::Array(_)) => {
            let wrapper = bson::RawDocumentBuf::try_from(&doc! {"v": types::to_owned(v)})
                .map_err(|e| err(ErrorCode::InternalError, e.to_string()))?;
            match f.try_matches(&wrapper)?.and_then(|d| d.array_pos) {
                Some(i) => match v {
                    RawBsonRef::Array(a) => a
                        .get(i)
                        .ok()
                        .flatten()
                        .map(|e| Bson::Array(vec![types::to_owned(e)])),
                    _ => None,
                },
                None => None,
            }
        }
        (Node::ElemMatch(_), _) => None,
        (Node::Positional, RawBsonRef::Array(a)) => {
            let element = ctx.positional.and_then(|i| a.get(i).ok().flatten());
            match element {
                Some(e) => Some(Bson::Array(vec![types::to_owned(e)])),
                None => {
                    return Err(err(
                        ErrorCode::Location51246,
                        "Executor error during find command :: caused by :: positional operator '.$' couldn't find a matching element in the array",
                    ));
                }
            }
        }
        (Node::Positional, other) => Some(types::to_owned(other)),
        _ => None,
    })
}

fn slice(items: Vec<Bson>, skip: Option<i64>, limit: i64) -> Vec<Bson> {
    let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
    let (start, count) = match skip {
        None if limit >= 0 => (0, limit),
        None => ((len + limit).max(0), len),
        Some(s) if s >= 0 => (s.min(len), limit),
        Some(s) => ((len + s).max(0), limit),
    };
    let start = usize::try_from(start).unwrap_or(usize::MAX);
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    items.into_iter().skip(start).take(count).collect()
}

fn exclude_doc(
    ctx: &Ctx<'_>,
    doc: &RawDocument,
    nodes: &[(String, Node)],
) -> CommandResult<Document> {
    let mut out = Document::new();
    for (k, v) in doc.iter().map_while(Result::ok) {
        let node = nodes
            .iter()
            .find(|(name, _)| name == k.as_str())
            .map(|(_, n)| n);
        let projected = match (node, v) {
            (None, v) => Some(types::to_owned(v)),
            (Some(Node::Exclude), _) => None,
            (Some(Node::Children(c)), RawBsonRef::Document(d)) => {
                Some(Bson::Document(exclude_doc(ctx, d, c)?))
            }
            (Some(Node::Children(c)), RawBsonRef::Array(a)) => {
                Some(Bson::Array(exclude_array(ctx, a, c)?))
            }
            (Some(Node::Children(_)), v) => Some(types::to_owned(v)),
            (Some(other), v) => special(ctx, v, other)?,
        };
        if let Some(p) = projected {
            out.insert(k.as_str(), p);
        }
    }
    Ok(out)
}

fn exclude_array(
    ctx: &Ctx<'_>,
    a: &bson::RawArray,
    c: &[(String, Node)],
) -> CommandResult<Vec<Bson>> {
    let mut out = Vec::new();
    for e in a.into_iter().map_while(Result::ok) {
        out.push(match e {
            RawBsonRef::Document(d) => Bson::Document(exclude_doc(ctx, d, c)?),
            RawBsonRef::Array(inner) => Bson::Array(exclude_array(ctx, inner, c)?),
            other => types::to_owned(other),
        });
    }
    Ok(out)
}

#[cfg(test)]
#[path = "projection_tests.rs"]
mod tests;
