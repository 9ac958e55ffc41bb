//! `$project`, `$addFields`/`$set` and `$unset`: reshaping one document at a time.
//!
//! A specification becomes a tree keyed by field name (dotted keys are split), whose leaves
//! include, exclude or compute. Inclusion keeps the input's field order and appends computed
//! fields in specification order (a computed `_id` too, as mongod's projection executor does);
//! `_id` is kept unless excluded. Computed values are always
//! evaluated against the input document, never against the partly built output. Through
//! arrays, sub-trees apply to each element (inclusion drops non-document elements).

use super::{Stage, spec_doc};
use crate::error::CommandResult;
use crate::error::{ErrorCode, err};
use crate::query::pipeline::codes::{self, perr};
use crate::query::pipeline::run_context::RunCx;
use crate::query::pipeline::values::{split_field_path, to_raw};
use crate::query::pipeline::variables::AggExpr;
use crate::query::pipeline::{DocStream, Flow, ParseContext, RawStream};
use bson::raw::CStr;
use bson::{
    Bson, Document, RawArray, RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf,
};

#[derive(Debug)]
enum Node {
    Include,
    Exclude,
    Computed(AggExpr),
    Sub(Tree),
}

#[derive(Debug, Default)]
pub struct Tree {
    fields: Vec<(String, Node)>,
}

impl Tree {
    fn get(&self, key: &str) -> Option<&Node> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, n)| n)
    }

    /// Adds `node` at `path`, refusing a path that collides with one already there.
    fn insert(&mut self, path: &[String], node: Node, full: &str) -> CommandResult<()> {
        let Some((first, rest)) = path.split_first() else {
            return Ok(());
        };
        let collision = || {
            perr(
                codes::PROJECT_PATH_COLLISION,
                format!("Invalid specification: Path collision at {full}"),
            )
        };
        let pos = self.fields.iter().position(|(k, _)| k == first);
        if rest.is_empty() {
            if pos.is_some() {
                return Err(collision());
            }
            self.fields.push((first.clone(), node));
            return Ok(());
        }
        let index = match pos {
            Some(i) => i,
            None => {
                self.fields
                    .push((first.clone(), Node::Sub(Tree::default())));
                self.fields.len() - 1
            }
        };
        match &mut self.fields[index].1 {
            Node::Sub(sub) => sub.insert(rest, node, full),
            _ => Err(collision()),
        }
    }

    /// (has inclusions or computed fields, first excluded path other than top-level `_id`).
    fn kinds(&self, prefix: &str, top: bool) -> (Option<String>, Option<String>) {
        let (mut inc, mut exc) = (None, None);
        for (k, node) in &self.fields {
            let path = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            match node {
                Node::Include | Node::Computed(_) => {
                    inc.get_or_insert(path);
                }
                Node::Exclude if !(top && k == "_id") => {
                    exc.get_or_insert(path);
                }
                Node::Exclude => {}
                Node::Sub(sub) => {
                    let (i, e) = sub.kinds(&path, false);
                    if inc.is_none() {
                        inc = i;
                    }
                    if exc.is_none() {
                        exc = e;
                    }
                }
            }
        }
        (inc, exc)
    }
}

/// Parses a `$project` value into a tree (see the module note for the value rules).
fn parse_projection(
    spec: &Document,
    ctx: &ParseContext,
    tree: &mut Tree,
    prefix: &str,
) -> CommandResult<()> {
    for (key, value) in spec {
        let full = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        let path = split_field_path(key)?;
        let node = match value {
            Bson::Boolean(b) => flag(*b),
            Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
                flag(crate::query::types::is_truthy(value))
            }
            Bson::Document(d) if d.is_empty() => {
                return Err(perr(
                    codes::PROJECT_EMPTY_SUB,
                    format!(
                        "An empty sub-projection is not a valid value. Found empty object at path {full}"
                    ),
                ));
            }
            Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')) => {
                Node::Computed(AggExpr::parse(value, ctx)?)
            }
            Bson::Document(d) => {
                let mut sub = Tree::default();
                parse_projection(d, ctx, &mut sub, &full)?;
                Node::Sub(sub)
            }
            other => Node::Computed(AggExpr::parse(other, ctx)?),
        };
        tree.insert(&path, node, &full)?;
    }
    Ok(())
}

fn flag(include: bool) -> Node {
    if include {
        Node::Include
    } else {
        Node::Exclude
    }
}

/// Parses an `$addFields` value: everything is computed; plain sub-documents merge.
fn parse_add_fields(
    spec: &Document,
    ctx: &ParseContext,
    tree: &mut Tree,
    prefix: &str,
) -> CommandResult<()> {
    for (key, value) in spec {
        let full = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        let path = split_field_path(key)?;
        let node = match value {
            Bson::Document(d)
                if !d.is_empty() && !d.keys().next().is_some_and(|k| k.starts_with('$')) =>
            {
                let mut sub = Tree::default();
                parse_add_fields(d, ctx, &mut sub, &full)?;
                Node::Sub(sub)
            }
            other => Node::Computed(AggExpr::parse(other, ctx)?),
        };
        tree.insert(&path, node, &full)?;
    }
    Ok(())
}

/// `$project` and `$unset` (an exclusion projection).
#[derive(Debug)]
pub struct Project {
    tree: Tree,
    inclusion: bool,
}

impl Project {
    pub fn parse(spec: &Bson, ctx: &ParseContext) -> CommandResult<Project> {
        let d = spec_doc(spec, codes::PROJECT_NOT_OBJECT, "$project specification")?;
        if d.is_empty() {
            return Err(perr(
                codes::PROJECT_EMPTY,
                "Invalid $project :: caused by :: projection specification must have at least one field",
            ));
        }
        let mut tree = Tree::default();
        parse_projection(d, ctx, &mut tree, "")?;
        let (inc, exc) = tree.kinds("", true);
        if let (Some(inc), Some(exc)) = (&inc, &exc) {
            // mongod names the field whose kind disagrees with the first one it saw.
            let first_is_inclusion = d.keys().next().is_some_and(|k| inc.starts_with(k.as_str()));
            return Err(if first_is_inclusion {
                perr(
                    codes::PROJECT_EXCLUSION_IN_INCLUSION,
                    format!(
                        "Invalid $project :: caused by :: Cannot do exclusion on field {exc} in inclusion projection"
                    ),
                )
            } else {
                perr(
                    codes::PROJECT_INCLUSION_IN_EXCLUSION,
                    format!(
                        "Invalid $project :: caused by :: Cannot do inclusion on field {inc} in exclusion projection"
                    ),
                )
            });
        }
        if inc.is_some() && ctx.text_score {
            // An inclusion keeps the text score as mongod keeps metadata (`query::meta`).
            let field = crate::query::meta::TEXT_SCORE_FIELD;
            tree.insert(&[field.to_string()], Node::Include, field)?;
        }
        Ok(Project {
            inclusion: inc.is_some(),
            tree,
        })
    }

    pub fn parse_unset(spec: &Bson) -> CommandResult<Project> {
        let paths: Vec<&str> = match spec {
            Bson::String(s) => vec![s.as_str()],
            Bson::Array(items) if items.is_empty() => {
                return Err(perr(
                    codes::UNSET_EMPTY,
                    "$unset specification must be a string or an array with at least one field",
                ));
            }
            Bson::Array(items) => items
                .iter()
                .map(|i| match i {
                    Bson::String(s) => Ok(s.as_str()),
                    _ => Err(perr(
                        codes::UNSET_NOT_STRING,
                        "$unset specification must be a string or an array containing only string values",
                    )),
                })
                .collect::<CommandResult<_>>()?,
            _ => {
                return Err(perr(
                    codes::UNSET_NOT_STRING,
                    "$unset specification must be a string or an array",
                ));
            }
        };
        let mut tree = Tree::default();
        for p in paths {
            tree.insert(&split_field_path(p)?, Node::Exclude, p)?;
        }
        Ok(Project {
            tree,
            inclusion: false,
        })
    }

    fn apply(&self, doc: Document) -> CommandResult<Document> {
        if !self.inclusion {
            let mut doc = doc;
            exclude(&self.tree, &mut doc);
            return Ok(doc);
        }
        let raw = to_raw(&doc)?;
        let mut out = include(&self.tree, &doc, true);
        add_computed(&self.tree, &mut out, &raw)?;
        Ok(out)
    }
}

impl Stage for Project {
    fn run<'a>(&'a self, input: DocStream<'a>, _cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        Ok(Box::new(input.map(move |item| self.apply(item?))))
    }

    /// Raw in, raw out when no computed field sits below the top level: the output is built by
    /// copying the kept elements' bytes (sub-documents and arrays walked in place), computed
    /// top-level fields appended encoded. Otherwise each document is decoded.
    fn run_raw<'a>(&'a self, input: RawStream<'a>, cx: RunCx<'a>) -> CommandResult<Flow<'a>> {
        if self.inclusion && self.tree.computed_below_top() {
            return Ok(Flow::Docs(self.run(Flow::Raw(input).into_docs(), cx)?));
        }
        Ok(Flow::Raw(Box::new(
            input.map(move |item| self.apply_raw(&item?)),
        )))
    }

    fn push_one(&self, doc: &RawDocument) -> Option<CommandResult<RawDocumentBuf>> {
        let raw_path = !(self.inclusion && self.tree.computed_below_top());
        raw_path.then(|| self.apply_raw(doc))
    }
}

impl Project {
    fn apply_raw(&self, raw: &RawDocument) -> CommandResult<RawDocumentBuf> {
        if !self.inclusion {
            return exclude_raw(&self.tree, raw);
        }
        let flat = self
            .tree
            .is_flat()
            .then(|| include_flat(&self.tree, raw))
            .flatten();
        let mut out = match flat {
            Some(out) => out,
            None => include_raw(&self.tree, raw, true)?,
        };
        for (k, node) in &self.tree.fields {
            if let Node::Computed(e) = node
                && let Some(v) = e.eval(raw)?
            {
                let v = RawBson::try_from(v).map_err(encode_error)?;
                out.append(cstr(k)?, v);
            }
        }
        Ok(out)
    }
}

fn encode_error(e: impl std::fmt::Display) -> crate::error::CommandError {
    err(
        ErrorCode::BadValue,
        format!("document cannot be encoded: {e}"),
    )
}

fn cstr(k: &str) -> CommandResult<&CStr> {
    <&CStr>::try_from(k).map_err(encode_error)
}

/// [`include`] over a raw document: kept elements are copied as they are stored.
fn include_raw(tree: &Tree, doc: &RawDocument, top: bool) -> CommandResult<RawDocumentBuf> {
    let mut out = RawDocumentBuf::new();
    for item in doc {
        let (k, v) = item.map_err(encode_error)?;
        let node = match tree.get(k.as_str()) {
            Some(n) => n,
            None if top && k.as_str() == "_id" => &Node::Include,
            None => continue,
        };
        match (node, v) {
            (Node::Include, _) => out.append(k, v),
            (Node::Sub(sub), RawBsonRef::Document(d)) => out.append(k, include_raw(sub, d, false)?),
            (Node::Sub(sub), RawBsonRef::Array(items)) => {
                out.append(k, include_array_raw(sub, items)?)
            }
            _ => {}
        }
    }
    Ok(out)
}

/// [`include_raw`] at the top level of a tree without sub-trees: the kept elements' bytes are
/// found by `query::elements` and copied as stored into an output allocated once at its size.
/// `None` when the document's bytes do not walk; `include_raw` then reports them.
fn include_flat(tree: &Tree, doc: &RawDocument) -> Option<RawDocumentBuf> {
    let kept = |key: &[u8]| match tree.fields.iter().find(|(k, _)| k.as_bytes() == key) {
        Some((_, node)) => matches!(node, Node::Include),
        None => key == b"_id",
    };
    // One walk notes the kept elements (a few, as a projection names a few fields); a second
    // walk is needed only when more are kept than the notes hold.
    let mut notes: [&[u8]; FLAT_NOTES] = [&[]; FLAT_NOTES];
    let (mut noted, mut len) = (0usize, 5usize);
    crate::query::elements::for_each(doc, |e| {
        if kept(e.key) {
            if let Some(slot) = notes.get_mut(noted) {
                *slot = e.bytes;
            }
            noted += 1;
            len += e.bytes.len();
        }
    })?;
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&i32::try_from(len).ok()?.to_le_bytes());
    if noted <= FLAT_NOTES {
        for bytes in &notes[..noted] {
            out.extend_from_slice(bytes);
        }
    } else {
        crate::query::elements::for_each(doc, |e| {
            if kept(e.key) {
                out.extend_from_slice(e.bytes);
            }
        })?;
    }
    out.push(0);
    RawDocumentBuf::from_bytes(out).ok()
}

/// Kept elements [`include_flat`] notes in one walk.
const FLAT_NOTES: usize = 16;

/// [`include_array`] over a raw array whose tree computes nothing: non-documents are dropped.
fn include_array_raw(tree: &Tree, items: &RawArray) -> CommandResult<RawArrayBuf> {
    let mut out = RawArrayBuf::new();
    for item in items {
        match item.map_err(encode_error)? {
            RawBsonRef::Document(d) => out.push(include_raw(tree, d, false)?),
            RawBsonRef::Array(inner) => out.push(include_array_raw(tree, inner)?),
            _ => {}
        }
    }
    Ok(out)
}

/// [`exclude`] over a raw document: every other element is copied as it is stored.
fn exclude_raw(tree: &Tree, doc: &RawDocument) -> CommandResult<RawDocumentBuf> {
    let mut out = RawDocumentBuf::new();
    for item in doc {
        let (k, v) = item.map_err(encode_error)?;
        match (tree.get(k.as_str()), v) {
            (Some(Node::Exclude), _) => {}
            (Some(Node::Sub(sub)), RawBsonRef::Document(d)) => out.append(k, exclude_raw(sub, d)?),
            (Some(Node::Sub(sub)), RawBsonRef::Array(items)) => {
                out.append(k, exclude_array_raw(sub, items)?)
            }
            _ => out.append(k, v),
        }
    }
    Ok(out)
}

fn exclude_array_raw(tree: &Tree, items: &RawArray) -> CommandResult<RawArrayBuf> {
    let mut out = RawArrayBuf::new();
    for item in items {
        match item.map_err(encode_error)? {
            RawBsonRef::Document(d) => out.push(exclude_raw(tree, d)?),
            RawBsonRef::Array(inner) => out.push(exclude_array_raw(tree, inner)?),
            other => out.push(other),
        }
    }
    Ok(out)
}

/// The included fields of `doc`, in `doc`'s order.
fn include(tree: &Tree, doc: &Document, top: bool) -> Document {
    let mut out = Document::new();
    for (k, v) in doc {
        let node = match tree.get(k) {
            Some(n) => n,
            // `_id` is included unless the specification says otherwise.
            None if top && k == "_id" => &Node::Include,
            None => continue,
        };
        match (node, v) {
            (Node::Include, _) => {
                out.insert(k.clone(), v.clone());
            }
            (Node::Sub(sub), Bson::Document(d)) => {
                out.insert(k.clone(), Bson::Document(include(sub, d, false)));
            }
            (Node::Sub(sub), Bson::Array(items)) => {
                out.insert(k.clone(), Bson::Array(include_array(sub, items)));
            }
            _ => {}
        }
    }
    out
}

/// Non-document elements are dropped, unless computed fields below will turn them into
/// documents (mongod keeps a placeholder for them).
fn include_array(tree: &Tree, items: &[Bson]) -> Vec<Bson> {
    let keep_placeholders = tree.has_computed();
    items
        .iter()
        .filter_map(|item| match item {
            Bson::Document(d) => Some(Bson::Document(include(tree, d, false))),
            Bson::Array(inner) => Some(Bson::Array(include_array(tree, inner))),
            _ if keep_placeholders => Some(Bson::Document(Document::new())),
            _ => None,
        })
        .collect()
}

fn exclude(tree: &Tree, doc: &mut Document) {
    for (k, node) in &tree.fields {
        match node {
            Node::Exclude => {
                doc.remove(k);
            }
            Node::Sub(sub) => match doc.get_mut(k) {
                Some(Bson::Document(d)) => exclude(sub, d),
                Some(Bson::Array(items)) => exclude_array(sub, items),
                _ => {}
            },
            _ => {}
        }
    }
}

fn exclude_array(tree: &Tree, items: &mut [Bson]) {
    for item in items {
        match item {
            Bson::Document(d) => exclude(tree, d),
            Bson::Array(inner) => exclude_array(tree, inner),
            _ => {}
        }
    }
}

/// Writes the computed fields of `tree` into `doc`, merging into sub-documents and applying
/// through arrays; a missing result removes the field.
fn add_computed(tree: &Tree, doc: &mut Document, root: &RawDocument) -> CommandResult<()> {
    for (k, node) in &tree.fields {
        match node {
            Node::Computed(e) => match e.eval(root)? {
                Some(v) => {
                    doc.insert(k.clone(), v);
                }
                None => {
                    doc.remove(k);
                }
            },
            Node::Sub(sub) if sub.has_computed() => match doc.get_mut(k) {
                Some(Bson::Document(d)) => add_computed(sub, d, root)?,
                Some(Bson::Array(items)) => add_computed_array(sub, items, root)?,
                _ => {
                    let mut d = Document::new();
                    add_computed(sub, &mut d, root)?;
                    doc.insert(k.clone(), Bson::Document(d));
                }
            },
            _ => {}
        }
    }
    Ok(())
}

fn add_computed_array(tree: &Tree, items: &mut [Bson], root: &RawDocument) -> CommandResult<()> {
    for item in items {
        match item {
            Bson::Document(d) => add_computed(tree, d, root)?,
            Bson::Array(inner) => add_computed_array(tree, inner, root)?,
            other => {
                let mut d = Document::new();
                add_computed(tree, &mut d, root)?;
                *other = Bson::Document(d);
            }
        }
    }
    Ok(())
}

impl Tree {
    /// True when no field has a sub-tree (`a.b` or `a: {b: 1}`): inclusion is then a filter
    /// on top-level keys.
    fn is_flat(&self) -> bool {
        self.fields.iter().all(|(_, n)| !matches!(n, Node::Sub(_)))
    }

    /// True when a sub-tree computes a field (the raw `$project` handles top-level ones only).
    fn computed_below_top(&self) -> bool {
        self.fields
            .iter()
            .any(|(_, n)| matches!(n, Node::Sub(s) if s.has_computed()))
    }

    fn has_computed(&self) -> bool {
        self.fields.iter().any(|(_, n)| match n {
            Node::Computed(_) => true,
            Node::Sub(s) => s.has_computed(),
            _ => false,
        })
    }
}

/// `$addFields` / `$set`.
#[derive(Debug)]
pub struct AddFields {
    tree: Tree,
}

impl AddFields {
    pub fn parse(name: &str, spec: &Bson, ctx: &ParseContext) -> CommandResult<AddFields> {
        let d = spec_doc(
            spec,
            codes::ADD_FIELDS_NOT_OBJECT,
            &format!("{name} specification stage"),
        )?;
        if d.is_empty() {
            return Err(perr(
                codes::ADD_FIELDS_EMPTY,
                format!(
                    "Invalid {name} :: caused by :: specification must have at least one field"
                ),
            ));
        }
        let mut tree = Tree::default();
        parse_add_fields(d, ctx, &mut tree, "")?;
        Ok(AddFields { tree })
    }

    fn apply(&self, mut doc: Document) -> CommandResult<Document> {
        let raw = to_raw(&doc)?;
        add_computed(&self.tree, &mut doc, &raw)?;
        Ok(doc)
    }
}

impl Stage for AddFields {
    fn run<'a>(&'a self, input: DocStream<'a>, _cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        Ok(Box::new(input.map(move |item| self.apply(item?))))
    }

    /// Raw in, raw out when every field set is a top-level one: the input's elements are
    /// copied as stored, a set field replaces its element in place (or is appended), a
    /// missing result drops it. Fields set inside sub-documents decode the document.
    fn run_raw<'a>(&'a self, input: RawStream<'a>, cx: RunCx<'a>) -> CommandResult<Flow<'a>> {
        if self.tree.computed_below_top() {
            return Ok(Flow::Docs(self.run(Flow::Raw(input).into_docs(), cx)?));
        }
        Ok(Flow::Raw(Box::new(
            input.map(move |item| self.apply_raw(&item?)),
        )))
    }
}

impl AddFields {
    fn apply_raw(&self, raw: &RawDocument) -> CommandResult<RawDocumentBuf> {
        // Every value is computed from the input document, before any is written.
        let mut values: Vec<(&str, Option<Option<Bson>>)> = Vec::new();
        for (k, node) in &self.tree.fields {
            if let Node::Computed(e) = node {
                values.push((k.as_str(), Some(e.eval(raw)?)));
            }
        }
        let mut out = RawDocumentBuf::new();
        for item in raw {
            let (k, v) = item.map_err(encode_error)?;
            match values.iter_mut().find(|(name, _)| *name == k.as_str()) {
                Some((_, slot)) => {
                    if let Some(Some(value)) = slot.take() {
                        out.append(k, RawBson::try_from(value).map_err(encode_error)?);
                    }
                }
                None => out.append(k, v),
            }
        }
        for (k, slot) in values {
            if let Some(Some(value)) = slot {
                out.append(cstr(k)?, RawBson::try_from(value).map_err(encode_error)?);
            }
        }
        Ok(out)
    }
}
