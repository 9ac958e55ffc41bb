//! The argument tables rendered for `docs/COMPATIBILITY.md` (tests only): per command, whether
//! unknown fields are refused and each field's type, so the document shows what the checker
//! enforces rather than a hand-kept list.

use super::{CommandSpec, Ty, admin, bulk, collections, server, specs, users};
use crate::commands::index_options::{self, OptionTy};

/// A type as the document names it (wider than the error messages' IDL names).
fn ty_name(ty: Ty) -> &'static str {
    match ty {
        Ty::SafeBool => "bool or number",
        Ty::SafeInt64 | Ty::Number => "number",
        Ty::Long => "long",
        Ty::ObjectArray => "array of objects",
        Ty::StringArray => "array of strings",
        Ty::StringOrStringArray => "string or array of strings",
        Ty::Hint => "index name or key pattern",
        Ty::StringArrayOrObject => "string, array or object",
        Ty::Any => "checked by the command",
        Ty::JsCode => "string or JavaScript code (else 2)",
        Ty::MrOut => "string or object (else 2)",
        Ty::MrScope => "object (else 2)",
        Ty::SaslPayload => "base64 string or binData (else 2)",
        other => other.expected(),
    }
}

fn field_list(spec: &CommandSpec) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(ty) = spec.target {
        parts.push(format!("(value) {}", ty_name(ty)));
    }
    for f in spec.fields {
        let mut s = format!("`{}` {}", f.name, ty_name(f.ty));
        if f.required {
            s.push_str(" (required)");
        }
        if let Some(min) = f.min {
            s.push_str(&format!(" (>= {min})"));
        }
        parts.push(s);
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}

fn table(out: &mut String, specs: &[&CommandSpec]) {
    out.push_str("| command | unknown fields | fields and types |\n| --- | --- | --- |\n");
    for s in specs {
        let strict = if s.strict {
            "refused (40415)"
        } else {
            "ignored"
        };
        out.push_str(&format!(
            "| `{}` | {strict} | {} |\n",
            s.name,
            field_list(s)
        ));
    }
    out.push('\n');
}

fn option_ty(ty: OptionTy) -> &'static str {
    match ty {
        OptionTy::Truthy => "bool or number",
        OptionTy::Bool => "bool",
        OptionTy::Number => "number",
        OptionTy::String => "string",
        OptionTy::Object => "object",
        OptionTy::ObjectOrString => "object or string",
        OptionTy::Any => "checked by its parser",
    }
}

/// What the hand parsers of commands on the tables answer beyond the tables' three codes
/// (mongod's own parsers for these fields use other codes, or none).
const HAND_PARSED: &[(&str, &str)] = &[
    (
        "mapReduce",
        "`map`, `reduce`, `finalize` not a string or JavaScript code: 2 (`finalize: null` passes); `out` not a string or document: 2; an `out` document: `inline` with anything else 72, `db` of admin, local or config 115, any other shape (no mode, two modes, an unknown field, `sharded`/`nonAtomic` not `true`, a name not a string) 2; `scope` not a document: 2; `limit` 0 or negative: 15958",
    ),
    (
        "convertToCapped, cloneCollectionAsCapped",
        "`size` read as mongod's `safeNumberLong`: anything that is not a positive number (missing, a string, 0, NaN) is 72, above 1 PB 51023; `toCollection` and cloneCollectionAsCapped's own value not strings (or missing): 14; other fields ignored",
    ),
    (
        "create (views)",
        "`pipeline` without `viewOn`: 72; a collection-only option with `viewOn`: 72; an empty `viewOn`: 2; creating a view again with the same `viewOn`, `pipeline` and collation succeeds, with another definition 48",
    ),
    (
        "collMod (views)",
        "`viewOn` or `pipeline` on a collection: 72 (option only supported on a view); any other option on a view: 72 (option not supported on a view); a view's `viewOn` without `pipeline` or the reverse: 72",
    ),
    (
        "hello, isMaster",
        "the fields of `hello.idl` are typed (`maxAwaitTimeMS` >= 0); fields it does not list pass (drivers add handshake fields, e.g. `backpressure`, `loadBalanced`, before servers list them); `client` again on a connection: 186",
    ),
    (
        "saslStart, saslContinue",
        "`payload` not a string or binData, or binData of a subtype other than 0: 2",
    ),
    (
        "getParameter",
        "parameter names it does not know are skipped; none known: 72",
    ),
    (
        "setParameter",
        "every name is checked before any is set: unknown 72, startup-only 20; no name 72; a value its parameter refuses 2 (`logComponentVerbosity` not a document 14); several names are set in name order and `was` is the first one's old value",
    ),
    (
        "configureFailPoint",
        "an unknown point, or a name that is not a string: 266; no `mode`: 20; `mode` not a string or document, `data` not a document, `times`/`skip` not a number: 14; an unknown mode, `times`/`skip` negative, fractional or above 2^31-1: 2; `activationProbability` is refused with 2 (cairn has no random activation); other fields ignored",
    ),
];

/// Expression operators whose argument errors carry the operator's own location code, as
/// mongod's evaluators and parsers raise them (tested in `query::expr::code_tests`).
const EXPRESSION_CODES: &[(&str, &str)] = &[
    (
        "$arrayElemAt, $first, $last",
        "not an array 28689; index not a number 28690, not a 32-bit integer 28691",
    ),
    (
        "$slice",
        "not an array 28724; position not a number 28725, not a 32-bit integer 28726; count not a number 28727, not a 32-bit integer 28728, not positive 28729; a null position or count gives null",
    ),
    ("$concatArrays", "an argument not an array 28664"),
    ("$reverseArray", "not an array 34435"),
    (
        "$indexOfArray",
        "not an array 40090; start or end not a 32-bit integer 40096, negative 40097",
    ),
    (
        "$anyElementTrue, $allElementsTrue",
        "not an array (null included) 17041, 17040",
    ),
    (
        "$range",
        "start not a number 34443, not a 32-bit integer 34444; end 34445, 34446; step 34447, 34448, zero 34449; too many elements 146",
    ),
    ("$objectToArray", "not a document 40390"),
    (
        "$arrayToObject",
        "not an array 40386; first element neither pair nor document 40398; mixed forms 40396/40391; a pair not of size 2 40397; a pair's key not a string 40395; a document without exactly `k` and `v` 40392/40393; `k` not a string 40394; a key with a null byte 4940400",
    ),
    ("$sortArray", "input not an array 2942504"),
    (
        "$zip",
        "argument not a document 34460; `inputs` not an array literal 34461; `defaults` 34462; `useLongestLength` not a bool 34463; another field 34464; no inputs 34465; defaults without useLongestLength 34466; defaults of another length 34467; an input not an array 34468",
    ),
    ("$strLenBytes, $strLenCP", "not a string 34473, 34471"),
    (
        "$split",
        "input not a string 40085; separator not a string 40086, empty 40087; a null separator gives null",
    ),
    (
        "$substr, $substrBytes",
        "start not a number 16034, negative 50752; length not a number 16035; a range cutting a UTF-8 character 28656 (start), 28657 (end)",
    ),
    (
        "$substrCP",
        "start not a number 34450, not a 32-bit integer 34451, negative 34455; length 34452, 34453, negative 34454",
    ),
    (
        "$indexOfBytes, $indexOfCP",
        "input not a string 40091, 40093; substring not a string 40092, 40094; start or end not a 32-bit integer 40096, negative 40097",
    ),
    (
        "$trim, $ltrim, $rtrim",
        "input not a string 50699; chars not a string 50700",
    ),
    (
        "$replaceOne, $replaceAll",
        "input, find, replacement not a string (checked before null) 51746, 51745, 51744",
    ),
    (
        "$regexMatch, $regexFind, $regexFindAll",
        "regex not a string or regex 51105; options not a string 51106, also given in the regex 51107, a bad flag 51108; a null byte in the pattern 51109 or options 51110; a pattern that does not compile 51111; then input not a string 51104",
    ),
    (
        "$mergeObjects, $getField, $setField, $unsetField",
        "an input not a document 40400 ($mergeObjects), 4161105 ($setField/$unsetField); $getField's field not a string 3041704",
    ),
    (
        "$round, $trunc",
        "not a number 51081; precision not integral 51082, outside [-20, 100] 51083",
    ),
    (
        "$let",
        "not a document 16874; another field 16875; no `vars` 16876, no `in` 16877; `vars` not a document 10065",
    ),
    (
        "$map",
        "not a document 16878; another field 16879; no `input` 16880, no `in` 16882; an input not an array 16883",
    ),
    (
        "$filter",
        "not a document 28646; another field 28647; no `input` 28648, no `cond` 28650; an input not an array 28651; `limit` not a 32-bit integer 327391, not positive 327392 (read only for a non-empty input; null means none)",
    ),
    (
        "$reduce",
        "not a document 40075; another field 40076; no `input` 40077, `initialValue` 40078, `in` 40079; an input not an array 40080",
    ),
    (
        "$switch",
        "not a document 40060; `branches` not an array 40061; a branch not a document 40062, with another field 40063, without `case` 40064 or `then` 40065; another field 40067; no branch 40068",
    ),
    (
        "Accumulators in $group, $bucket",
        "an array argument 40237 for any name (checked before the name is looked up); $count with arguments 14; $top/$bottom/$topN/$bottomN not a document 5788001, another field 5788002, no `n` 5788003, no `output` 5788004, no `sortBy` 5788005, `sortBy` not a document 10065; $accumulator 4544703-4544710",
    ),
    (
        "$cond",
        "another field 17083; no `if` 17080, `then` 17081, `else` 17082; the array form with other than 3 arguments 16020",
    ),
    (
        "$dateFromParts, $dateToParts, $dateFromString, $dateToString",
        "not a document 40519, 40524, 40540, 18629; another field 40518, 40520, 40541, 18534; no `date`/`dateString` 40522, 40542, 18628; $dateFromParts without `year` or `isoWeekYear` 40516, `year` with ISO fields 40489, `isoWeekYear` with `month`/`day` 40525, a part not an integer 40515",
    ),
    (
        "$dateAdd, $dateSubtract, $dateDiff, $dateTrunc (argument document)",
        "not a document 5166400, 5166301, 5439007; another field 5166401, 5166302, 5439008; a required field missing 5166402; $dateDiff's `startDate`, `endDate`, `unit` missing 5166303, 5166304, 5166305; $dateTrunc's `date`, `unit` missing 5439009, 5439010",
    ),
    (
        "$convert (argument document)",
        "not a document, another field, no `input` or `to`: 9 FailedToParse; a `to` document is read for `type` and `subtype` only (other fields ignored): `type` missing, null or neither a string nor a number 9, an unknown type name 2, `subtype` not a number (a null one included) 4341108 for a binData target; the shorthands $toString/$toInt/$toLong/$toDouble/$toDecimal/$toBool/$toDate/$toObjectId/$toUUID given other than one argument 50723",
    ),
    (
        "Argument documents of $trim, $regex*, $replaceOne/$replaceAll, $sortArray",
        "not a document 50696, 51103, 51751, 2942500; another field 50694, 31024, 51750, 2942501; a required field missing 50695 (`input`), 31022/31023 (`input`/`regex`), 51749/51748/51747 (`input`/`find`/`replacement`), 2942502/2942503 (`input`/`sortBy`); `sortBy` (a literal) a document that is not a non-empty pattern of 1/-1 2942505, a number other than 1 or -1 2942506, any other type 2942507",
    ),
    (
        "$setField, $unsetField, $getField (argument document)",
        "not a document 4161100; another field 4161101 (3041701 for $getField); no `field` 4161102 (3041702), `value` 4161103, `input` 4161109; `field` not constant 4161106, a field path 4161108, a constant not a string 4161107 (5654602 for $getField, whose `field` may be any expression in 8.0)",
    ),
    (
        "$dateAdd, $dateSubtract",
        "startDate not a date, timestamp or ObjectId 5166403; unit not a string 5439013, unknown 9; amount not integral 5166405; $dateSubtract of the smallest long 6045000",
    ),
    (
        "$dateDiff, $dateTrunc",
        "a date argument not a date, timestamp or ObjectId 5166307; unit not a string 5439013, unknown 9; startOfWeek not a string 5439015, unknown 5439016; $dateTrunc's binSize not a 64-bit integer 5439017, not positive 5439018",
    ),
];

/// The whole section.
pub fn render() -> String {
    let mut out = String::from(
        "## Argument checks\n\nGenerated from the argument tables (`commands/argspec`): a wrongly typed field answers 14 TypeMismatch (an index hint 9; the fields marked \"else 2\" BadValue, as mongod's own parsers of those types), a missing required one 40414, a number under its bound 51024. Generic arguments (`$db`, `lsid`, `comment`, `maxTimeMS`, `writeConcern`, `apiVersion`, ...) pass everywhere.\n\n",
    );
    let mut commands: Vec<&CommandSpec> = specs::ALL.to_vec();
    commands.extend(admin::ALL);
    commands.extend(bulk::ALL);
    commands.extend(collections::ALL);
    commands.extend(server::ALL);
    commands.extend(users::TABLES);
    commands.sort_by_key(|s| s.name);
    table(&mut out, &commands);
    out.push_str("Codes the hand parsers of these commands answer beyond the table:\n\n");
    for (command, text) in HAND_PARSED {
        out.push_str(&format!("- **{command}**: {text}\n"));
    }
    out.push('\n');
    out.push_str("Expression operators answer bad arguments with their own codes:\n\n");
    for (ops, text) in EXPRESSION_CODES {
        out.push_str(&format!("- **{ops}**: {text}\n"));
    }
    out.push('\n');
    out.push_str("Elements of array arguments and nested documents:\n\n");
    let mut entries: Vec<&CommandSpec> = specs::ENTRIES.to_vec();
    entries.extend(admin::ENTRIES);
    entries.extend(bulk::ENTRIES);
    table(&mut out, &entries);
    out.push_str("Index spec options (createIndexes): an unknown option answers 197, a wrongly typed one 14, a spec without `key` or `name` 9 (mongod names no index itself; drivers send the name). `wildcardProjection` on an index that is not a wildcard one answers 2, not an object 14, with a key other than `$**` or empty 9, mixing inclusions and exclusions 31253/31254.\n\n| option | type | refused on | on `_id` |\n| --- | --- | --- | --- |\n");
    for o in index_options::OPTIONS {
        let kinds: Vec<String> = o.refused_on.iter().map(|k| format!("{k:?}")).collect();
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            o.name,
            option_ty(o.ty),
            if kinds.is_empty() {
                "-".into()
            } else {
                kinds.join(", ")
            },
            if o.on_id { "yes" } else { "no (197)" },
        ));
    }
    out.push('\n');
    out
}
