//! `$geoNear`: parsed and checked here; the executor (`exec::aggregate`) feeds the pipeline
//! the matches nearest first with `distanceField` and `includeLocs` set, so the stage itself
//! passes documents through. Only valid as the first stage (40602).

use super::Stage;
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::pipeline::run_context::RunCx;
use crate::query::pipeline::{DocStream, Flow, ParseContext, RawStream};
use crate::query::types;
use bson::{Bson, Document, doc};

#[derive(Debug, Clone)]
pub struct GeoNear {
    /// The filter that selects and orders: `query` and the near predicate on `key` (or on the
    /// collection's one geo index path when `key` is absent: `None` here).
    pub query: Document,
    /// The `$near`/`$nearSphere` operator document the key must satisfy.
    pub near_ops: Document,
    pub key: Option<String>,
    pub distance_field: String,
    pub include_locs: Option<String>,
    pub distance_multiplier: f64,
}

fn bad(message: impl Into<String>) -> crate::error::CommandError {
    err(ErrorCode::BadValue, message)
}

impl GeoNear {
    pub fn parse(spec: &Bson, _ctx: &ParseContext) -> CommandResult<GeoNear> {
        let Bson::Document(d) = spec else {
            return Err(err(ErrorCode::TypeMismatch, "$geoNear must be an object"));
        };
        let mut near = None;
        let mut spherical = false;
        let mut g = GeoNear {
            query: Document::new(),
            near_ops: Document::new(),
            key: None,
            distance_field: String::new(),
            include_locs: None,
            distance_multiplier: 1.0,
        };
        let mut min = None;
        let mut max = None;
        for (k, v) in d {
            match k.as_str() {
                "near" => near = Some(v.clone()),
                "distanceField" => match v {
                    Bson::String(s) if !s.is_empty() => g.distance_field = s.clone(),
                    _ => return Err(bad("distanceField must be a string")),
                },
                "spherical" => spherical = types::is_truthy(v),
                "query" => match v {
                    Bson::Document(q) => g.query = q.clone(),
                    _ => return Err(bad("query must be an object")),
                },
                "key" => match v {
                    Bson::String(s) if !s.is_empty() => g.key = Some(s.clone()),
                    _ => return Err(bad("$geoNear parameter 'key' must be a non-empty string")),
                },
                "includeLocs" => match v {
                    Bson::String(s) => g.include_locs = Some(s.clone()),
                    _ => return Err(bad("includeLocs must be a string")),
                },
                "distanceMultiplier" => {
                    let m = types::as_f64(v)
                        .filter(|m| *m >= 0.0)
                        .ok_or_else(|| bad("distanceMultiplier must be a non-negative number"))?;
                    g.distance_multiplier = m;
                }
                "maxDistance" => max = Some(v.clone()),
                "minDistance" => min = Some(v.clone()),
                other => {
                    return Err(bad(format!("Unknown argument to $geoNear: {other}")));
                }
            }
        }
        let near = near.ok_or_else(|| bad("$geoNear requires a 'near' option as an Array"))?;
        if g.distance_field.is_empty() {
            return Err(bad(
                "$geoNear requires a 'distanceField' option as a String",
            ));
        }
        let geojson = matches!(&near, Bson::Document(n) if n.contains_key("type"));
        let mut ops = if geojson {
            doc! { "$nearSphere": { "$geometry": near.clone() } }
        } else if spherical {
            doc! { "$nearSphere": near.clone() }
        } else {
            doc! { "$near": near.clone() }
        };
        if let Some(m) = max {
            ops.insert("$maxDistance", m);
        }
        if let Some(m) = min {
            ops.insert("$minDistance", m);
        }
        // Checked now so that a bad point fails at parse time.
        crate::query::matcher::Filter::parse(&doc! { "x": ops.clone() })?;
        g.near_ops = ops;
        Ok(g)
    }
}

impl Stage for GeoNear {
    fn run<'a>(&'a self, input: DocStream<'a>, _cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        Ok(input)
    }

    fn run_raw<'a>(&'a self, input: RawStream<'a>, _cx: RunCx<'a>) -> CommandResult<Flow<'a>> {
        Ok(Flow::Raw(input))
    }

    fn geo_near(&self) -> Option<&GeoNear> {
        Some(self)
    }
}
