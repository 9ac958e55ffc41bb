//! String comparison under a collation: a validated [`Collation`] compiled into ICU4X's
//! collator (pure Rust, data compiled in), the operation's current collator, and the one
//! comparison every query-layer caller uses.
//!
//! The current collator is per operation, like the interrupt token: the command installs it on
//! the thread that runs the operation with [`scope`] (a find cursor keeps it for its getMores),
//! and the matcher, sort, `$group`, distinct and the pipeline's comparisons read it through
//! [`compare_views`] and [`key`]. No collator installed means the simple collation: strings by
//! bytes, exactly as before. Regexes, field names and code never collate (as mongod).
//!
//! Sort keys: ICU4X writes a sort key whose byte order is the collated order. To keep the key
//! in BSON's string bracket (so keys of mixed types still order by type first, as in mongod's
//! indexes) the bytes are carried as a string of code points `byte + 1`: UTF-8 orders by code
//! point, so the string's byte order is the sort key's byte order (see docs/FORMAT.md).

use crate::error::{CommandResult, ErrorCode, err};
use crate::query::collation::{Alternate, CaseFirst, Collation, MaxVariable, Spec};
use bson::{Bson, Document, RawBsonRef};
use icu_collator::options::{AlternateHandling, CaseLevel, CollatorOptions, Strength};
use icu_collator::preferences::{CollationCaseFirst, CollationNumericOrdering};
use icu_collator::{CollatorBorrowed, CollatorPreferences};
use std::borrow::Cow;
use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use storage::order::{self, View};

/// A compiled collation.
#[derive(Debug)]
pub struct Collator {
    spec: Collation,
    icu: CollatorBorrowed<'static>,
}

/// The languages mongod 7.0 accepts in `locale` (its documented list); any other is
/// "Field 'locale' is invalid", even though ICU would fall back to the root order.
const LANGUAGES: &[&str] = &[
    "af", "am", "ar", "as", "az", "be", "bg", "bn", "bo", "bs", "ca", "chr", "cs", "cy", "da",
    "de", "dsb", "dz", "ee", "el", "en", "eo", "es", "et", "fa", "fi", "fil", "fo", "fr", "ga",
    "gl", "gu", "ha", "haw", "he", "hi", "hr", "hsb", "hu", "hy", "id", "ig", "is", "it", "ja",
    "ka", "kk", "kl", "km", "kn", "ko", "kok", "ky", "lb", "lkt", "ln", "lo", "lt", "lv", "mk",
    "ml", "mn", "mr", "ms", "mt", "my", "nb", "ne", "nl", "nn", "om", "or", "pa", "pl", "ps", "pt",
    "ro", "ru", "se", "si", "sk", "sl", "smn", "sq", "sr", "sv", "sw", "ta", "te", "th", "to",
    "tr", "ug", "uk", "ur", "vi", "wae", "yi", "yo", "zh", "zu",
];

/// ICU's `@collation=` keyword values and their BCP 47 (`-u-co-`) spellings.
const COLLATION_TYPES: &[(&str, &str)] = &[
    ("phonebook", "phonebk"),
    ("traditional", "trad"),
    ("dictionary", "dict"),
    ("gb2312han", "gb2312"),
    ("big5han", "big5han"),
    ("unihan", "unihan"),
    ("zhuyin", "zhuyin"),
    ("pinyin", "pinyin"),
    ("stroke", "stroke"),
    ("search", "search"),
    ("compat", "compat"),
    ("eor", "eor"),
    ("standard", "standard"),
];

fn invalid_locale() -> crate::error::CommandError {
    err(ErrorCode::BadValue, "Field 'locale' is invalid")
}

/// `de_AT@collation=phonebook` as the BCP 47 tag `de-AT-u-co-phonebk`.
fn bcp47(locale: &str) -> CommandResult<String> {
    let (base, keywords) = match locale.split_once('@') {
        Some((b, k)) => (b, Some(k)),
        None => (locale, None),
    };
    let lang = base.split(['_', '-']).next().unwrap_or("");
    if !LANGUAGES.contains(&lang) {
        return Err(invalid_locale());
    }
    let mut tag = base.replace('_', "-");
    if let Some(k) = keywords {
        let value = k.strip_prefix("collation=").ok_or_else(invalid_locale)?;
        let (_, co) = COLLATION_TYPES
            .iter()
            .find(|(icu, _)| *icu == value)
            .ok_or_else(invalid_locale)?;
        tag.push_str("-u-co-");
        tag.push_str(co);
    }
    Ok(tag)
}

impl Collator {
    /// Compiles a collation; an unknown locale gets mongod's BadValue.
    pub fn new(spec: &Collation) -> CommandResult<Collator> {
        let locale: icu_locale_core::Locale =
            bcp47(&spec.locale)?.parse().map_err(|_| invalid_locale())?;
        if spec.backwards && !spec.locale.starts_with("fr_CA") {
            // ICU4X applies backward secondary weights only where the locale's data asks for
            // them (Canadian French); it has no switch for other locales.
            return Err(err(
                ErrorCode::BadValue,
                "collation option 'backwards: true' is only available with locale 'fr_CA' in cairn",
            ));
        }
        let mut prefs = CollatorPreferences::from(&locale);
        prefs.case_first = match spec.case_first {
            CaseFirst::Upper => Some(CollationCaseFirst::Upper),
            CaseFirst::Lower => Some(CollationCaseFirst::Lower),
            CaseFirst::Off => prefs.case_first,
        };
        prefs.numeric_ordering = Some(if spec.numeric_ordering {
            CollationNumericOrdering::True
        } else {
            CollationNumericOrdering::False
        });
        let mut options = CollatorOptions::default();
        options.strength = Some(match spec.strength {
            1 => Strength::Primary,
            2 => Strength::Secondary,
            3 => Strength::Tertiary,
            4 => Strength::Quaternary,
            _ => Strength::Identical,
        });
        options.case_level = Some(if spec.case_level {
            CaseLevel::On
        } else {
            CaseLevel::Off
        });
        options.alternate_handling = Some(match spec.alternate {
            Alternate::NonIgnorable => AlternateHandling::NonIgnorable,
            Alternate::Shifted => AlternateHandling::Shifted,
        });
        options.max_variable = Some(match spec.max_variable {
            MaxVariable::Punct => icu_collator::options::MaxVariable::Punctuation,
            MaxVariable::Space => icu_collator::options::MaxVariable::Space,
        });
        let icu = CollatorBorrowed::try_new(prefs, options).map_err(|_| invalid_locale())?;
        Ok(Collator {
            spec: spec.clone(),
            icu,
        })
    }

    pub fn spec(&self) -> &Collation {
        &self.spec
    }

    pub fn compare(&self, a: &str, b: &str) -> Ordering {
        self.icu.compare(a, b)
    }

    /// ICU's sort key: its byte order is this collation's order of the strings.
    pub fn sort_key(&self, s: &str) -> Vec<u8> {
        let mut out = Vec::with_capacity(s.len() * 2);
        let Ok(()) = self.icu.write_sort_key_to(s, &mut out);
        out
    }

    /// The sort key as a string whose byte order is the same (code point `byte + 1` each).
    pub fn key_string(&self, s: &str) -> String {
        self.sort_key(s)
            .into_iter()
            .map(|b| char::from_u32(u32::from(b) + 1).unwrap_or('\u{1}'))
            .collect()
    }

    /// `v` with every string (at any depth) replaced by its key string: two values compare
    /// equal in the simple order exactly when they are equal under this collation.
    pub fn key<'a>(&self, v: &'a Bson) -> Cow<'a, Bson> {
        match v {
            Bson::String(s) | Bson::Symbol(s) => Cow::Owned(Bson::String(self.key_string(s))),
            Bson::Document(d) if has_strings(v) => Cow::Owned(Bson::Document(self.key_doc(d))),
            Bson::Array(a) if has_strings(v) => Cow::Owned(Bson::Array(
                a.iter().map(|e| self.key(e).into_owned()).collect(),
            )),
            _ => Cow::Borrowed(v),
        }
    }

    fn key_doc(&self, d: &Document) -> Document {
        d.iter()
            .map(|(k, v)| (k.clone(), self.key(v).into_owned()))
            .collect()
    }
}

fn has_strings(v: &Bson) -> bool {
    match v {
        Bson::String(_) | Bson::Symbol(_) => true,
        Bson::Document(d) => d.values().any(has_strings),
        Bson::Array(a) => a.iter().any(has_strings),
        _ => false,
    }
}

/// The collator for a spec, `None` for the simple collation. Compiled collators are shared:
/// building one resolves locale data, a query may name the same collation many times.
pub fn for_spec(spec: &Spec) -> CommandResult<Option<Arc<Collator>>> {
    let Spec::Locale(c) = spec else {
        return Ok(None);
    };
    static CACHE: OnceLock<Mutex<HashMap<Collation, Arc<Collator>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(hit) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(c) {
        return Ok(Some(hit.clone()));
    }
    let built = Arc::new(Collator::new(c)?);
    let mut map = cache.lock().unwrap_or_else(|p| p.into_inner());
    Ok(Some(map.entry(c.clone()).or_insert(built).clone()))
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<Collator>>> = const { RefCell::new(None) };
}

/// Restores the previous collator when dropped.
pub type Scope = crate::scoped::Installed<Arc<Collator>>;

/// Makes `c` the current operation's collator until the returned scope is dropped (`None`: the
/// simple collation, also inside an outer scope with another one).
pub fn scope(c: Option<Arc<Collator>>) -> Scope {
    crate::scoped::replace(&CURRENT, c)
}

/// The current operation's collator, `None` for the simple collation.
pub fn current() -> Option<Arc<Collator>> {
    crate::scoped::current(&CURRENT)
}

/// mongod's order of two values under the current collation.
pub fn compare_views(a: View<'_>, b: View<'_>) -> Ordering {
    CURRENT.with(|cur| match &*cur.borrow() {
        None => order::compare_views(a, b),
        Some(c) => order::compare_views_with(a, b, &|x, y| c.compare(x, y)),
    })
}

pub fn compare_bson(a: &Bson, b: &Bson) -> Ordering {
    compare_views(View::from_bson(a), View::from_bson(b))
}

pub fn compare_raw_bson(a: RawBsonRef<'_>, b: &Bson) -> Ordering {
    compare_views(View::from_raw(a), View::from_bson(b))
}

pub fn compare(a: RawBsonRef<'_>, b: RawBsonRef<'_>) -> Ordering {
    compare_views(View::from_raw(a), View::from_raw(b))
}

/// `v` as the current collation sees it for equality and hashing (see [`Collator::key`]).
pub fn key(v: &Bson) -> Cow<'_, Bson> {
    match current() {
        None => Cow::Borrowed(v),
        Some(c) => Cow::Owned(c.key(v).into_owned()),
    }
}

/// Appends `v` in the index key encoding as the current collation orders it (strings as their
/// key strings): byte order of the output is the collated order, equal bytes mean equal values.
pub fn encode_value(out: &mut Vec<u8>, v: RawBsonRef<'_>) {
    let Some(c) = current() else {
        storage::keycode::encode_value(out, v);
        return;
    };
    let keyed = Bson::try_from(bson::RawBson::from(v))
        .ok()
        .map(|owned| c.key(&owned).into_owned())
        .and_then(|k| bson::RawBson::try_from(k).ok());
    match keyed {
        Some(k) => storage::keycode::encode_value(out, k.as_raw_bson_ref()),
        None => storage::keycode::encode_value(out, v),
    }
}

#[cfg(test)]
mod tests;
