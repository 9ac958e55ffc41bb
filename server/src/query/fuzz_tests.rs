// Proves that random filters, updates, projections and sorts over random documents never panic
// and keep their algebraic laws ($not/$nor/$or/$in vs their definitions, no-op updates leave
// documents byte-identical), by seeded generation (QUERY_FUZZ_SEED picks the seed; it is
// printed on failure).

use super::matcher::Filter;
use super::projection::Projection;
use super::sort::SortSpec;
use super::update::{ApplyContext, Update};
use bson::{Bson, Document, RawDocumentBuf, doc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Cases per test; each case is a handful of small documents, so this stays well under a second.
const CASES: usize = 400;
const FIELDS: &[&str] = &["a", "b", "a.b", "a.0", "b.c.d", "_id"];

fn seed() -> u64 {
    std::env::var("QUERY_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_c0de)
}

struct Gen {
    rng: StdRng,
    atoms: Vec<Bson>,
}

impl Gen {
    fn new() -> Gen {
        let atoms = storage::order::corpus()
            .into_iter()
            .filter(|v| !matches!(v, Bson::Undefined | Bson::Array(_) | Bson::Document(_)))
            .collect();
        Gen {
            rng: StdRng::seed_from_u64(seed()),
            atoms,
        }
    }

    fn atom(&mut self) -> Bson {
        let i = self.rng.random_range(0..self.atoms.len());
        self.atoms[i].clone()
    }

    fn small(&mut self) -> Bson {
        Bson::Int32(self.rng.random_range(-2..4))
    }

    fn value(&mut self, depth: usize) -> Bson {
        match self.rng.random_range(0..10) {
            0..=3 => self.small(),
            4..=5 => self.atom(),
            6..=7 if depth < 3 => {
                let n = self.rng.random_range(0..4);
                Bson::Array((0..n).map(|_| self.value(depth + 1)).collect())
            }
            8..=9 if depth < 3 => Bson::Document(self.document(depth + 1)),
            _ => Bson::Null,
        }
    }

    fn document(&mut self, depth: usize) -> Document {
        let mut d = Document::new();
        for name in ["a", "b", "c"] {
            if self.rng.random_bool(0.6) {
                d.insert(name, self.value(depth));
            }
        }
        d
    }

    fn field(&mut self) -> &'static str {
        FIELDS[self.rng.random_range(0..FIELDS.len())]
    }

    fn predicate(&mut self) -> Bson {
        let v = self.small();
        match self.rng.random_range(0..12) {
            0 => v,
            1 => Bson::Document(doc! {"$gt": v}),
            2 => Bson::Document(doc! {"$lte": self.atom()}),
            3 => Bson::Document(doc! {"$in": [v, self.small(), Bson::Null]}),
            4 => Bson::Document(doc! {"$exists": self.rng.random_bool(0.5)}),
            5 => {
                let t = ["int", "null", "array", "object"][self.rng.random_range(0..4)];
                Bson::Document(doc! {"$type": t})
            }
            6 => Bson::Document(doc! {"$size": self.rng.random_range(0..3)}),
            7 => Bson::Document(doc! {"$elemMatch": {"$gte": v}}),
            8 => Bson::Document(doc! {"$all": [v]}),
            9 => Bson::Document(doc! {"$mod": [2, 1]}),
            10 => Bson::Document(doc! {"$ne": v}),
            _ => Bson::Null,
        }
    }

    fn filter(&mut self) -> Document {
        let mut d = Document::new();
        d.insert(self.field(), self.predicate());
        d
    }
}

fn raw(d: &Document) -> RawDocumentBuf {
    RawDocumentBuf::try_from(d).expect("generated documents encode")
}

fn matches(f: &Document, d: &RawDocumentBuf) -> bool {
    Filter::parse(f)
        .expect("generated filters parse")
        .matches(d)
}

#[test]
fn filter_laws_hold() {
    let mut g = Gen::new();
    let mut outcomes = [0usize; 2];
    for case in 0..CASES {
        let (f1, f2) = (g.filter(), g.filter());
        let d = raw(&g.document(0));
        let (m1, m2) = (matches(&f1, &d), matches(&f2, &d));
        outcomes[usize::from(m1)] += 1;
        let ctx = format!("seed {} case {case}: {f1} / {f2} on {d:?}", seed());
        assert_eq!(matches(&doc! {"$nor": [f1.clone()]}, &d), !m1, "{ctx}");
        assert_eq!(
            matches(&doc! {"$or": [f1.clone(), f2.clone()]}, &d),
            m1 || m2,
            "{ctx}"
        );
        assert_eq!(
            matches(&doc! {"$and": [f1.clone(), f2.clone()]}, &d),
            m1 && m2,
            "{ctx}"
        );
        let (field, pred) = f1
            .iter()
            .next()
            .map(|(k, v)| (k.clone(), v.clone()))
            .expect("one field");
        if let Bson::Document(ops) = &pred
            && ops.keys().next().is_some_and(|k| k.starts_with('$'))
        {
            assert_eq!(
                matches(&doc! {field.clone(): {"$not": ops.clone()}}, &d),
                !m1,
                "{ctx}"
            );
        } else if !matches!(pred, Bson::Document(_)) {
            assert_eq!(
                matches(&doc! {field.clone(): {"$in": [pred.clone()]}}, &d),
                m1,
                "{ctx}"
            );
            assert_eq!(
                matches(&doc! {field.clone(): {"$nin": [pred.clone()]}}, &d),
                !m1,
                "{ctx}"
            );
        }
    }
    // Both outcomes must be common, or the laws above were checked vacuously.
    assert!(
        outcomes.iter().all(|&n| n > CASES / 10),
        "outcomes {outcomes:?}"
    );
}

#[test]
fn updates_never_panic_and_no_ops_are_exact() {
    let mut g = Gen::new();
    let ops = [
        "$set",
        "$unset",
        "$inc",
        "$mul",
        "$min",
        "$max",
        "$push",
        "$addToSet",
        "$pop",
        "$pull",
        "$pullAll",
        "$currentDate",
        "$rename",
    ];
    let ctx = ApplyContext {
        is_insert: false,
        positional: Some(0),
        now: bson::DateTime::from_millis(0),
    };
    for case in 0..CASES {
        let op = ops[g.rng.random_range(0..ops.len())];
        let arg = match op {
            "$pop" => Bson::Int32(if g.rng.random_bool(0.5) { 1 } else { -1 }),
            "$pullAll" => Bson::Array(vec![g.small()]),
            "$currentDate" => Bson::Boolean(true),
            "$rename" => Bson::String("z".into()),
            "$inc" | "$mul" => g.small(),
            _ => g.value(1),
        };
        let field = ["a", "b.c", "a.0", "a.$[]", "a.$"][g.rng.random_range(0..5)];
        let Ok(update) = Update::parse(&doc! {op: {field: arg}}, None) else {
            continue;
        };
        let original = g.document(0);
        let mut d = original.clone();
        if let Ok(changed) = update.apply(&mut d, &ctx)
            && !changed
        {
            assert_eq!(
                raw(&d).as_bytes(),
                raw(&original).as_bytes(),
                "seed {} case {case}: {op} {field}",
                seed()
            );
        }
    }
}

#[test]
fn projections_and_sorts_never_panic() {
    let mut g = Gen::new();
    for _ in 0..CASES {
        let mut spec = Document::new();
        for _ in 0..g.rng.random_range(1..3) {
            let v = match g.rng.random_range(0..4) {
                0 => Bson::Int32(1),
                1 => Bson::Int32(0),
                2 => Bson::Document(doc! {"$slice": g.small()}),
                _ => Bson::String("$a".into()),
            };
            spec.insert(g.field(), v);
        }
        let (a, b) = (raw(&g.document(0)), raw(&g.document(0)));
        if let Ok(p) = Projection::parse(&spec) {
            let _ = p.apply(&a, Some(0));
        }
        let sort = SortSpec::parse(&doc! {g.field(): 1, "b": -1}).expect("sort parses");
        assert_eq!(sort.compare(&a, &b), sort.compare(&b, &a).reverse());
    }
}
