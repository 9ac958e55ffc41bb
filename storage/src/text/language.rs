//! The languages a text index knows (mongod's textIndexVersion 3 set): their names and ISO
//! codes, their Snowball stemmer (`rust-stemmers`) and a short stop-word list of our own.
//! `none` neither stems nor drops words. Names are matched case-insensitively, as mongod does.
//!
//! The stop-word lists are deliberately short: the most frequent function words (articles,
//! pronouns, prepositions, conjunctions, auxiliaries) of each language, written for cairn. They
//! are kept in lower case with their accents; matching folds both sides the same way.

use rust_stemmers::{Algorithm, Stemmer};
use std::collections::HashSet;
use std::sync::OnceLock;

/// One supported language.
#[derive(Debug)]
pub struct Language {
    pub name: &'static str,
    pub code: &'static str,
    algorithm: Option<Algorithm>,
    stop_words: &'static str,
}

impl PartialEq for Language {
    fn eq(&self, other: &Language) -> bool {
        self.name == other.name
    }
}

const EN: &str = "a about above after again against all am an and any are as at be because been \
    before being below between both but by can could did do does doing down during each few for \
    from further had has have having he her here hers herself him himself his how i if in into is \
    it its itself just me more most my myself no nor not now of off on once only or other our ours \
    ourselves out over own same she should so some such than that the their theirs them \
    themselves then there these they this those through to too under until up very was we were \
    what when where which while who whom why will with would you your yours yourself yourselves";
const ES: &str = "a al algo algunas algunos ante antes como con contra cual cuando de del desde \
    donde durante e el él ella ellas ellos en entre era eres es esa esas ese eso esos esta está \
    estaba estas este esto estos fue fueron ha había han hasta hay la las le les lo los más me mi \
    mis mucho muy nada ni no nos nosotros o os otra otro para pero poco por porque que qué quien \
    se sea ser si sí sin sobre son su sus también te tiene todo tu tú tus un una uno unos y ya yo";
const DE: &str = "aber alle als also am an auch auf aus bei bin bis bist da damit dann das dass \
    dem den denn der des die dies diese dieser doch dort du durch ein eine einem einen einer eines \
    er es für hat hatte ich ihr im in ist ja jede kann kein man mein mit muss nach nicht noch nur \
    ob oder ohne sein sich sie sind so über um und uns unter vom von vor war waren was weil wenn \
    wer wie wir wird wo zu zum zur";
const FR: &str = "à ai au aux avec avez avons ce ces cet cette dans de des du elle elles en est \
    et été être eu il ils je la le les leur lui ma mais me même mes moi mon ne nos notre nous on \
    ou où par pas pour qu que qui sa se ses si son sont sur ta te tes toi ton tu un une vos votre \
    vous y";
const RU: &str = "а без более бы был была были было быть в вам вас весь во вот все всё вы где да \
    для до его ее её если есть еще ещё же за здесь и из или им их к как когда кто ли меня мне \
    мы на над не него нее неё нет ни них но ну о об он она они оно от по под при с со так также \
    там то тот ты у уже чем что чтобы эта эти это я";
const PT: &str = "a ao aos as até com como da das de dela dele do dos e é ela ele eles em entre \
    era essa esse esta este eu foi há isso isto já lhe mais mas me meu minha muito na não nas nem \
    no nos nós o os ou para pela pelo por qual quando que quem se sem ser seu sua também te tem \
    um uma você";
const IT: &str = "a ad al alla alle anche che chi ci come con da dal dalla degli dei del della \
    delle di e è ed era gli ha hanno i il in io la le lei lo loro lui ma mi mia mio ne nei nel \
    nella noi non o per più quale quando questa questo se si sono su sua suo tra tu un una uno voi";
const NL: &str = "aan al als bij dan dat de der deze die dit door een en er had heb heeft het \
    hij hoe ik in is je kan maar me met mijn na naar niet nog nu of om ook op over te tot u uit \
    van veel voor was wat we wel wie wij zal ze zich zij zo zou";

const fn lang(
    name: &'static str,
    code: &'static str,
    algorithm: Option<Algorithm>,
    stop_words: &'static str,
) -> Language {
    Language {
        name,
        code,
        algorithm,
        stop_words,
    }
}

/// mongod's textIndexVersion 3 languages.
static LANGUAGES: [Language; 16] = [
    lang("danish", "da", Some(Algorithm::Danish), ""),
    lang("dutch", "nl", Some(Algorithm::Dutch), NL),
    lang("english", "en", Some(Algorithm::English), EN),
    lang("finnish", "fi", Some(Algorithm::Finnish), ""),
    lang("french", "fr", Some(Algorithm::French), FR),
    lang("german", "de", Some(Algorithm::German), DE),
    lang("hungarian", "hu", Some(Algorithm::Hungarian), ""),
    lang("italian", "it", Some(Algorithm::Italian), IT),
    lang("norwegian", "nb", Some(Algorithm::Norwegian), ""),
    lang("portuguese", "pt", Some(Algorithm::Portuguese), PT),
    lang("romanian", "ro", Some(Algorithm::Romanian), ""),
    lang("russian", "ru", Some(Algorithm::Russian), RU),
    lang("spanish", "es", Some(Algorithm::Spanish), ES),
    lang("swedish", "sv", Some(Algorithm::Swedish), ""),
    lang("turkish", "tr", Some(Algorithm::Turkish), ""),
    lang("none", "none", None, ""),
];

/// The default of `default_language`.
pub const DEFAULT_LANGUAGE: &str = "english";

/// The language named `name` (a name or its code, any case).
pub fn lookup(name: &str) -> Option<&'static Language> {
    let lower = name.to_lowercase();
    LANGUAGES
        .iter()
        .find(|l| l.name == lower || l.code == lower)
}

impl Language {
    /// The word's stem (the word itself for `none`).
    pub fn stem(&self, word: &str) -> String {
        match self.algorithm {
            Some(a) => stemmer(a).stem(word).into_owned(),
            None => word.to_string(),
        }
    }

    /// Whether the lower-cased, diacritic-folded `word` is one of this language's stop words.
    pub fn is_stop_word(&self, folded: &str) -> bool {
        self.stop_set().contains(folded)
    }

    fn stop_set(&self) -> &'static HashSet<String> {
        static SETS: OnceLock<Vec<HashSet<String>>> = OnceLock::new();
        let sets = SETS.get_or_init(|| {
            LANGUAGES
                .iter()
                .map(|l| {
                    l.stop_words
                        .split_whitespace()
                        .map(super::tokenize::strip_diacritics)
                        .collect()
                })
                .collect()
        });
        let i = LANGUAGES.iter().position(|l| l == self).unwrap_or(0);
        &sets[i]
    }
}

/// One stemmer per algorithm, made once.
fn stemmer(a: Algorithm) -> &'static Stemmer {
    static ALL: OnceLock<Vec<(Algorithm, Stemmer)>> = OnceLock::new();
    let all = ALL.get_or_init(|| {
        LANGUAGES
            .iter()
            .filter_map(|l| l.algorithm)
            .map(|a| (a, Stemmer::create(a)))
            .collect()
    });
    all.iter()
        .find(|(b, _)| *b == a)
        .map(|(_, s)| s)
        .unwrap_or(&all[0].1)
}
