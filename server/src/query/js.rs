//! Server-side JavaScript for `$where` and `$function`: an embedded QuickJS (through `rquickjs`)
//! with one runtime per thread. Scripts only ever run inside storage jobs (`offload::run`), so
//! never on an async worker.
//!
//! Sandbox: the context has the language's built-ins and nothing else (QuickJS's `std`/`os`
//! modules are not linked, no module loader is set, so there is no `require`, `import`, file or
//! network API). Each call is bounded by [`MEMORY_LIMIT`] bytes of JS heap (an allocation bomb
//! fails with 139 and the runtime is rebuilt) and by [`TIME_LIMIT`], and the interrupt handler
//! also stops it once the thread's current operation is interrupted (`maxTimeMS`, `killOp`,
//! client gone: see `crate::interrupt`).
//!
//! Values: documents and arrays become objects and arrays, int32 and double become JS numbers,
//! dates become `Date`, and NumberLong / ObjectId / NumberDecimal / BinData / Timestamp become
//! small tagged objects (`ObjectId(hex)` with `str`, `toString()`) that map back to the same BSON
//! (a NumberLong keeps its exact digits and reads as a number in arithmetic, as in mongod's
//! shell types). A JS integer-valued number comes back as int32 when it fits, else double.
//!
//! `scope` (mapReduce's, `$where`'s code-with-scope) is a document whose fields the function
//! sees as variables: [`call_scoped`] wraps the function in a `with` block over it.

use crate::error::{CommandError, CommandResult, ErrorCode, err};
use bson::{Bson, Document};
use rquickjs::function::Args;
use rquickjs::{Context, Ctx, Function, Object, Persistent, Runtime, Type, Value};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// JS heap bytes one thread's runtime may hold.
pub const MEMORY_LIMIT: usize = 64 << 20;
/// Longest one invocation may run when its operation has no earlier deadline.
pub const TIME_LIMIT: Duration = Duration::from_secs(60);
/// Compiled functions kept per thread before the cache is emptied.
const CACHE_MAX: usize = 256;

static ENABLED: AtomicBool = AtomicBool::new(true);

/// `--noscripting` / `security.javascriptEnabled: false` turn scripting off for the process.
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Relaxed);
}

/// Fails with `code` (mongod's 16395 for `$where`, 31264 for `$function`) when scripting is off.
pub fn require_enabled(code: ErrorCode) -> CommandResult<()> {
    if ENABLED.load(Relaxed) {
        Ok(())
    } else {
        Err(err(
            code,
            "Cannot run server-side javascript without the javascript engine enabled",
        ))
    }
}

/// Tagged-value constructors the mapping uses; ours, small, defined once per context.
const PRELUDE: &str = r#"
(function (g) {
  function tagged(tag, field) {
    var C = function (v) { if (!(this instanceof C)) return new C(v); this[field] = String(v); };
    C.prototype.toString = function () { return tag + '("' + this[field] + '")'; };
    C.prototype.toJSON = function () { return this[field]; };
    C.prototype.valueOf = function () { return this[field]; };
    C.prototype.equals = function (o) { return o instanceof C && o[field] === this[field]; };
    Object.defineProperty(C.prototype, '__bson', { value: tag });
    return C;
  }
  g.ObjectId = tagged('ObjectId', 'str');
  g.NumberDecimal = tagged('NumberDecimal', 'str');
  g.BinData = function (subtype, base64) {
    if (!(this instanceof g.BinData)) return new g.BinData(subtype, base64);
    this.subtype = subtype; this.base64 = base64;
  };
  Object.defineProperty(g.BinData.prototype, '__bson', { value: 'BinData' });
  g.Timestamp = function (t, i) {
    if (!(this instanceof g.Timestamp)) return new g.Timestamp(t, i);
    this.t = t; this.i = i;
  };
  Object.defineProperty(g.Timestamp.prototype, '__bson', { value: 'Timestamp' });
  // 64-bit integers keep their exact digits; arithmetic sees the nearest double (valueOf).
  g.NumberLong = function (v) {
    if (!(this instanceof g.NumberLong)) return new g.NumberLong(v);
    this.str = typeof v === 'number' ? String(Math.trunc(v)) : String(v === undefined ? 0 : v);
    this.floatApprox = Number(this.str);
  };
  g.NumberLong.prototype.valueOf = function () { return Number(this.str); };
  g.NumberLong.prototype.toNumber = g.NumberLong.prototype.valueOf;
  g.NumberLong.prototype.toString = function () { return 'NumberLong(' + this.str + ')'; };
  g.NumberLong.prototype.toJSON = function () { return this.str; };
  Object.defineProperty(g.NumberLong.prototype, '__bson', { value: 'NumberLong' });
  g.NumberInt = function (v) {
    if (!(this instanceof g.NumberInt)) return new g.NumberInt(v);
    this.num = Number(v === undefined ? 0 : v) | 0;
  };
  g.NumberInt.prototype.valueOf = function () { return this.num; };
  g.NumberInt.prototype.toNumber = g.NumberInt.prototype.valueOf;
  g.NumberInt.prototype.toString = function () { return 'NumberInt(' + this.num + ')'; };
  Object.defineProperty(g.NumberInt.prototype, '__bson', { value: 'NumberInt' });
  // The helpers mapReduce functions commonly call (mongod's shell defines them too).
  Array.sum = function (a) {
    if (a.length === 0) return null;
    var s = a[0];
    for (var i = 1; i < a.length; i++) s += a[i];
    return s;
  };
  Array.avg = function (a) { return a.length === 0 ? null : Array.sum(a) / a.length; };
  Array.contains = function (a, x) { return a.indexOf(x) >= 0; };
  Array.unique = function (a) {
    var out = [];
    for (var i = 0; i < a.length; i++) if (out.indexOf(a[i]) < 0) out.push(a[i]);
    return out;
  };
  g.tojson = function (v) { return JSON.stringify(v); };
  g.print = function () {};
  g.printjson = function () {};
})(globalThis);
"#;

struct Engine {
    // Field order: the context and cached functions go before the runtime.
    cache: HashMap<String, Persistent<Function<'static>>>,
    context: Context,
    _runtime: Runtime,
}

thread_local! {
    static ENGINE: RefCell<Option<Engine>> = const { RefCell::new(None) };
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
}

fn new_engine() -> CommandResult<Engine> {
    let rt = Runtime::new().map_err(js_failure)?;
    rt.set_memory_limit(MEMORY_LIMIT);
    rt.set_max_stack_size(512 << 10);
    rt.set_interrupt_handler(Some(Box::new(|| {
        DEADLINE.with(|d| d.get().is_some_and(|t| Instant::now() >= t))
            || crate::interrupt::check().is_err()
    })));
    let context = Context::full(&rt).map_err(js_failure)?;
    context.with(|ctx| ctx.eval::<(), _>(PRELUDE).map_err(|e| caught(&ctx, e)))?;
    Ok(Engine {
        cache: HashMap::new(),
        context,
        _runtime: rt,
    })
}

fn js_failure(e: rquickjs::Error) -> CommandError {
    err(ErrorCode::JSInterpreterFailure, format!("{e}"))
}

/// Turns a failed call into mongod's error: the operation's own interruption when the
/// interrupt handler stopped it, 139 JSInterpreterFailure with the exception text otherwise.
fn caught(ctx: &Ctx<'_>, e: rquickjs::Error) -> CommandError {
    crate::interrupt::check().err().unwrap_or_else(|| {
        let text = match e {
            rquickjs::Error::Exception => {
                let v = ctx.catch();
                match v.as_exception() {
                    Some(x) => x.message().unwrap_or_default(),
                    None => v
                        .as_string()
                        .and_then(|s| s.to_string().ok())
                        .unwrap_or_else(|| format!("{v:?}")),
                }
            }
            other => other.to_string(),
        };
        if DEADLINE.with(|d| d.get().is_some_and(|t| Instant::now() >= t)) {
            return crate::interrupt::time_limit_error();
        }
        let text = if text.is_empty() {
            "interrupted or out of memory".to_string()
        } else {
            text
        };
        err(ErrorCode::JSInterpreterFailure, format!("js error: {text}"))
    })
}

/// The source `$where` gives: a function, or an expression over `this`/`obj`.
pub fn where_source(code: &str) -> String {
    if code.trim_start().starts_with("function") {
        format!("function() {{ var obj = this; return ({code}).call(this); }}")
    } else {
        format!("function() {{ var obj = this; return ({code}); }}")
    }
}

/// Calls the JS function `source` with `this` bound to `this` (or undefined) and `args`.
pub fn call(source: &str, this: Option<&Document>, args: &[Bson]) -> CommandResult<Bson> {
    if storage::nowait::active() {
        // JavaScript runs on the storage pool only (see `crate::offload::run_tried`).
        storage::nowait::refuse();
        return Err(err(
            ErrorCode::InternalError,
            "JavaScript is not run on an async worker",
        ));
    }
    ENGINE.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(new_engine()?);
        }
        let engine = slot.as_mut().expect("engine just built");
        DEADLINE.with(|d| d.set(Some(Instant::now() + TIME_LIMIT)));
        let out = engine
            .context
            .with(|ctx| run(&ctx, &mut engine.cache, source, this, args));
        DEADLINE.with(|d| d.set(None));
        if out.is_err() {
            // An exhausted heap or a stopped script may leave the runtime unusable: start again.
            *slot = None;
        }
        out
    })
}

/// [`call`] with the fields of `scope` visible to the function as variables.
pub fn call_scoped(
    source: &str,
    scope: Option<&Document>,
    this: Option<&Document>,
    args: &[Bson],
) -> CommandResult<Bson> {
    match scope {
        Some(s) if !s.is_empty() => {
            let wrapped = format!(
                "function(__scope) {{ with (__scope) {{ return ({source})\
                 .apply(this, Array.prototype.slice.call(arguments, 1)); }} }}"
            );
            let mut all = Vec::with_capacity(args.len() + 1);
            all.push(Bson::Document(s.clone()));
            all.extend_from_slice(args);
            call(&wrapped, this, &all)
        }
        _ => call(source, this, args),
    }
}

/// Runs mapReduce's `map` with `this` bound to `doc` and returns what it emitted, as
/// `{k, v}` documents in emit order (the shape mongod's `$_internalJsEmit` produces).
pub fn emits(map: &str, scope: Option<&Document>, doc: &Document) -> CommandResult<Vec<Bson>> {
    let wrapped = format!(
        "function() {{ var __out = []; \
         var emit = function(k, v) {{ \
           if (arguments.length !== 2) throw new Error('emit takes 2 args'); \
           __out.push({{k: k === undefined ? null : k, v: v}}); }}; \
         ({map}).call(this); return __out; }}"
    );
    match call_scoped(&wrapped, scope, Some(doc), &[])? {
        Bson::Array(items) => Ok(items),
        _ => Ok(Vec::new()),
    }
}

fn run(
    ctx: &Ctx<'_>,
    cache: &mut HashMap<String, Persistent<Function<'static>>>,
    source: &str,
    this: Option<&Document>,
    args: &[Bson],
) -> CommandResult<Bson> {
    let f = match cache.get(source) {
        Some(p) => p.clone().restore(ctx).map_err(js_failure)?,
        None => {
            // User code runs in sloppy mode, as mongod's engine runs it (undeclared
            // assignments, `with` for scopes).
            let mut options = rquickjs::context::EvalOptions::default();
            options.strict = false;
            let v: Value = ctx
                .eval_with_options(format!("({source})"), options)
                .map_err(|e| caught(ctx, e))?;
            let Some(f) = v.into_function() else {
                return Err(err(
                    ErrorCode::JSInterpreterFailure,
                    "the script is not a function",
                ));
            };
            if cache.len() >= CACHE_MAX {
                cache.clear();
            }
            cache.insert(source.to_string(), Persistent::save(ctx, f.clone()));
            f
        }
    };
    let mut call = Args::new(ctx.clone(), args.len());
    let to_js = |b: &Bson| to_js(ctx, b).map_err(|e| caught(ctx, e));
    if let Some(d) = this {
        call.this(to_js(&Bson::Document(d.clone()))?)
            .map_err(js_failure)?;
    }
    for a in args {
        call.push_arg(to_js(a)?).map_err(js_failure)?;
    }
    let v: Value = f.call_arg(call).map_err(|e| caught(ctx, e))?;
    from_js(ctx, &v, 0)
}

fn global_fn<'js>(ctx: &Ctx<'js>, name: &str) -> rquickjs::Result<Function<'js>> {
    ctx.globals().get(name)
}

fn to_js<'js>(ctx: &Ctx<'js>, b: &Bson) -> rquickjs::Result<Value<'js>> {
    let c = ctx.clone();
    Ok(match b {
        Bson::Null => Value::new_null(c),
        Bson::Undefined => Value::new_undefined(c),
        Bson::Boolean(v) => Value::new_bool(c, *v),
        Bson::Int32(v) => Value::new_int(c, *v),
        Bson::Int64(v) => global_fn(ctx, "NumberLong")?.call((v.to_string(),))?,
        Bson::Double(v) => Value::new_float(c, *v),
        Bson::String(s) | Bson::Symbol(s) | Bson::JavaScriptCode(s) => {
            rquickjs::String::from_str(c, s)?.into_value()
        }
        Bson::Document(d) => {
            let o = Object::new(c)?;
            for (k, v) in d {
                o.set(k.as_str(), to_js(ctx, v)?)?;
            }
            o.into_value()
        }
        Bson::Array(a) => {
            let arr = rquickjs::Array::new(c)?;
            for (i, v) in a.iter().enumerate() {
                arr.set(i, to_js(ctx, v)?)?;
            }
            arr.into_value()
        }
        Bson::DateTime(d) => ctx
            .globals()
            .get::<_, rquickjs::Constructor>("Date")?
            .construct((d.timestamp_millis() as f64,))?,
        Bson::ObjectId(id) => global_fn(ctx, "ObjectId")?.call((id.to_hex(),))?,
        Bson::Decimal128(d) => global_fn(ctx, "NumberDecimal")?.call((d.to_string(),))?,
        Bson::Binary(bin) => {
            use base64::Engine as _;
            let b64 = base64::engine::general_purpose::STANDARD.encode(&bin.bytes);
            global_fn(ctx, "BinData")?.call((u8::from(bin.subtype) as i32, b64))?
        }
        Bson::Timestamp(t) => {
            global_fn(ctx, "Timestamp")?.call((t.time as f64, t.increment as f64))?
        }
        Bson::RegularExpression(r) => ctx
            .globals()
            .get::<_, rquickjs::Constructor>("RegExp")?
            .construct((
                r.pattern.as_str(),
                r.options.as_str().replace(['l', 'x'], ""),
            ))?,
        other => rquickjs::String::from_str(c, &other.to_string())?.into_value(),
    })
}

/// Nesting bound for results (a self-referencing object would otherwise recurse forever).
const MAX_DEPTH: usize = 150;

fn from_js<'js>(ctx: &Ctx<'js>, v: &Value<'js>, depth: usize) -> CommandResult<Bson> {
    if depth > MAX_DEPTH {
        return Err(err(
            ErrorCode::JSInterpreterFailure,
            "js result nested too deeply",
        ));
    }
    let bad = |e: rquickjs::Error| caught(ctx, e);
    Ok(match v.type_of() {
        Type::Undefined | Type::Uninitialized => Bson::Undefined,
        Type::Null => Bson::Null,
        Type::Bool => Bson::Boolean(v.as_bool().unwrap_or(false)),
        Type::Int => Bson::Int32(v.as_int().unwrap_or(0)),
        Type::Float => number(v.as_float().unwrap_or(f64::NAN)),
        Type::String => Bson::String(
            v.as_string()
                .map(|s| s.to_string())
                .transpose()
                .map_err(bad)?
                .unwrap_or_default(),
        ),
        Type::Array => {
            let arr = v.as_array().expect("type is array");
            let mut out = Vec::with_capacity(arr.len());
            for item in arr.iter::<Value>() {
                out.push(from_js(ctx, &item.map_err(bad)?, depth + 1)?);
            }
            Bson::Array(out)
        }
        Type::Object | Type::Exception => {
            let o = v.as_object().expect("type is object");
            let date: Value = global_fn(ctx, "Date").map_err(bad)?.into_value();
            if o.is_instance_of(&date) {
                let get: Function = o.get("getTime").map_err(bad)?;
                let ms: f64 = get
                    .call((rquickjs::function::This(o.clone()),))
                    .map_err(bad)?;
                return Ok(Bson::DateTime(bson::DateTime::from_millis(ms as i64)));
            }
            let tag: Option<String> = o.get("__bson").map_err(bad)?;
            if let Some(t) = tag {
                return tagged(&t, o).map_err(bad);
            }
            let mut d = Document::new();
            for kv in o.props::<String, Value>() {
                let (k, val) = kv.map_err(bad)?;
                if val.type_of() == Type::Function {
                    continue;
                }
                d.insert(k, from_js(ctx, &val, depth + 1)?);
            }
            Bson::Document(d)
        }
        Type::Function | Type::Constructor => Bson::Null,
        _ => Bson::Null,
    })
}

fn number(f: f64) -> Bson {
    if f.fract() == 0.0
        && f >= f64::from(i32::MIN)
        && f <= f64::from(i32::MAX)
        && !(f == 0.0 && f.is_sign_negative())
    {
        Bson::Int32(f as i32)
    } else {
        Bson::Double(f)
    }
}

fn tagged(tag: &str, o: &Object<'_>) -> rquickjs::Result<Bson> {
    let s = |k: &str| o.get::<_, String>(k);
    let fail = || rquickjs::Error::new_from_js("object", "bson value");
    Ok(match tag {
        "ObjectId" => {
            Bson::ObjectId(bson::oid::ObjectId::parse_str(s("str")?).map_err(|_| fail())?)
        }
        "NumberDecimal" => Bson::Decimal128(s("str")?.parse().map_err(|_| fail())?),
        "BinData" => {
            use base64::Engine as _;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(s("base64")?)
                .map_err(|_| fail())?;
            let sub: i32 = o.get("subtype")?;
            Bson::Binary(bson::Binary {
                subtype: bson::spec::BinarySubtype::from(sub as u8),
                bytes,
            })
        }
        "NumberLong" => Bson::Int64(s("str")?.parse().map_err(|_| fail())?),
        "NumberInt" => Bson::Int32(o.get("num")?),
        _ => Bson::Timestamp(bson::Timestamp {
            time: o.get::<_, f64>("t")? as u32,
            increment: o.get::<_, f64>("i")? as u32,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn calls_with_this_and_args() {
        let d = doc! {"a": 2, "b": "x"};
        let src = where_source("this.a > 1 && obj.b == 'x'");
        assert_eq!(call(&src, Some(&d), &[]).unwrap(), Bson::Boolean(true));
        let f = "function(x, y) { return x * y + 0.5; }";
        assert_eq!(
            call(f, None, &[Bson::Int32(3), Bson::Int64(4)]).unwrap(),
            Bson::Double(12.5)
        );
    }

    #[test]
    fn bson_types_round_trip() {
        let oid = bson::oid::ObjectId::new();
        let v = doc! {
            "oid": oid,
            "date": bson::DateTime::from_millis(1_700_000_000_123),
            "dec": "1.25".parse::<bson::Decimal128>().unwrap(),
            "bin": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![1, 2, 3] },
            "ts": bson::Timestamp { time: 5, increment: 7 },
            "arr": [1, "two", null, {"n": 2.5}],
        };
        let back = call(
            "function(x) { return x; }",
            None,
            &[Bson::Document(v.clone())],
        )
        .unwrap();
        assert_eq!(back, Bson::Document(v));
        let hex = call(
            "function(x) { return x.str; }",
            None,
            &[Bson::ObjectId(oid)],
        )
        .unwrap();
        assert_eq!(hex, Bson::String(oid.to_hex()));
    }

    #[test]
    fn number_long_keeps_its_digits_and_helpers_exist() {
        let big = Bson::Int64(9_007_199_254_740_993);
        let same = call(
            "function(x) { return x; }",
            None,
            std::slice::from_ref(&big),
        )
        .unwrap();
        assert_eq!(same, big);
        let sum = call("function(x) { return x + 1; }", None, &[Bson::Int64(41)]).unwrap();
        assert_eq!(sum, Bson::Int32(42));
        let made = call(
            "function() { return [NumberLong(5), NumberInt(6)]; }",
            None,
            &[],
        );
        assert_eq!(
            made.unwrap(),
            Bson::Array(vec![Bson::Int64(5), Bson::Int32(6)])
        );
        let s = call(
            "function(a) { return Array.sum(a) + Array.avg(a); }",
            None,
            &[Bson::Array(vec![
                Bson::Int32(1),
                Bson::Int32(2),
                Bson::Int32(3),
            ])],
        );
        assert_eq!(s.unwrap(), Bson::Int32(8));
    }

    #[test]
    fn scope_and_emit() {
        let scope = doc! {"factor": 3};
        let f = "function(x) { return x * factor + (this.a || 0); }";
        let this = doc! {"a": 1};
        assert_eq!(
            call_scoped(f, Some(&scope), Some(&this), &[Bson::Int32(2)]).unwrap(),
            Bson::Int32(7)
        );
        let map = "function() { for (var i = 0; i < this.n; i++) emit(this.k, i * factor); }";
        let out = emits(map, Some(&scope), &doc! {"k": "a", "n": 2}).unwrap();
        assert_eq!(
            out,
            vec![
                Bson::Document(doc! {"k": "a", "v": 0}),
                Bson::Document(doc! {"k": "a", "v": 3})
            ]
        );
        let e = emits("function() { emit(1); }", None, &doc! {}).unwrap_err();
        assert_eq!(e.code, ErrorCode::JSInterpreterFailure);
    }

    #[test]
    fn errors_and_sandbox() {
        let e = call("function() { throw new Error('boom'); }", None, &[]).unwrap_err();
        assert_eq!(e.code, ErrorCode::JSInterpreterFailure);
        assert!(e.message.contains("boom"), "{}", e.message);
        for probe in [
            "require",
            "process",
            "std",
            "os",
            "fetch",
            "XMLHttpRequest",
            "import",
        ] {
            let src = format!("function() {{ return typeof {probe}; }}");
            let t = call(&src, None, &[]);
            if let Ok(t) = t {
                assert_eq!(t, Bson::String("undefined".into()), "{probe}");
            }
        }
        let bomb = "function() { var a = []; for (;;) a.push(new Array(1e6).fill(1)); }";
        let e = call(bomb, None, &[]).unwrap_err();
        assert_eq!(e.code, ErrorCode::JSInterpreterFailure);
        // The engine is rebuilt and usable after the bomb.
        assert_eq!(
            call("function() { return 1; }", None, &[]).unwrap(),
            Bson::Int32(1)
        );
    }

    #[test]
    fn interrupted_operation_stops_an_endless_loop() {
        let op = crate::interrupt::Interrupt::default();
        op.set_deadline(Some(Instant::now() + Duration::from_millis(50)));
        let _installed = op.install();
        let e = call("function() { for (;;) {} }", None, &[]).unwrap_err();
        assert_eq!(e.code, ErrorCode::MaxTimeMSExpired);
    }
}
