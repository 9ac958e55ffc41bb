//! `$regex` and regex literals: option checking as mongod does it and translation to the
//! `regex` crate. That crate guarantees linear-time matching, so it has no look-around and no
//! backreferences; such patterns are refused with a message that says so instead of silently
//! matching something else.

use crate::error::{CommandResult, ErrorCode, err};
use crate::query::limits::{REGEX_COMPILED_SIZE_MAX, REGEX_NEST_MAX};
use bson::RawBsonRef;

/// A compiled regular expression together with its source, for matching and for equality with
/// stored regex values.
#[derive(Debug, Clone)]
pub struct RegexPred {
    pub pattern: String,
    pub options: String,
    compiled: ::regex::Regex,
}

/// Options mongod accepts; `u` and `l` change nothing here.
const OPTIONS_ALLOWED: &str = "imsxul";

impl RegexPred {
    pub fn new(pattern: &str, options: &str) -> CommandResult<RegexPred> {
        if let Some(bad) = options.chars().find(|c| !OPTIONS_ALLOWED.contains(*c)) {
            return Err(err(
                ErrorCode::Location51108,
                format!("invalid flag in regex options: {bad}"),
            ));
        }
        if pattern.contains('\0') {
            return Err(err(
                ErrorCode::BadValue,
                "Regular expression cannot contain an embedded null byte",
            ));
        }
        let compiled = ::regex::RegexBuilder::new(pattern)
            .case_insensitive(options.contains('i'))
            .multi_line(options.contains('m'))
            .dot_matches_new_line(options.contains('s'))
            .ignore_whitespace(options.contains('x'))
            .size_limit(REGEX_COMPILED_SIZE_MAX)
            .nest_limit(REGEX_NEST_MAX)
            .build()
            .map_err(|e| invalid(pattern, &e))?;
        Ok(RegexPred {
            pattern: pattern.to_string(),
            options: options.to_string(),
            compiled,
        })
    }

    /// The compiled regex, for callers that need captures (`$regexFind`).
    pub fn compiled(&self) -> &::regex::Regex {
        &self.compiled
    }

    pub fn is_match(&self, text: &str) -> bool {
        self.compiled.is_match(text)
    }

    /// mongod's rule: strings and symbols are searched; a stored regex matches when it is the
    /// same regex (pattern and options); nothing else matches.
    pub fn matches_value(&self, v: RawBsonRef<'_>) -> bool {
        match v {
            RawBsonRef::String(s) | RawBsonRef::Symbol(s) => self.is_match(s),
            RawBsonRef::RegularExpression(r) => {
                r.pattern.as_str() == self.pattern && r.options.as_str() == self.options
            }
            _ => false,
        }
    }

    /// The regex as a BSON value (for equality fields, explain, error messages).
    pub fn to_bson(&self) -> bson::Bson {
        match (
            self.pattern.as_str().try_into(),
            sorted(&self.options).as_str().try_into(),
        ) {
            (Ok(pattern), Ok(options)) => {
                bson::Bson::RegularExpression(bson::Regex { pattern, options })
            }
            _ => bson::Bson::Null,
        }
    }
}

fn sorted(options: &str) -> String {
    let mut chars: Vec<char> = options.chars().collect();
    chars.sort_unstable();
    chars.into_iter().collect()
}

/// Features PCRE has and the `regex` crate refuses, named for the error message.
const UNSUPPORTED_FEATURES: &[(&str, &str)] = &[
    ("(?=", "look-ahead"),
    ("(?!", "negative look-ahead"),
    ("(?<=", "look-behind"),
    ("(?<!", "negative look-behind"),
    ("(?>", "atomic groups"),
    ("\\1", "backreferences"),
    ("\\k<", "backreferences"),
    ("*+", "possessive quantifiers"),
    ("++", "possessive quantifiers"),
];

fn invalid(pattern: &str, e: &::regex::Error) -> crate::error::CommandError {
    let why = match UNSUPPORTED_FEATURES
        .iter()
        .find(|(needle, _)| pattern.contains(needle))
    {
        Some((_, feature)) => format!("{feature} are not supported by cairn's regex engine"),
        None => e
            .to_string()
            .lines()
            .last()
            .unwrap_or("invalid pattern")
            .trim()
            .to_string(),
    };
    err(
        ErrorCode::Location51091,
        format!("Regular expression is invalid: {why}"),
    )
}

#[cfg(test)]
mod tests {
    // Proves regex options translate to the regex crate's flags and that bad flags or
    // unsupported PCRE features are refused with mongod's codes.
    use super::*;

    #[test]
    fn options_and_errors() {
        let r = RegexPred::new("^a.c$", "is").expect("valid");
        assert!(r.is_match("A\nC"));
        assert!(!RegexPred::new("^a.c$", "").expect("valid").is_match("A\nC"));
        assert!(RegexPred::new("^b", "m").expect("valid").is_match("a\nb"));
        assert!(
            RegexPred::new("a b # comment", "x")
                .expect("valid")
                .is_match("ab")
        );
        let e = RegexPred::new("a", "z").expect_err("bad flag");
        assert_eq!(e.code.code(), 51108);
        let e = RegexPred::new("(?=a)", "").expect_err("look-ahead");
        assert_eq!(e.code.code(), 51091);
        assert!(e.message.contains("look-ahead"), "{}", e.message);
        let e = RegexPred::new("(", "").expect_err("unbalanced");
        assert_eq!(e.code.code(), 51091);
    }
}
