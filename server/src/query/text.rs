//! `$text`: the `$search` string (terms, "phrases", -negations), `$language`, `$caseSensitive`
//! and `$diacriticSensitive`, and the test of one document against them.
//!
//! A `$text` query only means something against a collection's text index (its fields,
//! weights and languages), so a parsed query is *bound* to that index's `TextSpec` before it
//! matches anything (`planner::choose` binds it; the binding is shared by every clone of the
//! filter). An unbound query refuses to match with mongod's 27 "text index required".
//!
//! Matching, as mongod: a document matches when it has at least one positive term (the words of
//! the search and of its non-negated phrases), contains every phrase and no negated term or
//! phrase. Terms are compared after the tokenizer's folding and stemming (query words in the
//! query's language, document words in the document's); phrases are substrings of one indexed
//! string, compared case- and diacritic-insensitively unless the query asks otherwise.
//! `$text` may appear once, in the top-level conjunction of a filter.

use crate::error::{CommandResult, ErrorCode, err};
use crate::query::matcher::{Filter, Op};
use bson::{Bson, Document, RawDocument, doc};
use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, OnceLock};
use storage::text::language::{self, Language};
use storage::text::tokenize::{self, Fold};
use storage::text::{TEXT_INDEX_VERSION, TextSpec};

/// The pieces of a `$search` string, as written (not yet folded or stemmed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Search {
    pub words: Vec<String>,
    pub negated_words: Vec<String>,
    pub phrases: Vec<String>,
    pub negated_phrases: Vec<String>,
}

/// A parsed `$text` operand.
#[derive(Debug)]
pub struct TextQuery {
    pub search: Search,
    pub language: Option<&'static Language>,
    pub fold: Fold,
    bound: OnceLock<Bound>,
}

/// A query tied to one text index.
#[derive(Debug)]
pub struct Bound {
    pub index_name: String,
    pub spec: TextSpec,
    /// Index terms to read (default folding, query language), sorted, unique.
    pub lookup: Vec<String>,
    positive: HashSet<String>,
    negative: HashSet<String>,
}

fn bad(msg: impl Into<String>) -> crate::error::CommandError {
    err(ErrorCode::BadValue, msg)
}

/// The error of a `$text` query on a collection without a text index.
pub fn no_index_error() -> crate::error::CommandError {
    err(
        ErrorCode::IndexNotFound,
        "text index required for $text query",
    )
}

fn unsupported_language(name: &str) -> crate::error::CommandError {
    bad(format!(
        "unsupported language: \"{name}\" for text index version {TEXT_INDEX_VERSION}"
    ))
}

impl TextQuery {
    /// Parses the value of `$text`.
    pub fn parse(value: &Bson) -> CommandResult<TextQuery> {
        let Bson::Document(d) = value else {
            return Err(bad("$text expects an object"));
        };
        let mut search = None;
        let mut language = None;
        let mut fold = Fold::default();
        for (k, v) in d {
            match (k.as_str(), v) {
                ("$search", Bson::String(s)) => search = Some(parse_search(s)),
                ("$search", _) => return Err(bad("$search requires a string value")),
                ("$language", Bson::String(s)) => {
                    language = Some(language::lookup(s).ok_or_else(|| unsupported_language(s))?)
                }
                ("$language", _) => return Err(bad("$language requires a string value")),
                ("$caseSensitive", Bson::Boolean(b)) => fold.case_sensitive = *b,
                ("$caseSensitive", _) => {
                    return Err(bad("$caseSensitive requires a boolean value"));
                }
                ("$diacriticSensitive", Bson::Boolean(b)) => fold.diacritic_sensitive = *b,
                ("$diacriticSensitive", _) => {
                    return Err(bad("$diacriticSensitive requires a boolean value"));
                }
                _ => return Err(bad(format!("extra fields in $text: {k}"))),
            }
        }
        let search = search.ok_or_else(|| bad("$search required for $text"))?;
        Ok(TextQuery {
            search,
            language,
            fold,
            bound: OnceLock::new(),
        })
    }

    /// Ties the query to the collection's text index (the first binding stays).
    pub fn bind(&self, index_name: &str, spec: TextSpec) {
        let language = self.language.unwrap_or(spec.default_language);
        let positive_words: Vec<&str> = self
            .search
            .words
            .iter()
            .map(String::as_str)
            .chain(self.search.phrases.iter().flat_map(|p| tokenize::words(p)))
            .collect();
        let negative_words: Vec<&str> = self
            .search
            .negated_words
            .iter()
            .map(String::as_str)
            .collect();
        let terms_of = |words: &[&str], fold: Fold| -> BTreeSet<String> {
            words
                .iter()
                .filter_map(|w| tokenize::term(w, language, fold))
                .collect()
        };
        let lookup = terms_of(&positive_words, Fold::default());
        let positive = terms_of(&positive_words, self.fold);
        let negative = terms_of(&negative_words, self.fold);
        let _ = self.bound.set(Bound {
            index_name: index_name.to_string(),
            spec,
            lookup: lookup.into_iter().collect(),
            positive: positive.into_iter().collect(),
            negative: negative.into_iter().collect(),
        });
    }

    /// Whether every document holding one of the lookup terms matches: no phrases, no
    /// negations, default folding (then the index's candidates need no second look).
    pub fn index_decides(&self) -> bool {
        self.search.phrases.is_empty()
            && self.search.negated_phrases.is_empty()
            && self.search.negated_words.is_empty()
            && self.fold == Fold::default()
    }

    pub fn bound(&self) -> Option<&Bound> {
        self.bound.get()
    }

    /// Whether `doc` satisfies the query (27 when the query was never bound to an index).
    pub fn matches(&self, doc: &RawDocument) -> CommandResult<bool> {
        let b = self.bound().ok_or_else(no_index_error)?;
        if b.positive.is_empty() {
            return Ok(false);
        }
        let doc_language = b.spec.language_of(doc).unwrap_or(b.spec.default_language);
        let texts = b.spec.texts(doc);
        let mut terms = HashSet::new();
        for (text, _) in &texts {
            terms.extend(tokenize::terms(text, doc_language, self.fold));
        }
        if !b.positive.iter().any(|t| terms.contains(t))
            || b.negative.iter().any(|t| terms.contains(t))
        {
            return Ok(false);
        }
        let folded: Vec<String> = texts
            .iter()
            .map(|(t, _)| tokenize::fold_text(t, self.fold))
            .collect();
        let has = |phrase: &String| {
            let p = tokenize::fold_text(phrase, self.fold);
            folded.iter().any(|t| t.contains(&p))
        };
        Ok(self.search.phrases.iter().all(has) && !self.search.negated_phrases.iter().any(has))
    }

    /// explain's `parsedTextQuery`.
    pub fn explain(&self) -> Document {
        let (terms, negated) = match self.bound() {
            Some(b) => (sorted(&b.positive), sorted(&b.negative)),
            None => (vec![], vec![]),
        };
        let fold_all = |v: &[String]| -> Vec<String> {
            v.iter()
                .map(|p| {
                    tokenize::fold_text(
                        p,
                        Fold {
                            diacritic_sensitive: true,
                            ..self.fold
                        },
                    )
                })
                .collect()
        };
        doc! {
            "terms": terms,
            "negatedTerms": negated,
            "phrases": fold_all(&self.search.phrases),
            "negatedPhrases": fold_all(&self.search.negated_phrases),
        }
    }
}

fn sorted(set: &HashSet<String>) -> Vec<String> {
    let mut v: Vec<String> = set.iter().cloned().collect();
    v.sort();
    v
}

/// Splits a `$search` string. A `"` opens a phrase and the next one closes it (an unclosed
/// phrase runs to the end); a `-` right before a word or an opening quote, at the start or after
/// a space, negates it.
pub fn parse_search(s: &str) -> Search {
    let mut out = Search::default();
    let chars: Vec<char> = s.chars().collect();
    let negates =
        |at: usize| at > 0 && chars[at - 1] == '-' && (at == 1 || chars[at - 2].is_whitespace());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' {
            let end = chars[i + 1..]
                .iter()
                .position(|&c| c == '"')
                .map_or(chars.len(), |p| i + 1 + p);
            let phrase: String = chars[i + 1..end].iter().collect();
            if !phrase.trim().is_empty() {
                if negates(i) {
                    out.negated_phrases.push(phrase);
                } else {
                    out.phrases.push(phrase);
                }
            }
            i = end + 1;
        } else if tokenize::is_word_char(c) {
            let start = i;
            while i < chars.len() && tokenize::is_word_char(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            if negates(start) {
                out.negated_words.push(word);
            } else {
                out.words.push(word);
            }
        } else {
            i += 1;
        }
    }
    out
}

/// The `$text` operands of a filter's top-level conjunction.
pub fn text_of(filter: &Filter) -> Option<Arc<TextQuery>> {
    match filter {
        Filter::Text(q) => Some(q.clone()),
        Filter::And(children) => children.iter().find_map(text_of),
        _ => None,
    }
}

/// mongod's placement rules: at most one `$text`, only in the top-level conjunction.
pub fn check_placement(filter: &Filter) -> CommandResult<()> {
    let mut count = 0;
    top_level(filter, &mut count)?;
    if count > 1 {
        return Err(bad("Too many text expressions"));
    }
    Ok(())
}

fn top_level(f: &Filter, count: &mut usize) -> CommandResult<()> {
    match f {
        Filter::Text(_) => *count += 1,
        Filter::And(children) => {
            for c in children {
                top_level(c, count)?;
            }
        }
        other if contains_text(other) => {
            return Err(bad(
                "$text is only allowed in the top-level conjunction of a query",
            ));
        }
        _ => {}
    }
    Ok(())
}

fn contains_text(f: &Filter) -> bool {
    match f {
        Filter::Text(_) => true,
        Filter::And(c) | Filter::Or(c) | Filter::Nor(c) => c.iter().any(contains_text),
        Filter::Not(inner) => contains_text(inner),
        Filter::Path {
            op: Op::ElemMatchObject(inner) | Op::ElemMatchValue(inner),
            ..
        } => contains_text(inner),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
