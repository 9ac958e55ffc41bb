//! Capped collections at the command layer: `create`'s `capped`/`size`/`max` (parsed with
//! mongod's errors and stored in the collection's options, which the storage engine reads:
//! `storage::capped`), `convertToCapped` and `cloneCollectionAsCapped`, and the capped fields
//! of `collStats`. Trimming itself (oldest documents out when a bound is passed) is storage's.

use super::args::{self, type_name};
use super::argspec;
use super::{Reply, Request, off_thread};
use crate::error::{CommandResult, ErrorCode, err, storage_error};
use crate::state::ServerState;
use bson::{Bson, Document, doc};
use std::sync::Arc;
use storage::{Collection, Direction, WriteOp};

/// Largest `size` of a capped collection (mongod's 1 PB).
pub const CAPPED_SIZE_BYTES_MAX: i64 = 1 << 50;
/// Documents copied per write batch by convertToCapped and cloneCollectionAsCapped.
const COPY_BATCH_COUNT: usize = 500;

fn number(v: &Bson) -> Option<i64> {
    match v {
        Bson::Int32(n) => Some(i64::from(*n)),
        Bson::Int64(n) => Some(*n),
        Bson::Double(f) if f.is_finite() => Some(f.trunc() as i64),
        Bson::Decimal128(d) => d.to_string().parse::<f64>().ok().map(|f| f.trunc() as i64),
        _ => None,
    }
}

/// `size` of create/convertToCapped/cloneCollectionAsCapped: a number in [1, 1 PB].
fn size_arg(command: &str, v: &Bson) -> CommandResult<Option<i64>> {
    if matches!(v, Bson::Null) {
        return Ok(None);
    }
    let Some(n) = number(v) else {
        return Err(err(
            ErrorCode::TypeMismatch,
            format!(
                "BSON field '{command}.size' is the wrong type '{}', expected types '[long, int, decimal, double']",
                type_name(v)
            ),
        ));
    };
    if n < 1 {
        return Err(err(
            ErrorCode::Location51024,
            format!("BSON field 'size' value must be >= 1, actual value '{n}'"),
        ));
    }
    if n > CAPPED_SIZE_BYTES_MAX {
        return Err(err(
            ErrorCode::Location51023,
            format!(
                "BSON field 'size' value must be <= {CAPPED_SIZE_BYTES_MAX}, actual value '{n}'"
            ),
        ));
    }
    Ok(Some(n))
}

/// Reads `capped`, `size` and `max` of a `create` into `options` (as mongod lists them).
pub fn create_options(body: &Document, options: &mut Document) -> CommandResult<()> {
    let capped = match body.get("capped") {
        None | Some(Bson::Null) => false,
        Some(Bson::Boolean(b)) => *b,
        Some(v) => match number(v) {
            Some(n) => n != 0,
            None => {
                return Err(err(
                    ErrorCode::TypeMismatch,
                    format!(
                        "BSON field 'create.capped' is the wrong type '{}', expected types '[bool, long, int, decimal, double']",
                        type_name(v)
                    ),
                ));
            }
        },
    };
    let size = match body.get("size") {
        Some(v) => size_arg("create", v)?,
        None => None,
    };
    let max = match body.get("max") {
        None | Some(Bson::Null) => None,
        Some(v) => Some(number(v).ok_or_else(|| {
            err(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field 'create.max' is the wrong type '{}', expected types '[long, int, decimal, double']",
                    type_name(v)
                ),
            )
        })?),
    };
    if capped && size.is_none() {
        return Err(err(
            ErrorCode::InvalidOptions,
            "the 'size' field is required when 'capped' is true",
        ));
    }
    if !capped && (size.is_some() || max.is_some()) {
        return Err(err(
            ErrorCode::InvalidOptions,
            "the 'capped' field needs to be true when either the 'size' or 'max' fields are present",
        ));
    }
    if let Some(size) = size {
        options.insert("capped", true);
        options.insert("size", size);
        // mongod stores a `max` of 0 or less as "no bound" and lists none.
        if let Some(m) = max.filter(|m| *m > 0) {
            options.insert("max", m);
        }
    }
    Ok(())
}

/// `collMod`'s `cappedSize` / `cappedMax` (mongod 6.0+): new bounds for a capped collection,
/// merged into `options`; whether the body had either. A smaller bound takes effect at the next
/// insert, which trims to it (as in mongod). `cappedMax` of 0 or less removes the count bound.
pub fn coll_mod_options(body: &Document, options: &mut Document) -> CommandResult<bool> {
    let size = body.get("cappedSize");
    let max = body.get("cappedMax");
    if size.is_none() && max.is_none() {
        return Ok(false);
    }
    if storage::capped::limits_of(options).is_none() {
        return Err(err(
            ErrorCode::InvalidOptions,
            "Collection must be capped to change its cappedSize or cappedMax",
        ));
    }
    if let Some(v) = size {
        let n = match v {
            Bson::Null => None,
            v => number(v),
        };
        let n = n.ok_or_else(|| {
            err(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field 'collMod.cappedSize' is the wrong type '{}', expected types '[long, int, decimal, double']",
                    type_name(v)
                ),
            )
        })?;
        if !(1..=CAPPED_SIZE_BYTES_MAX).contains(&n) {
            return Err(err(
                ErrorCode::InvalidOptions,
                format!("cappedSize must be between 1 and {CAPPED_SIZE_BYTES_MAX} bytes, got {n}"),
            ));
        }
        options.insert("size", n);
    }
    if let Some(v) = max {
        let n = number(v).ok_or_else(|| {
            err(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field 'collMod.cappedMax' is the wrong type '{}', expected types '[long, int, decimal, double']",
                    type_name(v)
                ),
            )
        })?;
        if n > 0 {
            options.insert("max", n);
        } else {
            options.remove("max");
        }
    }
    Ok(true)
}

/// The capped fields of `collStats` / `$collStats.storageStats`.
pub fn stats_fields(c: &Collection, out: &mut Document) {
    match c.capped_limits() {
        Some(l) => {
            out.insert("capped", true);
            out.insert(
                "max",
                l.count_max
                    .map_or(i64::MAX, |m| m.min(i64::MAX as u64) as i64),
            );
            out.insert("maxSize", l.size_bytes.min(i64::MAX as u64) as i64);
        }
        None => {
            out.insert("capped", false);
        }
    }
}

/// Copies every document of `from` (oldest first) into `to` in batches; waits for durability.
fn copy_documents(from: &Collection, to: &Collection) -> CommandResult<()> {
    let serr = |e| storage_error(e, "", "");
    let mut after = None;
    let mut last = None;
    loop {
        crate::interrupt::tick()?;
        let chunk = from
            .scan(Direction::Forward, after, COPY_BATCH_COUNT)
            .map_err(serr)?;
        let Some((rid, _)) = chunk.last() else { break };
        after = Some(*rid);
        let ops = chunk
            .into_iter()
            .map(|(_, d)| WriteOp::Insert(d.into()))
            .collect();
        last = Some(to.write(ops).map_err(serr)?);
    }
    if let Some(t) = last {
        t.wait_durable_blocking().map_err(serr)?;
    }
    Ok(())
}

fn source_missing(db: &str, name: &str) -> crate::error::CommandError {
    err(
        ErrorCode::NamespaceNotFound,
        format!("source collection {db}.{name} does not exist"),
    )
}

/// The `size` of convertToCapped and cloneCollectionAsCapped, read as mongod's hand parsers
/// read it (`safeNumberLong`: anything not a number is 0): a size that is not positive is
/// InvalidOptions, whatever its type; above 1 PB it is refused as `create` refuses it.
fn capped_size(body: &Document) -> CommandResult<i64> {
    let n = body.get("size").and_then(number).unwrap_or(0);
    if n <= 0 {
        return Err(err(
            ErrorCode::InvalidOptions,
            "Capped collection size must be greater than zero",
        ));
    }
    if n > CAPPED_SIZE_BYTES_MAX {
        return Err(err(
            ErrorCode::Location51023,
            format!(
                "BSON field 'size' value must be <= {CAPPED_SIZE_BYTES_MAX}, actual value '{n}'"
            ),
        ));
    }
    Ok(n)
}

/// `convertToCapped`: the documents move to a new capped collection (a new UUID, only the `_id`
/// index, as mongod does) which then takes the old one's name.
pub async fn convert_to_capped(
    state: &Arc<ServerState>,
    req: &Arc<Request>,
) -> CommandResult<Reply> {
    let name = args::collection_name(&req.body, "convertToCapped")?;
    argspec::check(&argspec::collections::CONVERT_TO_CAPPED, &req.body)?;
    let size = capped_size(&req.body)?;
    let guard = state.catalog.lock(&req.db, &name).await;
    off_thread(state, req, move |state, req| {
        let _guard = guard;
        crate::catalog::check_user_writable(&req.db, &name)?;
        let engine = state.catalog.engine();
        let Some(src) = state.catalog.collection(&req.db, &name) else {
            return Err(source_missing(&req.db, &name));
        };
        let tmp = format!("tmp.convertToCapped.{name}");
        // A temporary left by an earlier attempt that stopped half way.
        engine
            .drop_collection(&req.db, &tmp)
            .map_err(|e| storage_error(e, &req.db, &tmp))?;
        let dst = engine
            .create_collection(&req.db, &tmp, doc! { "capped": true, "size": size })
            .map_err(|e| storage_error(e, &req.db, &tmp))?;
        if let Err(e) = copy_documents(&src, &dst) {
            let _ = engine.drop_collection(&req.db, &tmp);
            return Err(e);
        }
        engine
            .rename_collection(&req.db, &tmp, &req.db, &name, true)
            .map_err(|e| storage_error(e, &req.db, &name))?;
        state.cursors.invalidate(&req.db, Some(&name));
        Ok(Reply::ok())
    })
    .await
}

/// `cloneCollectionAsCapped`: a new capped collection holding the newest documents of the
/// source that fit.
pub async fn clone_collection_as_capped(
    state: &Arc<ServerState>,
    req: &Arc<Request>,
) -> CommandResult<Reply> {
    argspec::check(&argspec::collections::CLONE_COLLECTION_AS_CAPPED, &req.body)?;
    let name = args::collection_name(&req.body, "cloneCollectionAsCapped")?;
    let to = match req.body.get("toCollection") {
        Some(Bson::String(s)) if !s.is_empty() => s.clone(),
        Some(Bson::String(_)) => {
            return Err(err(
                ErrorCode::InvalidNamespace,
                "Invalid target collection name: ",
            ));
        }
        _ => {
            return Err(err(
                ErrorCode::TypeMismatch,
                "'toCollection' must be of type String",
            ));
        }
    };
    let size = capped_size(&req.body)?;
    crate::catalog::validate_collection_name(&req.db, &to)?;
    let guard = state.catalog.lock(&req.db, &to).await;
    off_thread(state, req, move |state, req| {
        let _guard = guard;
        crate::catalog::check_user_writable(&req.db, &to)?;
        let Some(src) = state.catalog.collection(&req.db, &name) else {
            return Err(source_missing(&req.db, &name));
        };
        let engine = state.catalog.engine();
        let dst = engine
            .create_collection(&req.db, &to, doc! { "capped": true, "size": size })
            .map_err(|e| storage_error(e, &req.db, &to))?;
        if let Err(e) = copy_documents(&src, &dst) {
            let _ = engine.drop_collection(&req.db, &to);
            return Err(e);
        }
        Ok(Reply::ok())
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(body: Document) -> CommandResult<Document> {
        let mut o = Document::new();
        create_options(&body, &mut o).map(|_| o)
    }

    fn code(body: Document) -> i32 {
        opts(body).unwrap_err().code.code()
    }

    #[test]
    fn create_options_follow_mongod() {
        assert_eq!(
            opts(doc! { "create": "c", "capped": true, "size": 4096, "max": 5 }).unwrap(),
            doc! { "capped": true, "size": 4096_i64, "max": 5_i64 }
        );
        assert_eq!(
            opts(doc! { "create": "c", "capped": 1, "size": 10.5 }).unwrap(),
            doc! { "capped": true, "size": 10_i64 }
        );
        assert!(
            opts(doc! { "create": "c", "capped": false })
                .unwrap()
                .is_empty()
        );
        assert_eq!(code(doc! { "create": "c", "capped": true }), 72);
        assert_eq!(code(doc! { "create": "c", "capped": true, "max": 3 }), 72);
        assert_eq!(code(doc! { "create": "c", "size": 4096 }), 72);
        assert_eq!(
            code(doc! { "create": "c", "capped": true, "size": 0 }),
            51024
        );
        assert_eq!(
            code(doc! { "create": "c", "capped": true, "size": -500 }),
            51024
        );
        assert_eq!(
            code(doc! { "create": "c", "capped": true, "size": (1_i64 << 50) + 1 }),
            51023
        );
        assert_eq!(
            code(doc! { "create": "c", "capped": true, "size": "x" }),
            14
        );
        assert_eq!(code(doc! { "create": "c", "capped": "x" }), 14);
        assert_eq!(
            code(doc! { "create": "c", "capped": true, "size": 9, "max": "x" }),
            14
        );
    }

    /// convertToCapped/cloneCollectionAsCapped: mongod's `safeNumberLong` read of `size`.
    #[test]
    fn capped_size_is_a_positive_number_or_invalid_options() {
        let size = |v: Bson| capped_size(&doc! { "convertToCapped": "c", "size": v });
        assert_eq!(size(Bson::Int32(4096)).unwrap(), 4096);
        assert_eq!(size(Bson::Double(4096.7)).unwrap(), 4096);
        assert_eq!(size(Bson::Int64(1)).unwrap(), 1);
        for bad in [
            Bson::Int32(0),
            Bson::Int32(-5),
            Bson::Double(0.5),
            Bson::Double(f64::NAN),
            Bson::String("4096".into()),
            Bson::Boolean(true),
            Bson::Null,
        ] {
            assert_eq!(size(bad.clone()).unwrap_err().code.code(), 72, "{bad:?}");
        }
        let missing = capped_size(&doc! { "convertToCapped": "c" });
        assert_eq!(missing.unwrap_err().code.code(), 72);
        assert_eq!(
            size(Bson::Int64((1 << 50) + 1)).unwrap_err().code.code(),
            51023
        );
    }
}
