//! The expression forms that bind variables or take named arguments (`$let`, `$map`,
//! `$filter`, `$reduce`, `$switch`, `$getField`, `$trim`, `$dateToString`), evaluated with a
//! scope of bound variables.

use super::ops::{is_nullish, type_name};
use super::{Scope, Special, truthy};
use crate::error::{CommandResult, ErrorCode, err};
use bson::{Bson, RawDocument};

type Value = Option<Bson>;

fn null() -> CommandResult<Value> {
    Ok(Some(Bson::Null))
}

fn mismatch(message: String) -> crate::error::CommandError {
    err(ErrorCode::TypeMismatch, message)
}

pub(super) fn eval_special(
    s: &Special,
    root: &RawDocument,
    scope: &mut Scope,
) -> CommandResult<Value> {
    match s {
        Special::Let { vars, body } => {
            let mut values = Vec::with_capacity(vars.len());
            for (name, e) in vars {
                values.push((name.clone(), e.eval(root, scope)?));
            }
            let n = values.len();
            scope.extend(values);
            let r = body.eval(root, scope);
            scope.truncate(scope.len() - n);
            r
        }
        Special::Map { input, name, body }
        | Special::Filter {
            input,
            name,
            cond: body,
            ..
        } => {
            let v = input.eval(root, scope)?;
            if is_nullish(&v) {
                return null();
            }
            let is_map = matches!(s, Special::Map { .. });
            let op = if is_map { "$map" } else { "$filter" };
            let items = match v {
                Some(Bson::Array(a)) => a,
                other => {
                    return Err(mismatch(format!(
                        "input to {op} must be an array not {}",
                        type_name(&other)
                    )));
                }
            };
            let limit = match s {
                Special::Filter { limit: Some(l), .. } => match l.eval(root, scope)? {
                    Some(Bson::Null) | None => usize::MAX,
                    other => {
                        usize::try_from(super::more::as_int(&other, "$filter", "limit")?.max(1))
                            .unwrap_or(usize::MAX)
                    }
                },
                _ => usize::MAX,
            };
            let mut out = Vec::new();
            for item in items {
                if out.len() >= limit {
                    break;
                }
                scope.push((name.clone(), Some(item.clone())));
                let r = body.eval(root, scope);
                scope.pop();
                let r = r?;
                if is_map {
                    out.push(r.unwrap_or(Bson::Null));
                } else if truthy(&r) {
                    out.push(item);
                }
            }
            Ok(Some(Bson::Array(out)))
        }
        Special::Reduce {
            input,
            initial,
            body,
        } => {
            let v = input.eval(root, scope)?;
            if is_nullish(&v) {
                return null();
            }
            let Some(Bson::Array(items)) = v else {
                return Err(mismatch(format!(
                    "$reduce requires that 'input' be an array, found: {}",
                    type_name(&v)
                )));
            };
            let mut acc = initial.eval(root, scope)?;
            for item in items {
                scope.push(("value".to_string(), acc.clone()));
                scope.push(("this".to_string(), Some(item)));
                let r = body.eval(root, scope);
                scope.truncate(scope.len() - 2);
                acc = r?;
            }
            Ok(acc)
        }
        Special::Switch { branches, default } => {
            for (case, then) in branches {
                if truthy(&case.eval(root, scope)?) {
                    return then.eval(root, scope);
                }
            }
            match default {
                Some(d) => d.eval(root, scope),
                None => Err(err(
                    ErrorCode::BadValue,
                    "$switch could not find a matching branch for an input, and no default was specified.",
                )),
            }
        }
        Special::GetField { field, input } => {
            let name = match field.eval(root, scope)? {
                Some(Bson::String(s)) => s,
                other => {
                    return Err(err(
                        ErrorCode::BadValue,
                        format!(
                            "$getField requires 'field' to evaluate to type String, but got {}",
                            type_name(&other)
                        ),
                    ));
                }
            };
            Ok(match input.eval(root, scope)? {
                Some(Bson::Document(d)) => d.get(&name).cloned(),
                Some(Bson::Null) => Some(Bson::Null),
                _ => None,
            })
        }
        Special::Trim {
            input,
            chars,
            left,
            right,
        } => {
            let v = input.eval(root, scope)?;
            if is_nullish(&v) {
                return null();
            }
            let text = super::more::string(&v, "$trim")?.to_string();
            let set: Vec<char> = match chars {
                Some(c) => match c.eval(root, scope)? {
                    Some(Bson::String(s)) => s.chars().collect(),
                    other if is_nullish(&other) => return null(),
                    other => {
                        return Err(mismatch(format!(
                            "$trim requires 'chars' to be a string, found: {}",
                            type_name(&other)
                        )));
                    }
                },
                None => vec![
                    ' ', '\0', '\t', '\n', '\u{b}', '\u{c}', '\r', '\u{a0}', '\u{2000}',
                    '\u{200a}', '\u{3000}',
                ],
            };
            let mut t = text.as_str();
            if *left {
                t = t.trim_start_matches(|c| set.contains(&c));
            }
            if *right {
                t = t.trim_end_matches(|c| set.contains(&c));
            }
            Ok(Some(Bson::String(t.to_string())))
        }
        Special::Named { op, args } => {
            let mut values = Vec::with_capacity(args.len());
            for a in args {
                values.push(match a {
                    Some(e) => Some(e.eval(root, scope)?),
                    None => None,
                });
            }
            super::extra::apply_named(*op, values)
        }
        Special::DateToString {
            date,
            format,
            on_null,
            timezone,
        } => {
            let v = date.eval(root, scope)?;
            let format = match format {
                Some(f) => Some(f.eval(root, scope)?),
                None => None,
            };
            let timezone = match timezone {
                Some(t) => Some(t.eval(root, scope)?),
                None => None,
            };
            match super::dates::date_to_string(&v, format, timezone)? {
                Some(out) => Ok(out),
                None => match on_null {
                    Some(e) => e.eval(root, scope),
                    None => null(),
                },
            }
        }
    }
}
