//! The charts: compare ratios as horizontal bars on a log scale, and bench cost-versus-N lines on
//! log-log axes. Shapes are drawn by plotters' bitmap backend into our own RGB buffer; all text is
//! drawn afterwards with the built-in glyphs of `png::Canvas` (no font files involved).

use crate::compare::png::{Canvas, GLYPH_PX};
use crate::compare::report::Row;
use crate::compare::workloads::Better;
use plotters::prelude::*;

const WIDTH_PX: u32 = 1000;
const ROW_PX: u32 = 26;
const TOP_PX: u32 = 50;
const BOTTOM_PX: u32 = 40;
const LABEL_PX: u32 = 280;
const RIGHT_PX: u32 = 120;
const BLACK_RGB: [u8; 3] = [0, 0, 0];
const GREY_RGB: [u8; 3] = [110, 110, 110];

type DrawResult = Result<(), String>;

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("{e:?}")
}

/// Decades shown on the ratio axis: at least 0.1 .. 10, widened to fit every ratio.
fn decade_range(ratios: impl Iterator<Item = f64>) -> (i32, i32) {
    let (mut lo, mut hi) = (-1, 1);
    for r in ratios.filter(|r| r.is_finite() && *r > 0.0) {
        lo = lo.min(r.log10().floor() as i32);
        hi = hi.max(r.log10().ceil() as i32);
    }
    (lo.max(-6), hi.min(6))
}

/// "0.01", "0.1", "1", "10", "100" ...
fn decade_label(d: i32) -> String {
    if d >= 0 {
        format!("{:.0}", 10f64.powi(d))
    } else {
        format!("{:.*}", (-d) as usize, 10f64.powi(d))
    }
}

/// PNG bytes of the ratio chart for `rows`.
pub fn ratio_bars(rows: &[Row], title: &str) -> Result<Vec<u8>, String> {
    let height = TOP_PX + BOTTOM_PX + ROW_PX * rows.len().max(1) as u32;
    let mut canvas = Canvas::new(WIDTH_PX, height);
    let (lo, hi) = decade_range(rows.iter().filter_map(|r| r.ratio));
    let plot_w = f64::from(WIDTH_PX - LABEL_PX - RIGHT_PX);
    let x_of = |ratio: f64| {
        let t = (ratio.max(1e-9).log10() - f64::from(lo)) / f64::from(hi - lo);
        LABEL_PX as i32 + (t.clamp(0.0, 1.0) * plot_w) as i32
    };
    draw_bars(&mut canvas, rows, height, lo, hi, &x_of).map_err(err)?;
    canvas.text(10, 12, title, 2, BLACK_RGB);
    for d in lo..=hi {
        let label = decade_label(d);
        let x = x_of(10f64.powi(d)) as i64 - i64::from(Canvas::text_width(&label, 1) / 2);
        canvas.text(x, i64::from(height - BOTTOM_PX + 8), &label, 1, GREY_RGB);
    }
    let note = "ratio = target / reference (log scale); green = target better";
    canvas.text(LABEL_PX as i64, i64::from(height - 16), note, 1, GREY_RGB);
    for (i, row) in rows.iter().enumerate() {
        let y = i64::from(TOP_PX + ROW_PX * i as u32 + (ROW_PX - GLYPH_PX) / 2);
        let name: String = row
            .name
            .chars()
            .take(((LABEL_PX - 16) / GLYPH_PX) as usize)
            .collect();
        canvas.text(8, y, &name, 1, BLACK_RGB);
        let value = match row.ratio {
            Some(r) => format!("{r:.2}x"),
            None => "error".to_string(),
        };
        canvas.text(i64::from(WIDTH_PX - RIGHT_PX + 8), y, &value, 1, BLACK_RGB);
    }
    canvas.to_png().map_err(err)
}

fn draw_bars(
    canvas: &mut Canvas,
    rows: &[Row],
    height: u32,
    lo: i32,
    hi: i32,
    x_of: &dyn Fn(f64) -> i32,
) -> DrawResult {
    let root =
        BitMapBackend::with_buffer(&mut canvas.pixels, (WIDTH_PX, height)).into_drawing_area();
    let bottom = (height - BOTTOM_PX) as i32;
    for d in lo..=hi {
        let x = x_of(10f64.powi(d));
        let colour = if d == 0 {
            BLACK
        } else {
            RGBColor(215, 215, 215)
        };
        root.draw(&PathElement::new(
            vec![(x, TOP_PX as i32 - 6), (x, bottom)],
            colour,
        ))
        .map_err(err)?;
    }
    let one = x_of(1.0);
    for (i, row) in rows.iter().enumerate() {
        let y0 = (TOP_PX + ROW_PX * i as u32 + 4) as i32;
        let y1 = y0 + ROW_PX as i32 - 8;
        let Some(ratio) = row.ratio else {
            root.draw(&Rectangle::new(
                [(one - 2, y0), (one + 2, y1)],
                RGBColor(160, 160, 160).filled(),
            ))
            .map_err(err)?;
            continue;
        };
        let better = match row.better {
            Better::Lower => ratio <= 1.0,
            Better::Higher => ratio >= 1.0,
        };
        let colour = if better {
            RGBColor(60, 160, 90)
        } else {
            RGBColor(210, 80, 60)
        };
        let x = x_of(ratio);
        let (a, b) = if x < one {
            (x, one)
        } else {
            (one, x.max(one + 1))
        };
        root.draw(&Rectangle::new([(a, y0), (b, y1)], colour.filled()))
            .map_err(err)?;
    }
    root.present().map_err(err)
}

/// One line of the bench chart: a workload's cost at each record count.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// Sixteen distinguishable line colours (the workload list has seventeen entries at most, and
/// the restart line never appears in bench charts).
const PALETTE: [(u8, u8, u8); 16] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
    (0, 0, 0),
    (120, 40, 140),
    (255, 200, 0),
    (0, 90, 50),
    (250, 120, 160),
    (60, 60, 200),
];

/// A horizontal reference line of a log-log panel (e.g. the configured cache size).
pub struct Level {
    pub name: String,
    pub value: f64,
}

/// One log-log panel: lines of positive (x, y) points, optional levels, decade tick labels.
pub struct LogLog<'a> {
    pub title: &'a str,
    /// Text under the x axis.
    pub caption: &'a str,
    pub series: &'a [Series],
    pub levels: &'a [Level],
    /// Label of the y decade 10^d.
    pub y_tick: &'a dyn Fn(i32) -> String,
}

const PANEL_W_PX: u32 = WIDTH_PX;
const PANEL_H_PX: u32 = 560;
const LEGEND_PX: u32 = 300;
const LEVEL_RGB: (u8, u8, u8) = (200, 0, 0);

/// PNG of cost relative to the smallest N (so workloads of any unit share one axis), log-log.
pub fn cost_lines(series: &[Series], title: &str) -> Result<Vec<u8>, String> {
    let rel: Vec<Series> = series
        .iter()
        .map(|s| {
            let base = s.points.first().map_or(1.0, |p| p.1).max(1e-12);
            Series {
                name: s.name.clone(),
                points: s.points.iter().map(|(n, v)| (*n, v / base)).collect(),
            }
        })
        .collect();
    let tick = |d: i32| format!("{}x", decade_label(d));
    panels(&[LogLog {
        title,
        caption: "records (log) vs cost relative to the smallest N (log)",
        series: &rel,
        levels: &[],
        y_tick: &tick,
    }])
}

/// PNG of log-log panels side by side.
pub fn panels(charts: &[LogLog]) -> Result<Vec<u8>, String> {
    let mut canvas = Canvas::new(PANEL_W_PX * charts.len().max(1) as u32, PANEL_H_PX);
    for (i, chart) in charts.iter().enumerate() {
        draw_loglog(&mut canvas, PANEL_W_PX * i as u32, chart)?;
    }
    canvas.to_png().map_err(err)
}

/// Whole decades around `values` (log10 already), at least one decade wide.
fn log_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        return (0.0, 1.0);
    }
    let (lo, hi) = (lo.floor(), hi.ceil());
    (lo, if hi > lo { hi } else { lo + 1.0 })
}

fn draw_loglog(canvas: &mut Canvas, x0: u32, chart: &LogLog) -> DrawResult {
    let log = |v: f64| v.max(1e-9).log10();
    let lines: Vec<Vec<(f64, f64)>> = chart
        .series
        .iter()
        .map(|s| s.points.iter().map(|(x, y)| (log(*x), log(*y))).collect())
        .collect();
    let (x_lo, x_hi) = log_range(lines.iter().flatten().map(|p| p.0));
    let ys = lines.iter().flatten().map(|p| p.1);
    let (y_lo, y_hi) = log_range(ys.chain(chart.levels.iter().map(|l| log(l.value))));
    let (w, h) = (canvas.width, canvas.height);
    let (left, top) = (x0 as i32 + 60, 50i32);
    let (right, bottom) = (
        (x0 + PANEL_W_PX - LEGEND_PX) as i32,
        (PANEL_H_PX - 40) as i32,
    );
    let px = |x: f64, y: f64| {
        let tx = (x - x_lo) / (x_hi - x_lo);
        let ty = (y - y_lo) / (y_hi - y_lo);
        (
            left + (tx * f64::from(right - left)) as i32,
            bottom - (ty * f64::from(bottom - top)) as i32,
        )
    };
    {
        let root = BitMapBackend::with_buffer(&mut canvas.pixels, (w, h)).into_drawing_area();
        for d in (y_lo as i32)..=(y_hi as i32) {
            let (_, y) = px(x_lo, f64::from(d));
            let grid = PathElement::new(vec![(left, y), (right, y)], RGBColor(220, 220, 220));
            root.draw(&grid).map_err(err)?;
        }
        for level in chart.levels {
            let (_, y) = px(x_lo, log(level.value));
            let (r, g, b) = LEVEL_RGB;
            let line = PathElement::new(vec![(left, y), (right, y)], RGBColor(r, g, b));
            root.draw(&line).map_err(err)?;
        }
        for (i, pts) in lines.iter().enumerate() {
            let (r, g, b) = PALETTE[i % PALETTE.len()];
            let line: Vec<(i32, i32)> = pts.iter().map(|p| px(p.0, p.1)).collect();
            root.draw(&PathElement::new(line, RGBColor(r, g, b).stroke_width(2)))
                .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    draw_panel_text(
        canvas,
        chart,
        (left, top, right, bottom),
        &px,
        (x_lo, x_hi, y_lo, y_hi),
    );
    Ok(())
}

fn draw_panel_text(
    canvas: &mut Canvas,
    chart: &LogLog,
    (left, _top, right, bottom): (i32, i32, i32, i32),
    px: &dyn Fn(f64, f64) -> (i32, i32),
    (x_lo, x_hi, y_lo, y_hi): (f64, f64, f64, f64),
) {
    canvas.text(i64::from(left - 50), 12, chart.title, 2, BLACK_RGB);
    for d in (y_lo as i32)..=(y_hi as i32) {
        let (_, y) = px(x_lo, f64::from(d));
        let label = (chart.y_tick)(d);
        canvas.text(i64::from(left - 56), i64::from(y - 4), &label, 1, GREY_RGB);
    }
    for d in (x_lo as i32)..=(x_hi as i32) {
        let (x, _) = px(f64::from(d), y_lo);
        let label = format!("{:.0}", 10f64.powi(d));
        canvas.text(
            i64::from(x - 12),
            i64::from(bottom + 8),
            &label,
            1,
            GREY_RGB,
        );
    }
    let caption_y = i64::from(PANEL_H_PX - 16);
    canvas.text(i64::from(left), caption_y, chart.caption, 1, GREY_RGB);
    for level in chart.levels {
        let (_, y) = px(x_lo, level.value.max(1e-9).log10());
        let (r, g, b) = LEVEL_RGB;
        let name: String = level.name.chars().take(30).collect();
        canvas.text(i64::from(left + 6), i64::from(y - 12), &name, 1, [r, g, b]);
    }
    for (i, s) in chart.series.iter().enumerate() {
        let (r, g, b) = PALETTE[i % PALETTE.len()];
        let y = 60 + 14 * i as i64;
        canvas.fill_rect(i64::from(right + 16), y, 18, 8, [r, g, b]);
        let name: String = s.name.chars().take(30).collect();
        canvas.text(i64::from(right + 40), y, &name, 1, BLACK_RGB);
    }
}

/// "1", "10", "100", "1k" ... for absolute y decades.
pub fn decade_label_si(d: i32) -> String {
    match d {
        d if d >= 9 => format!("{:.0}G", 10f64.powi(d - 9)),
        d if d >= 6 => format!("{:.0}M", 10f64.powi(d - 6)),
        d if d >= 3 => format!("{:.0}k", 10f64.powi(d - 3)),
        d => decade_label(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, ratio: Option<f64>) -> Row {
        Row {
            name: name.into(),
            unit: "us/op".into(),
            better: Better::Lower,
            target: None,
            reference: None,
            ratio,
            target_error: None,
            reference_error: None,
        }
    }

    #[test]
    fn decades_cover_every_ratio() {
        assert_eq!(decade_range([0.5, 2.0].into_iter()), (-1, 1));
        assert_eq!(decade_range([0.002, 350.0].into_iter()), (-3, 3));
        assert_eq!(decade_label(-2), "0.01");
        assert_eq!(decade_label(2), "100");
    }

    #[test]
    fn charts_render_to_png() {
        let png = ratio_bars(
            &[row("a", Some(0.5)), row("b", Some(3.0)), row("c", None)],
            "t",
        )
        .expect("bars");
        assert_eq!(&png[1..4], b"PNG");
        let s = [Series {
            name: "x".into(),
            points: vec![(1e3, 1.0), (1e4, 2.0), (1e5, 5.0)],
        }];
        assert_eq!(&cost_lines(&s, "t").expect("lines")[1..4], b"PNG");
        let tick = |d: i32| decade_label_si(d);
        let level = [Level {
            name: "cache".into(),
            value: 1024.0,
        }];
        let chart = |series| LogLog {
            title: "t",
            caption: "c",
            series,
            levels: &level,
            y_tick: &tick,
        };
        let png = panels(&[chart(&s), chart(&[])]).expect("panels");
        assert_eq!(&png[1..4], b"PNG");
    }

    #[test]
    fn log_ranges_are_whole_decades() {
        assert_eq!(log_range([0.5, 2.3].into_iter()), (0.0, 3.0));
        assert_eq!(log_range([2.0].into_iter()), (2.0, 3.0));
        assert_eq!(log_range(std::iter::empty()), (0.0, 1.0));
        assert_eq!(decade_label_si(4), "10k");
        assert_eq!(decade_label_si(6), "1M");
        assert_eq!(decade_label_si(-1), "0.1");
    }
}

/// "Nice" tick step for a linear axis spanning `span`: 1, 2 or 5 times a power of ten, giving
/// about five to ten ticks.
fn linear_step(span: f64) -> f64 {
    let raw = (span / 6.0).max(1e-9);
    let decade = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * decade)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * decade)
}

/// PNG of lines over time on linear axes (y from 0), with an optional vertical marker (e.g.
/// where the load stopped).
pub fn time_lines(
    series: &[Series],
    title: &str,
    x_caption: &str,
    marker_x: Option<f64>,
) -> Result<Vec<u8>, String> {
    let mut canvas = Canvas::new(PANEL_W_PX, PANEL_H_PX);
    let points = series.iter().flat_map(|s| s.points.iter());
    let x_hi = points.clone().map(|p| p.0).fold(1.0, f64::max);
    let y_hi = points.map(|p| p.1).fold(1.0, f64::max) * 1.05;
    let (left, top) = (70i32, 50i32);
    let (right, bottom) = ((PANEL_W_PX - LEGEND_PX) as i32, (PANEL_H_PX - 40) as i32);
    let px = |x: f64, y: f64| {
        (
            left + (x / x_hi * f64::from(right - left)) as i32,
            bottom - (y / y_hi * f64::from(bottom - top)) as i32,
        )
    };
    let (x_step, y_step) = (linear_step(x_hi), linear_step(y_hi));
    {
        let (w, h) = (canvas.width, canvas.height);
        let root = BitMapBackend::with_buffer(&mut canvas.pixels, (w, h)).into_drawing_area();
        let mut y = 0.0;
        while y <= y_hi {
            let (_, py) = px(0.0, y);
            let grid = PathElement::new(vec![(left, py), (right, py)], RGBColor(220, 220, 220));
            root.draw(&grid).map_err(err)?;
            y += y_step;
        }
        if let Some(mx) = marker_x {
            let (x, _) = px(mx, 0.0);
            let (r, g, b) = LEVEL_RGB;
            let line = PathElement::new(vec![(x, top), (x, bottom)], RGBColor(r, g, b));
            root.draw(&line).map_err(err)?;
        }
        for (i, s) in series.iter().enumerate() {
            let (r, g, b) = PALETTE[i % PALETTE.len()];
            let line: Vec<(i32, i32)> = s.points.iter().map(|p| px(p.0, p.1)).collect();
            root.draw(&PathElement::new(line, RGBColor(r, g, b).stroke_width(2)))
                .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    canvas.text(i64::from(left - 60), 12, title, 2, BLACK_RGB);
    let mut y = 0.0;
    while y <= y_hi {
        let (_, py) = px(0.0, y);
        canvas.text(8, i64::from(py - 4), &format!("{y:.0}"), 1, GREY_RGB);
        y += y_step;
    }
    let mut x = 0.0;
    while x <= x_hi {
        let (qx, _) = px(x, 0.0);
        canvas.text(
            i64::from(qx - 8),
            i64::from(bottom + 8),
            &format!("{x:.0}"),
            1,
            GREY_RGB,
        );
        x += x_step;
    }
    canvas.text(
        i64::from(left),
        i64::from(PANEL_H_PX - 16),
        x_caption,
        1,
        GREY_RGB,
    );
    for (i, s) in series.iter().enumerate() {
        let (r, g, b) = PALETTE[i % PALETTE.len()];
        let y = 60 + 14 * i as i64;
        canvas.fill_rect(i64::from(right + 16), y, 18, 8, [r, g, b]);
        let name: String = s.name.chars().take(30).collect();
        canvas.text(i64::from(right + 40), y, &name, 1, BLACK_RGB);
    }
    canvas.to_png().map_err(err)
}
