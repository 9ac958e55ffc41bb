//! Words and terms. A word is a maximal run of letters, digits and combining marks (everything
//! else — spaces, punctuation, symbols — separates words). A term is what the index keeps for a
//! word: folded to lower case and stripped of diacritics (unless a query asks for case or
//! diacritic sensitivity), dropped when it is a stop word, then stemmed in the language.

use super::language::Language;
use unicode_normalization::UnicodeNormalization;

/// How a word is folded before stemming. The index always uses the default (insensitive).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fold {
    pub case_sensitive: bool,
    pub diacritic_sensitive: bool,
}

/// Letters, digits and combining marks make words; anything else separates them.
pub fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || is_combining(c)
}

/// The combining-mark blocks that NFD produces for accented Latin, Greek and Cyrillic letters.
fn is_combining(c: char) -> bool {
    matches!(c, '\u{0300}'..='\u{036F}' | '\u{1AB0}'..='\u{1AFF}' | '\u{1DC0}'..='\u{1DFF}' | '\u{20D0}'..='\u{20FF}' | '\u{FE20}'..='\u{FE2F}')
}

/// The words of `text`, in order.
pub fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !is_word_char(c))
        .filter(|w| !w.is_empty())
}

/// `s` without its diacritics: decomposed (NFD), combining marks dropped, recomposed.
pub fn strip_diacritics(s: &str) -> String {
    if s.is_ascii() {
        return s.to_string();
    }
    s.nfd().filter(|c| !is_combining(*c)).nfc().collect()
}

/// `s` folded as `fold` asks (phrases are compared in this form).
pub fn fold_text(s: &str, fold: Fold) -> String {
    let cased = if fold.case_sensitive {
        s.to_string()
    } else {
        s.to_lowercase()
    };
    if fold.diacritic_sensitive {
        cased
    } else {
        strip_diacritics(&cased)
    }
}

/// The term of one word, or `None` for a stop word.
pub fn term(word: &str, language: &Language, fold: Fold) -> Option<String> {
    let lower = word.to_lowercase();
    if language.is_stop_word(&strip_diacritics(&lower)) {
        return None;
    }
    Some(language.stem(&fold_text(word, fold)))
}

/// The terms of `text`, in order, stop words left out.
pub fn terms(text: &str, language: &Language, fold: Fold) -> Vec<String> {
    words(text)
        .filter_map(|w| term(w, language, fold))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::language::lookup;

    fn t(text: &str, lang: &str) -> Vec<String> {
        terms(text, lookup(lang).unwrap(), Fold::default())
    }

    #[test]
    fn words_split_at_punctuation_and_keep_accents() {
        let w: Vec<&str> = words("Hello, world! café-au-lait  x2").collect();
        assert_eq!(w, ["Hello", "world", "café", "au", "lait", "x2"]);
        assert_eq!(words("  ,.; ").count(), 0);
    }

    #[test]
    fn folding() {
        assert_eq!(strip_diacritics("Crème Brûlée"), "Creme Brulee");
        assert_eq!(fold_text("Ça Été", Fold::default()), "ca ete");
        let case = Fold {
            case_sensitive: true,
            diacritic_sensitive: false,
        };
        assert_eq!(fold_text("Ça Été", case), "Ca Ete");
        let accents = Fold {
            case_sensitive: false,
            diacritic_sensitive: true,
        };
        assert_eq!(fold_text("Ça Été", accents), "ça été");
    }

    #[test]
    fn english_stems_and_drops_stop_words() {
        assert_eq!(t("The runners were running", "english"), ["runner", "run"]);
        assert_eq!(t("Fishing fished fishes", "en"), ["fish", "fish", "fish"]);
        assert!(t("the and of", "english").is_empty());
    }

    #[test]
    fn spanish() {
        assert_eq!(
            t("Los corredores corriendo", "spanish"),
            ["corredor", "corr"]
        );
        assert!(t("el la de y", "es").is_empty());
    }

    #[test]
    fn german() {
        assert_eq!(t("Die Häuser und das Haus", "german"), ["haus", "haus"]);
        assert!(t("und der die das", "de").is_empty());
    }

    #[test]
    fn french() {
        assert_eq!(
            t("Les chanteuses chantaient", "french"),
            ["chanteux", "chant"]
        );
        assert!(t("le la les et à", "fr").is_empty());
    }

    #[test]
    fn russian() {
        assert_eq!(
            t("Красивые книги и книга", "russian"),
            ["красив", "книг", "книг"]
        );
        assert!(t("и в не на", "ru").is_empty());
    }

    #[test]
    fn none_keeps_every_word_unstemmed() {
        assert_eq!(t("The running", "none"), ["the", "running"]);
    }

    #[test]
    fn same_word_same_term_in_any_case_or_accent() {
        let en = lookup("english").unwrap();
        assert_eq!(
            term("CAFÉ", en, Fold::default()),
            term("cafe", en, Fold::default())
        );
    }
}
