//! Text indexes (mongod's textIndexVersion 3): which strings of a document are indexed, with
//! which weight and language, and the index entries they give.
//!
//! A text index's key pattern is always `{_fts: "text", _ftsx: 1}` (the server rewrites the
//! user's `{a: "text", b: "text"}` into it and keeps the fields in `weights`). A document gives
//! one entry per distinct term, `(term: string, score: double)` in the ordinary key encoding, so
//! all entries of a term are contiguous and a query reads each term's range once, getting every
//! document's score for it from the key without a fetch. Documents without indexed text give no
//! entries. The score of a term in one string follows mongod's formula in spirit: the term's
//! frequency, damped for repeats, times a coefficient that grows with the share of the string's
//! terms it makes up, times the field's weight, with a small bonus when the string is the term
//! alone; a document's score for a term is the sum over its strings. More occurrences or a
//! larger weight never lower the score.
//!
//! A compound text index (`{a: 1, body: "text", b: 1}`, stored as `{a: 1, _fts: "text", _ftsx:
//! 1, b: 1}`) puts the values of its prefix fields before `(term, score)` and those of its
//! suffix fields after: `(a, term, score, b)`. A missing field reads as null; a prefix field
//! holding an array refuses the write (16675), a suffix field's array is stored whole. A query
//! then reads the range of (prefix values, term) for each term.
//!
//! Languages: the index's `default_language`, unless the document's `language_override` field
//! (top level, default `language`) names another; an unknown one refuses the write (17262).

pub mod language;
pub mod tokenize;

use crate::keycode;
use crate::keys::{ExtractedKeys, KeyError};
use bson::raw::RawDocument;
use bson::{Bson, Document, RawBsonRef};
use language::Language;
use std::collections::BTreeMap;
use tokenize::Fold;

/// The key pattern field that holds the term.
pub const FTS: &str = "_fts";
/// The key pattern field that holds the score.
pub const FTSX: &str = "_ftsx";
/// The key-pattern value of a text field.
pub const TEXT: &str = "text";
/// The field name that indexes every string of a document.
pub const WILDCARD: &str = "$**";
/// The only version cairn builds.
pub const TEXT_INDEX_VERSION: i32 = 3;
/// The default of `language_override`.
pub const LANGUAGE_OVERRIDE_DEFAULT: &str = "language";
/// Weights lie in `(0, WEIGHT_MAX)`, as mongod's do.
pub const WEIGHT_MAX: f64 = 100_000.0;
/// Bonus factor for a string that is exactly one term.
const WHOLE_STRING_BONUS: f64 = 1.1;

/// What a text index indexes, read from its catalog spec.
#[derive(Debug, Clone, PartialEq)]
pub struct TextSpec {
    /// Weighted paths (other than `$**`), split at dots.
    weights: Vec<(String, Vec<String>, f64)>,
    /// The weight of every other string when the index covers `$**`.
    wildcard: Option<f64>,
    pub default_language: &'static Language,
    pub language_override: String,
    /// Key fields before the text part, then those after it.
    pub prefix: Vec<ExtraField>,
    pub suffix: Vec<ExtraField>,
}

/// A compound text index's other key field: its path split at dots, and whether it descends.
pub type ExtraField = (Vec<String>, bool);

/// Whether a key pattern is a text index's.
pub fn is_text_key(key: &Document) -> bool {
    key.get_str(FTS).is_ok_and(|v| v == TEXT)
}

fn bad(why: impl Into<String>) -> KeyError {
    KeyError::BadPattern(why.into())
}

impl TextSpec {
    /// The text spec of an index (`None` for other index types). `extra` holds `weights`,
    /// `default_language` and `language_override` as the server stored them.
    pub fn from_index(key: &Document, extra: &Document) -> Result<Option<TextSpec>, KeyError> {
        if !is_text_key(key) {
            return Ok(None);
        }
        let Some(Bson::Document(w)) = extra.get("weights") else {
            return Err(bad("text index without weights"));
        };
        let mut weights = Vec::new();
        let mut wildcard = None;
        for (path, v) in w {
            let weight = match v {
                Bson::Int32(i) => f64::from(*i),
                Bson::Int64(i) => *i as f64,
                Bson::Double(f) => *f,
                _ => return Err(bad("weight for text index needs numeric type")),
            };
            if !(weight > 0.0 && weight < WEIGHT_MAX) {
                return Err(bad(format!(
                    "text index weight must be in the exclusive interval (0,{WEIGHT_MAX}) but found: {weight}"
                )));
            }
            if path == WILDCARD {
                wildcard = Some(weight);
            } else {
                let components = path.split('.').map(str::to_owned).collect();
                weights.push((path.clone(), components, weight));
            }
        }
        let name = extra
            .get_str("default_language")
            .unwrap_or(language::DEFAULT_LANGUAGE);
        let default_language = language::lookup(name)
            .ok_or_else(|| bad(format!("unsupported language: \"{name}\"")))?;
        let language_override = extra
            .get_str("language_override")
            .unwrap_or(LANGUAGE_OVERRIDE_DEFAULT)
            .to_string();
        let (prefix, suffix) = extra_fields(key);
        Ok(Some(TextSpec {
            weights,
            wildcard,
            default_language,
            language_override,
            prefix,
            suffix,
        }))
    }

    /// Per key column: whether it is stored descending (prefix, term, score, suffix).
    pub fn columns_descending(&self) -> Vec<bool> {
        let prefix = self.prefix.iter().map(|(_, d)| *d);
        let suffix = self.suffix.iter().map(|(_, d)| *d);
        prefix.chain([false, false]).chain(suffix).collect()
    }

    /// The encoded prefix every entry of `term` under the prefix values `prefix` starts with
    /// (`prefix` holds one value per prefix field, in order).
    pub fn term_prefix(&self, prefix: &[RawBsonRef<'_>], term: &str) -> Vec<u8> {
        let mut values: Vec<RawBsonRef<'_>> =
            prefix.iter().take(self.prefix.len()).copied().collect();
        values.push(RawBsonRef::String(term));
        let descending = self.columns_descending();
        keycode::encode_key(&values, &descending[..values.len()])
    }

    /// The score of an entry (its key without the RecordId).
    pub fn entry_score(&self, key: &[u8]) -> Option<f64> {
        let decoded = keycode::decode_key(key, &self.columns_descending()).ok()?;
        match decoded.get(self.prefix.len() + 1) {
            Some(Bson::Double(f)) => Some(*f),
            _ => None,
        }
    }

    /// The values `doc` gives the prefix fields (null when missing; 16675 for an array) and
    /// the suffix fields (null when missing, arrays whole).
    fn extra_values<'a>(
        &self,
        doc: &'a RawDocument,
    ) -> Result<(Vec<RawBsonRef<'a>>, Vec<RawBsonRef<'a>>), KeyError> {
        let mut prefix = Vec::with_capacity(self.prefix.len());
        for (path, _) in &self.prefix {
            match value_at(doc, path) {
                Some(RawBsonRef::Array(_)) => return Err(KeyError::TextPrefixArray),
                v => prefix.push(v.unwrap_or(RawBsonRef::Null)),
            }
        }
        let suffix = self
            .suffix
            .iter()
            .map(|(path, _)| value_at(doc, path).unwrap_or(RawBsonRef::Null))
            .collect();
        Ok((prefix, suffix))
    }

    /// The language of `doc`: its `language_override` field, else the index default.
    pub fn language_of(&self, doc: &RawDocument) -> Result<&'static Language, KeyError> {
        match doc.get(&self.language_override).ok().flatten() {
            Some(RawBsonRef::String(name)) => {
                language::lookup(name).ok_or_else(|| KeyError::LanguageOverride(name.to_string()))
            }
            _ => Ok(self.default_language),
        }
    }

    /// Every indexed string of `doc` with its weight.
    pub fn texts<'a>(&self, doc: &'a RawDocument) -> Vec<(&'a str, f64)> {
        let mut out = Vec::new();
        match self.wildcard {
            Some(w) => self.visit(doc, &mut String::new(), w, &mut out),
            None => {
                for (_, components, weight) in &self.weights {
                    for v in crate::keys::values_at(doc, components) {
                        if let RawBsonRef::String(s) = v {
                            out.push((s, *weight));
                        }
                    }
                }
            }
        }
        out
    }

    /// Every string under `doc` (for `$**`), weighted by its path's weight if it has one.
    fn visit<'a>(
        &self,
        doc: &'a RawDocument,
        prefix: &mut String,
        wildcard: f64,
        out: &mut Vec<(&'a str, f64)>,
    ) {
        for (name, value) in doc.iter().map_while(Result::ok) {
            let len = prefix.len();
            if !prefix.is_empty() {
                prefix.push('.');
            }
            prefix.push_str(name.as_str());
            self.visit_value(value, prefix, wildcard, out);
            prefix.truncate(len);
        }
    }

    fn visit_value<'a>(
        &self,
        value: RawBsonRef<'a>,
        prefix: &mut String,
        wildcard: f64,
        out: &mut Vec<(&'a str, f64)>,
    ) {
        match value {
            RawBsonRef::String(s) => {
                let weight = self
                    .weights
                    .iter()
                    .find(|(p, _, _)| p == prefix)
                    .map_or(wildcard, |w| w.2);
                out.push((s, weight));
            }
            RawBsonRef::Document(d) => self.visit(d, prefix, wildcard, out),
            RawBsonRef::Array(a) => {
                for v in a.into_iter().map_while(Result::ok) {
                    self.visit_value(v, prefix, wildcard, out);
                }
            }
            _ => {}
        }
    }

    /// Each term of `doc` with its score.
    pub fn scores(&self, doc: &RawDocument) -> Result<BTreeMap<String, f64>, KeyError> {
        let language = self.language_of(doc)?;
        let mut scores = BTreeMap::new();
        for (text, weight) in self.texts(doc) {
            add_scores(text, weight, language, &mut scores);
        }
        Ok(scores)
    }

    /// The index entries of `doc`: `(prefix values, term, score, suffix values)` per distinct
    /// term.
    pub fn extract(&self, doc: &RawDocument) -> Result<ExtractedKeys, KeyError> {
        let (prefix, suffix) = self.extra_values(doc)?;
        let scores = self.scores(doc)?;
        if scores.len() > crate::keys::KEYS_PER_DOCUMENT_MAX {
            return Err(KeyError::TooManyKeys);
        }
        let descending = self.columns_descending();
        let mut values = prefix;
        let at = values.len();
        values.extend([RawBsonRef::Null, RawBsonRef::Null]);
        values.extend(suffix);
        let mut keys: Vec<Vec<u8>> = scores
            .iter()
            .map(|(term, score)| {
                values[at] = RawBsonRef::String(term);
                values[at + 1] = RawBsonRef::Double(*score);
                keycode::encode_key(&values, &descending)
            })
            .collect();
        keys.sort_unstable();
        let multikey = keys.len() > 1;
        let mut multikey_fields = vec![false; descending.len()];
        multikey_fields[at] = multikey;
        Ok(ExtractedKeys {
            keys,
            multikey,
            multikey_fields,
        })
    }
}

/// The key fields of a stored text key pattern before `_fts` and after `_ftsx`.
fn extra_fields(key: &Document) -> (Vec<ExtraField>, Vec<ExtraField>) {
    let (mut prefix, mut suffix) = (Vec::new(), Vec::new());
    let mut seen_text = false;
    for (path, v) in key {
        if path == FTS || path == FTSX {
            seen_text = true;
            continue;
        }
        let descending = match v {
            Bson::Int32(i) => *i < 0,
            Bson::Int64(i) => *i < 0,
            Bson::Double(f) => *f < 0.0,
            _ => false,
        };
        let field = (path.split('.').map(str::to_owned).collect(), descending);
        if seen_text {
            suffix.push(field);
        } else {
            prefix.push(field);
        }
    }
    (prefix, suffix)
}

/// The value at a dotted path through sub-documents only (`None`: missing, or the path
/// crosses an array before its end).
fn value_at<'a>(doc: &'a RawDocument, path: &[String]) -> Option<RawBsonRef<'a>> {
    let (last, parents) = path.split_last()?;
    let mut d = doc;
    for step in parents {
        match d.get(step).ok()?? {
            RawBsonRef::Document(sub) => d = sub,
            _ => return None,
        }
    }
    d.get(last).ok()?
}

/// The score of each term of one string, added into `scores`.
pub fn add_scores(
    text: &str,
    weight: f64,
    language: &Language,
    scores: &mut BTreeMap<String, f64>,
) {
    let terms = tokenize::terms(text, language, Fold::default());
    let total = terms.len() as f64;
    let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
    for t in &terms {
        *counts.entry(t).or_default() += 1;
    }
    for (term, count) in counts {
        let c = f64::from(count);
        // 1 + 1/2 + 1/4 + ...: each repeat adds half of what the one before added.
        let frequency = 2.0 * (1.0 - 0.5f64.powf(c));
        let share = 0.5 + 0.5 * c / total;
        let bonus = if terms.len() == 1 {
            WHOLE_STRING_BONUS
        } else {
            1.0
        };
        *scores.entry(term.to_string()).or_default() += weight * frequency * share * bonus;
    }
}

/// The encoded prefix every entry of `term` starts with.
pub fn term_prefix(term: &str) -> Vec<u8> {
    keycode::encode_key(&[RawBsonRef::String(term)], &[false])
}

/// The score of an entry (its key without the RecordId).
pub fn entry_score(key: &[u8]) -> Option<f64> {
    match keycode::decode_key(key, &[false, false]).ok()?.get(1) {
        Some(Bson::Double(f)) => Some(*f),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
