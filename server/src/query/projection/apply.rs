//! Applying a parsed projection to a raw stored document, producing raw BSON. Fields that are
//! kept whole are copied as bytes; only values a projection computes or reshapes (`$slice`,
//! `$elemMatch`, positional, expressions) pass through owned `Bson`.

use super::{Node, Projection};
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::types;
use bson::raw::{CStr, RawArray, RawArrayBuf, RawBson};
use bson::{Bson, Document, RawBsonRef, RawDocument, RawDocumentBuf, doc};

struct Ctx<'a> {
    root: &'a RawDocument,
    positional: Option<usize>,
}

fn internal(e: impl std::fmt::Display) -> crate::error::CommandError {
    err(ErrorCode::InternalError, e.to_string())
}

fn key(name: &str) -> CommandResult<&CStr> {
    <&CStr>::try_from(name).map_err(internal)
}

fn raw_value(v: Bson) -> CommandResult<RawBson> {
    RawBson::try_from(v).map_err(internal)
}

pub(super) fn project(
    p: &Projection,
    doc: &RawDocument,
    positional: Option<usize>,
) -> CommandResult<RawDocumentBuf> {
    let ctx = Ctx {
        root: doc,
        positional,
    };
    let mut out = RawDocumentBuf::new();
    if p.inclusion {
        if p.id_included
            && !p.nodes.iter().any(|(k, _)| k == "_id")
            && let Some(id) = doc.get("_id").ok().flatten()
        {
            out.append(key("_id")?, id);
        }
        include_into(&ctx, doc, &p.nodes, &mut out)?;
    } else {
        exclude_into(&ctx, doc, &p.nodes, !p.id_included, &mut out)?;
    }
    Ok(out)
}

fn find<'n>(nodes: &'n [(String, Node)], name: &str) -> Option<&'n Node> {
    nodes.iter().find(|(k, _)| k == name).map(|(_, n)| n)
}

fn include_into(
    ctx: &Ctx<'_>,
    doc: &RawDocument,
    nodes: &[(String, Node)],
    out: &mut RawDocumentBuf,
) -> CommandResult<()> {
    for (k, v) in doc.iter().map_while(Result::ok) {
        let Some(node) = find(nodes, k.as_str()) else {
            continue;
        };
        match (node, v) {
            (Node::Include, v) => out.append(k, v),
            (Node::Children(c), RawBsonRef::Document(d)) => {
                let mut sub = RawDocumentBuf::new();
                include_into(ctx, d, c, &mut sub)?;
                out.append(k, sub);
            }
            (Node::Children(c), RawBsonRef::Array(a)) => out.append(k, include_array(ctx, a, c)?),
            (Node::Children(_) | Node::Computed(_) | Node::Exclude, _) => {}
            (other, v) => {
                if let Some(p) = special(ctx, v, other)? {
                    out.append(k, raw_value(p)?);
                }
            }
        }
    }
    // Computed fields come after the copied ones, in the order the projection names them.
    for (name, node) in nodes {
        match node {
            Node::Computed(e) => {
                if let Some(v) = e.evaluate_value(ctx.root)? {
                    out.append(key(name)?, raw_value(v)?);
                }
            }
            Node::Children(c) if has_computed(c) && out.get(name).ok().flatten().is_none() => {
                out.append(
                    key(name)?,
                    raw_value(Bson::Document(computed_only(ctx, c)?))?,
                );
            }
            _ => {}
        }
    }
    Ok(())
}

fn include_array(ctx: &Ctx<'_>, a: &RawArray, c: &[(String, Node)]) -> CommandResult<RawArrayBuf> {
    let mut out = RawArrayBuf::new();
    for e in a.into_iter().map_while(Result::ok) {
        match e {
            RawBsonRef::Document(d) => {
                let mut sub = RawDocumentBuf::new();
                include_into(ctx, d, c, &mut sub)?;
                out.push(sub);
            }
            RawBsonRef::Array(inner) => out.push(include_array(ctx, inner, c)?),
            _ => {}
        }
    }
    Ok(out)
}

fn exclude_into(
    ctx: &Ctx<'_>,
    doc: &RawDocument,
    nodes: &[(String, Node)],
    drop_id: bool,
    out: &mut RawDocumentBuf,
) -> CommandResult<()> {
    for (k, v) in doc.iter().map_while(Result::ok) {
        if drop_id && k.as_str() == "_id" {
            continue;
        }
        match (find(nodes, k.as_str()), v) {
            (None, v) => out.append(k, v),
            (Some(Node::Exclude), _) => {}
            (Some(Node::Children(c)), RawBsonRef::Document(d)) => {
                let mut sub = RawDocumentBuf::new();
                exclude_into(ctx, d, c, false, &mut sub)?;
                out.append(k, sub);
            }
            (Some(Node::Children(c)), RawBsonRef::Array(a)) => {
                out.append(k, exclude_array(ctx, a, c)?)
            }
            (Some(Node::Children(_)), v) => out.append(k, v),
            (Some(other), v) => {
                if let Some(p) = special(ctx, v, other)? {
                    out.append(k, raw_value(p)?);
                }
            }
        }
    }
    Ok(())
}

fn exclude_array(ctx: &Ctx<'_>, a: &RawArray, c: &[(String, Node)]) -> CommandResult<RawArrayBuf> {
    let mut out = RawArrayBuf::new();
    for e in a.into_iter().map_while(Result::ok) {
        match e {
            RawBsonRef::Document(d) => {
                let mut sub = RawDocumentBuf::new();
                exclude_into(ctx, d, c, false, &mut sub)?;
                out.push(sub);
            }
            RawBsonRef::Array(inner) => out.push(exclude_array(ctx, inner, c)?),
            other => out.push(other),
        }
    }
    Ok(out)
}

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
