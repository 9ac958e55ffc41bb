//! Proves the math operators keep decimal128 operands in decimal128 at its edges (the largest
//! finite value, the smallest subnormal, ±0, NaN, ±Infinity, overflow and underflow, rounding
//! half to even) and fail with mongod's codes, over a corpus of hand-computed cases.
//! How: each case evaluates `{op: args}` on decimal literals and compares the result's text
//! (decimal128's canonical string, so the exponent counts too) or its code.

use super::Expr;
use bson::{Bson, Decimal128, doc};

const MAX: &str = "9.999999999999999999999999999999999E+6144";
const MIN_SUBNORMAL: &str = "1E-6176";

fn d(s: &str) -> Bson {
    Bson::Decimal128(s.parse::<Decimal128>().expect("decimal literal"))
}

fn eval(op: &str, args: Bson) -> Result<Bson, crate::error::CommandError> {
    let raw = bson::RawDocumentBuf::new();
    Expr::parse(&Bson::Document(doc! { op: args }))?.evaluate(&raw)
}

/// The result as decimal128 text; a double result is shown as `double:<value>`.
fn text(op: &str, args: Bson) -> String {
    match eval(op, args).expect("evaluates") {
        Bson::Decimal128(x) => x.to_string(),
        Bson::Double(f) => format!("double:{f}"),
        other => format!("{other:?}"),
    }
}

fn code(op: &str, args: Bson) -> i32 {
    eval(op, args).expect_err("must fail").code.code()
}

#[test]
fn transcendental_functions_round_to_34_digits() {
    let cases: &[(&str, Bson, &str)] = &[
        ("$sqrt", d("4"), "2"),
        ("$sqrt", d("2"), "1.414213562373095048801688724209698"),
        ("$sqrt", d(MIN_SUBNORMAL), "1E-3088"),
        ("$sqrt", d("0"), "0"),
        ("$sqrt", d("-0"), "-0"),
        ("$sqrt", d("Infinity"), "Infinity"),
        ("$exp", d("0"), "1"),
        ("$exp", d("1"), "2.718281828459045235360287471352662"),
        ("$exp", d("20000"), "Infinity"),
        ("$exp", d("-Infinity"), "0"),
        ("$ln", d("1"), "0"),
        ("$ln", d("10"), "2.302585092994045684017991454684364"),
        ("$log10", d("1000"), "3"),
        ("$log10", d(MIN_SUBNORMAL), "-6176"),
        ("$log10", d(MAX), "6145.000000000000000000000000000000"),
        ("$pow", Bson::Array(vec![d("2"), Bson::Int32(10)]), "1024"),
        (
            "$pow",
            Bson::Array(vec![d("2"), d("0.5")]),
            "1.414213562373095048801688724209698",
        ),
        (
            "$pow",
            Bson::Array(vec![d("10"), Bson::Int32(7000)]),
            "Infinity",
        ),
        ("$pow", Bson::Array(vec![d("-8"), d("0.5")]), "NaN"),
        ("$pow", Bson::Array(vec![Bson::Int32(2), d("-1")]), "0.5"),
    ];
    for (op, args, want) in cases {
        assert_eq!(text(op, args.clone()), *want, "{op} {args}");
    }
    // e^-20000 is below the smallest subnormal: zero, in decimal.
    let under = eval("$exp", d("-20000")).unwrap();
    assert!(matches!(under, Bson::Decimal128(_)));
    assert_eq!(
        crate::query::decimal::cmp_zero(&under),
        Some(std::cmp::Ordering::Equal)
    );
    // A logarithm of the extremes is finite.
    assert!(text("$ln", d(MIN_SUBNORMAL)).starts_with("-14220.76"));
    assert!(text("$ln", d(MAX)).starts_with("14149.38"));
}

#[test]
fn floor_ceil_round_trunc_keep_decimals() {
    let cases: &[(&str, Bson, &str)] = &[
        ("$floor", d("-2.5"), "-3"),
        ("$ceil", d("-2.5"), "-2"),
        ("$floor", d("2.5"), "2"),
        ("$ceil", d(MIN_SUBNORMAL), "1"),
        ("$floor", d(MIN_SUBNORMAL), "0"),
        ("$floor", d("NaN"), "NaN"),
        // IEEE's quantize (mongod's BID follows it) makes NaN of an infinity.
        ("$ceil", d("-Infinity"), "NaN"),
        ("$round", d("2.5"), "2"),
        ("$round", d("3.5"), "4"),
        ("$round", d("-2.5"), "-2"),
        ("$trunc", d("-2.7"), "-2"),
        (
            "$round",
            Bson::Array(vec![d("1234.5678"), Bson::Int32(2)]),
            "1234.57",
        ),
        (
            "$trunc",
            Bson::Array(vec![d("1234.5678"), Bson::Int32(-2)]),
            "1.2E+3",
        ),
        ("$round", d(MAX), MAX),
        ("$abs", d(&format!("-{MAX}")), MAX),
        ("$abs", d(&format!("-{MIN_SUBNORMAL}")), MIN_SUBNORMAL),
    ];
    for (op, args, want) in cases {
        assert_eq!(text(op, args.clone()), *want, "{op} {args}");
    }
}

#[test]
fn nan_and_domain_errors_as_mongod() {
    assert_eq!(text("$sqrt", d("NaN")), "NaN");
    assert_eq!(text("$exp", d("NaN")), "NaN");
    // A decimal NaN is not above zero: mongod takes the double path, and ln(NaN) is NaN.
    assert_eq!(text("$ln", d("NaN")), "double:NaN");
    assert_eq!(code("$sqrt", d("-1E-6176")), 28714);
    assert_eq!(code("$sqrt", Bson::Int32(-1)), 28714);
    assert_eq!(code("$ln", d("-0")), 28766);
    assert_eq!(
        eval("$ln", d("-0")).unwrap_err().message,
        "$ln's argument must be a positive number, but is -0"
    );
    assert_eq!(code("$log10", d("-2.5")), 28761);
    assert_eq!(
        code("$log", Bson::Array(vec![d("0"), Bson::Int32(10)])),
        28758
    );
    assert_eq!(code("$log", Bson::Array(vec![d("8"), d("1")])), 28759);
    assert_eq!(
        code("$log", Bson::Array(vec![Bson::from("x"), Bson::Int32(10)])),
        28756
    );
    assert_eq!(
        code("$log", Bson::Array(vec![Bson::Int32(8), Bson::from("x")])),
        28757
    );
    assert_eq!(code("$pow", Bson::Array(vec![d("0"), d("-1")])), 28764);
    assert_eq!(
        code("$pow", Bson::Array(vec![Bson::from("x"), Bson::Int32(1)])),
        28762
    );
    assert_eq!(
        code("$pow", Bson::Array(vec![Bson::Int32(1), Bson::from("x")])),
        28763
    );
    assert_eq!(code("$sqrt", Bson::from("x")), 28765);
    assert_eq!(code("$floor", Bson::from("x")), 28765);
    // A tiny decimal base is not zero.
    assert_eq!(
        text("$pow", Bson::Array(vec![d(MIN_SUBNORMAL), d("-1")])),
        "Infinity"
    );
    // ln(100) rounds to exactly twice ln(10) at 34 digits, so the quotient is exact.
    assert_eq!(
        text("$log", Bson::Array(vec![d("100"), Bson::Int32(10)])),
        "2"
    );
}
