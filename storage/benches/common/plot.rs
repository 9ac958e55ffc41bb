//! A dependency-free SVG plot: a grid of log-log panels, one polyline per engine. Written by
//! hand so the benchmark needs no fonts or system libraries; the viewer renders the text.

use std::fmt::Write;

/// What a panel's y axis counts.
#[derive(Clone, Copy, Debug)]
pub enum Unit {
    Nanos,
    Bytes,
}

/// One chart: `series` are `(engine, [(x, y)])` with x = record count.
pub struct Panel {
    pub title: String,
    pub unit: Unit,
    pub series: Vec<(&'static str, Vec<(f64, f64)>)>,
}

const PANEL_W: f64 = 400.0;
const PANEL_H: f64 = 270.0;
const COLUMNS: usize = 2;
const MARGIN_LEFT: f64 = 62.0;
const MARGIN_RIGHT: f64 = 16.0;
const MARGIN_TOP: f64 = 30.0;
const MARGIN_BOTTOM: f64 = 40.0;

fn color(engine: &str) -> &'static str {
    match engine {
        "cairn" => "#d62728",
        "redb" => "#1f77b4",
        "fjall" => "#2ca02c",
        "sled" => "#9467bd",
        _ => "#555555",
    }
}

fn label(exp: i32, unit: Unit) -> String {
    let v = 10f64.powi(exp);
    match unit {
        Unit::Nanos => match exp {
            e if e < 3 => format!("{v:.0} ns"),
            e if e < 6 => format!("{:.0} µs", v / 1e3),
            e if e < 9 => format!("{:.0} ms", v / 1e6),
            _ => format!("{:.0} s", v / 1e9),
        },
        Unit::Bytes => match exp {
            e if e < 3 => format!("{v:.0} B"),
            e if e < 6 => format!("{:.0} KB", v / 1e3),
            e if e < 9 => format!("{:.0} MB", v / 1e6),
            _ => format!("{:.0} GB", v / 1e9),
        },
    }
}

fn count_label(exp: i32) -> String {
    match exp {
        e if e < 3 => format!("{:.0}", 10f64.powi(e)),
        e if e < 6 => format!("{:.0}k", 10f64.powi(e - 3)),
        e => format!("{:.0}M", 10f64.powi(e - 6)),
    }
}

/// Decade bounds covering every positive value of `pick` in the panel.
fn decades(p: &Panel, pick: impl Fn(&(f64, f64)) -> f64) -> (i32, i32) {
    let vals = p.series.iter().flat_map(|(_, s)| s.iter().map(&pick));
    let (lo, hi) = vals
        .filter(|v| *v > 0.0)
        .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        return (0, 1);
    }
    let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    (a, b.max(a + 1))
}

fn panel(out: &mut String, p: &Panel, ox: f64, oy: f64) {
    let (x0, x1) = decades(p, |pt| pt.0);
    let (y0, y1) = decades(p, |pt| pt.1);
    let w = PANEL_W - MARGIN_LEFT - MARGIN_RIGHT;
    let h = PANEL_H - MARGIN_TOP - MARGIN_BOTTOM;
    let left = ox + MARGIN_LEFT;
    let top = oy + MARGIN_TOP;
    let sx = |x: f64| left + (x.log10() - f64::from(x0)) / f64::from(x1 - x0) * w;
    let sy = |y: f64| top + h - (y.log10() - f64::from(y0)) / f64::from(y1 - y0) * h;
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" font-size="13" font-weight="bold">{}</text>"#,
        left,
        oy + 18.0,
        p.title
    );
    let _ = writeln!(
        out,
        r##"<rect x="{left:.1}" y="{top:.1}" width="{w:.1}" height="{h:.1}" fill="none" stroke="#888"/>"##
    );
    for e in y0..=y1 {
        let y = sy(10f64.powi(e));
        let _ = writeln!(
            out,
            r##"<line x1="{left:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" font-size="10" text-anchor="end">{}</text>"##,
            left + w,
            left - 4.0,
            y + 3.0,
            label(e, p.unit)
        );
    }
    for e in x0..=x1 {
        let x = sx(10f64.powi(e));
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" y1="{top:.1}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" font-size="10" text-anchor="middle">{}</text>"##,
            top + h,
            top + h + 14.0,
            count_label(e)
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="middle">records in store (N)</text>"#,
        left + w / 2.0,
        top + h + 30.0
    );
    for (engine, pts) in &p.series {
        let pts: Vec<&(f64, f64)> = pts.iter().filter(|(x, y)| *x > 0.0 && *y > 0.0).collect();
        let line: Vec<String> = pts
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", sx(*x), sy(*y)))
            .collect();
        let width = if *engine == "cairn" { 2.5 } else { 1.5 };
        let _ = writeln!(
            out,
            r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="{width}"/>"#,
            line.join(" "),
            color(engine)
        );
        for (x, y) in pts {
            let _ = writeln!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{}"/>"#,
                sx(*x),
                sy(*y),
                color(engine)
            );
        }
    }
}

/// The whole figure: panels in a grid and a legend in the next free cell.
pub fn svg(panels: &[Panel]) -> String {
    let cells = panels.len() + 1;
    let rows = cells.div_ceil(COLUMNS);
    let (width, height) = (PANEL_W * COLUMNS as f64, PANEL_H * rows as f64);
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    for (i, p) in panels.iter().enumerate() {
        let ox = (i % COLUMNS) as f64 * PANEL_W;
        let oy = (i / COLUMNS) as f64 * PANEL_H;
        panel(&mut out, p, ox, oy);
    }
    let ox = (panels.len() % COLUMNS) as f64 * PANEL_W + MARGIN_LEFT;
    let oy = (panels.len() / COLUMNS) as f64 * PANEL_H + MARGIN_TOP;
    let engines = panels.first().map(|p| p.series.as_slice()).unwrap_or(&[]);
    for (i, (engine, _)) in engines.iter().enumerate() {
        let y = oy + 20.0 + i as f64 * 22.0;
        let _ = writeln!(
            out,
            r#"<line x1="{ox:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{}" stroke-width="3"/><text x="{:.1}" y="{:.1}" font-size="13">{engine}</text>"#,
            ox + 30.0,
            color(engine),
            ox + 38.0,
            y + 4.0
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{ox:.1}" y="{:.1}" font-size="11">log-log; lower is better; every commit synced</text>"#,
        oy + 20.0 + engines.len() as f64 * 22.0 + 10.0
    );
    out.push_str("</svg>\n");
    out
}
