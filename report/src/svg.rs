//! The plotting primitives: inline SVG line charts (lines or step lines, markers at
//! moments such as epochs), horizontal stacked bars and coloured strips, each with axes,
//! "nice" ticks, labels and a legend. Native `<title>` elements give hover tooltips
//! without script.

use std::fmt::Write;

use crate::format::{escape, number};

/// Width of every plot's drawing, in SVG units (the page scales it to its column).
const W: f64 = 760.0;
/// Left margin (the y axis's tick labels), right, top (the title), bottom (x ticks, label).
const ML: f64 = 64.0;
const MR: f64 = 16.0;
const MT: f64 = 28.0;
const MB: f64 = 40.0;

/// The colours of series and stages, in order (distinct for colour-blind readers first).
pub const PALETTE: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#bcbd22", "#7f7f7f",
];

/// The `i`-th colour of [`PALETTE`] (repeating).
pub fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Tick values for an axis from `lo` to `hi`: about `n` round numbers (1, 2 or 5 times a
/// power of ten apart) covering the range.
pub fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo {
        return vec![lo];
    }
    let raw = (hi - lo) / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() * step;
    let mut out = Vec::new();
    let mut k = 0.0;
    // Up to the first tick at or above `hi`: the axis covers the data.
    while out.last().is_none_or(|v: &f64| *v < hi - step * 1e-9) {
        // Rounded to the step's precision: no 0.30000000000000004.
        let v = first + k * step;
        out.push((v / step).round() * step);
        k += 1.0;
    }
    out
}

/// One line of a [`LineChart`].
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Its name in the legend and tooltip.
    pub name: String,
    /// Its colour (CSS).
    pub color: String,
    /// Its points `(x, y)`, x increasing.
    pub points: Vec<(f64, f64)>,
    /// Drawn as a step line (the value holds until the next point).
    pub step: bool,
    /// Drawn dashed (the second run of a comparison).
    pub dashed: bool,
}

/// A line chart of [`Series`] over time, with vertical markers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LineChart {
    /// Above the plot.
    pub title: String,
    /// Under the x axis.
    pub x_label: String,
    /// Beside the y axis.
    pub y_label: String,
    /// The lines.
    pub series: Vec<Series>,
    /// Vertical lines at `x`, labelled (epochs).
    pub markers: Vec<(f64, String)>,
    /// The y axis's top at least this (1.0 for shares).
    pub y_max: Option<f64>,
    /// Height of the drawing.
    pub height: f64,
}

impl LineChart {
    /// The chart as an `<svg>` element (a note instead when no series has a point).
    pub fn render(&self) -> String {
        let h = if self.height > 0.0 {
            self.height
        } else {
            260.0
        };
        let legend_rows = legend_rows(self.series.iter().map(|s| s.name.as_str()));
        let total_h = h + legend_rows as f64 * 18.0 + 8.0;
        let points = self.series.iter().flat_map(|s| s.points.iter());
        let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
        for &(x, y) in points.clone() {
            x0 = x0.min(x);
            x1 = x1.max(x);
            y1 = y1.max(y);
        }
        for (x, _) in &self.markers {
            x0 = x0.min(*x);
            x1 = x1.max(*x);
        }
        if points.count() == 0 {
            return empty(&self.title, "nothing was recorded for this plot");
        }
        x0 = x0.min(0.0);
        if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        y1 = y1.max(self.y_max.unwrap_or(0.0));
        let yt = ticks(0.0, if y1 > 0.0 { y1 } else { 1.0 }, 5);
        let y_top = yt.last().copied().unwrap_or(1.0).max(y1).max(1e-12);
        let xt = ticks(x0, x1, 8);
        let x1 = xt.last().copied().unwrap_or(x1).max(x1);
        let px = |x: f64| ML + (x - x0) / (x1 - x0) * (W - ML - MR);
        let py = |y: f64| MT + (1.0 - y / y_top) * (h - MT - MB);

        let mut s = open(&self.title, total_h);
        axes(&mut s, h, &xt, &yt, px, py, &self.x_label, &self.y_label);
        for (x, label) in &self.markers {
            let _ = write!(
                s,
                r##"<g class="marker"><line x1="{x:.1}" y1="{MT}" x2="{x:.1}" y2="{y2:.1}" stroke="#888" stroke-dasharray="2,3"/><text x="{tx:.1}" y="{ty}" font-size="10" fill="#555">{l}</text></g>"##,
                x = px(*x),
                y2 = h - MB,
                tx = px(*x) + 3.0,
                ty = MT + 10.0,
                l = escape(label)
            );
        }
        for se in &self.series {
            if se.points.is_empty() {
                continue;
            }
            let mut d = String::new();
            for (i, &(x, y)) in se.points.iter().enumerate() {
                if i == 0 {
                    let _ = write!(d, "M{:.1},{:.1}", px(x), py(y));
                } else if se.step {
                    let _ = write!(d, "H{:.1}V{:.1}", px(x), py(y));
                } else {
                    let _ = write!(d, "L{:.1},{:.1}", px(x), py(y));
                }
            }
            if se.points.len() == 1 {
                // A single point: a short tick so it shows.
                let (x, y) = se.points[0];
                let _ = write!(d, "L{:.1},{:.1}", px(x) + 4.0, py(y));
            }
            let dash = if se.dashed {
                r#" stroke-dasharray="6,4""#
            } else {
                ""
            };
            let _ = write!(
                s,
                r#"<path class="series" d="{d}" fill="none" stroke="{c}" stroke-width="1.8"{dash}><title>{n}</title></path>"#,
                c = escape(&se.color),
                n = escape(&se.name)
            );
        }
        legend(
            &mut s,
            h,
            self.series
                .iter()
                .map(|x| (x.name.as_str(), x.color.as_str(), x.dashed)),
        );
        s.push_str("</svg>");
        s
    }
}

/// One bar of [`Bars`]: a label and the length of each part.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// Left of the bar.
    pub label: String,
    /// The parts' values, in the order of [`Bars::parts`].
    pub values: Vec<f64>,
}

/// Horizontal stacked bars (one per stage), parts named in a legend.
#[derive(Debug, Clone)]
pub struct Bars {
    /// Above the plot.
    pub title: String,
    /// Under the x axis.
    pub x_label: String,
    /// The parts: name and colour.
    pub parts: Vec<(String, String)>,
    /// The bars, top to bottom.
    pub bars: Vec<Bar>,
    /// How a value reads in a tooltip.
    pub unit: fn(f64) -> String,
}

impl Bars {
    /// The bars as an `<svg>` element.
    pub fn render(&self) -> String {
        if self.bars.is_empty() {
            return empty(&self.title, "no stages");
        }
        let left = 150.0;
        let row = 22.0;
        let h = MT + self.bars.len() as f64 * row + MB;
        let legend_rows = legend_rows(self.parts.iter().map(|p| p.0.as_str()));
        let total = self
            .bars
            .iter()
            .map(|b| b.values.iter().sum::<f64>())
            .fold(0.0, f64::max);
        let xt = ticks(0.0, if total > 0.0 { total } else { 1.0 }, 6);
        let x_top = xt.last().copied().unwrap_or(1.0).max(total).max(1e-12);
        let px = |x: f64| left + x / x_top * (W - left - MR);
        let mut s = open(&self.title, h + legend_rows as f64 * 18.0 + 8.0);
        let bottom = h - MB;
        for t in &xt {
            let _ = write!(
                s,
                r##"<line x1="{x:.1}" y1="{MT}" x2="{x:.1}" y2="{bottom}" stroke="#e5e5e5"/><text x="{x:.1}" y="{ty}" font-size="10" text-anchor="middle" fill="#333">{l}</text>"##,
                x = px(*t),
                ty = bottom + 14.0,
                l = escape(&(self.unit)(*t))
            );
        }
        let _ = write!(
            s,
            r##"<line x1="{left}" y1="{bottom}" x2="{r}" y2="{bottom}" stroke="#333"/><text x="{cx}" y="{ly}" font-size="11" text-anchor="middle" fill="#333">{xl}</text>"##,
            r = W - MR,
            cx = (left + W - MR) / 2.0,
            ly = bottom + 30.0,
            xl = escape(&self.x_label)
        );
        for (i, bar) in self.bars.iter().enumerate() {
            let y = MT + i as f64 * row;
            let _ = write!(
                s,
                r##"<text x="{tx}" y="{ty:.1}" font-size="11" text-anchor="end" fill="#222">{l}</text>"##,
                tx = left - 6.0,
                ty = y + row * 0.65,
                l = escape(&bar.label)
            );
            let mut x = 0.0;
            for (k, v) in bar.values.iter().enumerate() {
                let (name, c) = self
                    .parts
                    .get(k)
                    .map_or(("", "#999"), |p| (p.0.as_str(), p.1.as_str()));
                if *v > 0.0 {
                    let w = (px(x + v) - px(x)).max(0.5);
                    let _ = write!(
                        s,
                        r#"<rect x="{rx:.1}" y="{ry:.1}" width="{w:.1}" height="{rh:.1}" fill="{c}"><title>{l}: {n} {val}</title></rect>"#,
                        rx = px(x),
                        ry = y + 3.0,
                        rh = row - 6.0,
                        c = escape(c),
                        l = escape(&bar.label),
                        n = escape(name),
                        val = escape(&(self.unit)(*v))
                    );
                }
                x += v;
            }
        }
        legend(
            &mut s,
            h,
            self.parts
                .iter()
                .map(|(n, c)| (n.as_str(), c.as_str(), false)),
        );
        s.push_str("</svg>");
        s
    }
}

/// One row of a [`Strip`]: a label and coloured spans `(from, to, category)`.
#[derive(Debug, Clone, PartialEq)]
pub struct StripRow {
    /// Left of the row.
    pub label: String,
    /// The spans; category `None` is drawn grey.
    pub spans: Vec<(f64, f64, Option<usize>)>,
}

/// Coloured strips over time (the bottleneck of each interval), one row per run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Strip {
    /// Above the plot.
    pub title: String,
    /// The rows.
    pub rows: Vec<StripRow>,
    /// The categories: (key, name); a span's category is its key's colour.
    pub categories: Vec<(usize, String)>,
    /// Under the x axis.
    pub x_label: String,
}

/// The colour of strips without a category.
const NONE_COLOR: &str = "#d9d9d9";

impl Strip {
    /// The strip as an `<svg>` element.
    pub fn render(&self) -> String {
        let x1 = self
            .rows
            .iter()
            .flat_map(|r| r.spans.iter().map(|s| s.1))
            .fold(0.0, f64::max);
        if x1 <= 0.0 {
            return empty(&self.title, "no intervals were recorded");
        }
        let left = 90.0;
        let row = 26.0;
        let h = MT + self.rows.len() as f64 * row + MB;
        let xt = ticks(0.0, x1, 8);
        let x_top = xt.last().copied().unwrap_or(x1).max(x1);
        let px = |x: f64| left + x / x_top * (W - left - MR);
        let mut names: Vec<(String, String, bool)> = self
            .categories
            .iter()
            .map(|(k, n)| (n.clone(), color(*k).to_string(), false))
            .collect();
        names.push(("none".into(), NONE_COLOR.into(), false));
        let legend_rows = legend_rows(names.iter().map(|n| n.0.as_str()));
        let mut s = open(&self.title, h + legend_rows as f64 * 18.0 + 8.0);
        let bottom = h - MB;
        for t in &xt {
            let _ = write!(
                s,
                r##"<line x1="{x:.1}" y1="{bottom}" x2="{x:.1}" y2="{y2}" stroke="#333"/><text x="{x:.1}" y="{ty}" font-size="10" text-anchor="middle" fill="#333">{l}</text>"##,
                x = px(*t),
                y2 = bottom + 4.0,
                ty = bottom + 16.0,
                l = number(*t)
            );
        }
        let _ = write!(
            s,
            r##"<text x="{cx}" y="{ly}" font-size="11" text-anchor="middle" fill="#333">{xl}</text>"##,
            cx = (left + W - MR) / 2.0,
            ly = bottom + 32.0,
            xl = escape(&self.x_label)
        );
        for (i, r) in self.rows.iter().enumerate() {
            let y = MT + i as f64 * row;
            let _ = write!(
                s,
                r##"<text x="{tx}" y="{ty:.1}" font-size="11" text-anchor="end" fill="#222">{l}</text>"##,
                tx = left - 6.0,
                ty = y + row * 0.62,
                l = escape(&r.label)
            );
            for &(a, b, cat) in &r.spans {
                let (c, name) = match cat {
                    Some(k) => (
                        color(k),
                        self.categories
                            .iter()
                            .find(|c| c.0 == k)
                            .map_or_else(|| format!("stage {k}"), |c| c.1.clone()),
                    ),
                    None => (NONE_COLOR, "none".into()),
                };
                let _ = write!(
                    s,
                    r#"<rect x="{rx:.2}" y="{ry:.1}" width="{w:.2}" height="{rh}" fill="{c}"><title>{a}–{b} s: {n}</title></rect>"#,
                    rx = px(a),
                    ry = y + 3.0,
                    w = (px(b) - px(a)).max(0.3),
                    rh = row - 6.0,
                    a = number(a),
                    b = number(b),
                    n = escape(&name)
                );
            }
        }
        legend(
            &mut s,
            h,
            names.iter().map(|(n, c, d)| (n.as_str(), c.as_str(), *d)),
        );
        s.push_str("</svg>");
        s
    }
}

fn open(title: &str, h: f64) -> String {
    format!(
        r##"<svg class="plot" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {h:.0}" role="img" aria-label="{t}"><text x="{ML}" y="17" font-size="13" font-weight="600" fill="#111">{t}</text>"##,
        t = escape(title)
    )
}

/// A plot with nothing to draw: its title and why, in a small box (still an `<svg>`).
fn empty(title: &str, why: &str) -> String {
    let mut s = open(title, 70.0);
    let _ = write!(
        s,
        r##"<rect x="{ML}" y="28" width="{w}" height="30" fill="#f6f6f6" stroke="#ccc"/><text x="{tx}" y="47" font-size="12" fill="#555">{why}</text></svg>"##,
        w = W - ML - MR,
        tx = ML + 10.0,
        why = escape(why)
    );
    s
}

#[allow(clippy::too_many_arguments)]
fn axes(
    s: &mut String,
    h: f64,
    xt: &[f64],
    yt: &[f64],
    px: impl Fn(f64) -> f64,
    py: impl Fn(f64) -> f64,
    x_label: &str,
    y_label: &str,
) {
    let bottom = h - MB;
    for y in yt {
        let _ = write!(
            s,
            r##"<line x1="{ML}" y1="{v:.1}" x2="{r}" y2="{v:.1}" stroke="#e5e5e5"/><text x="{tx}" y="{ty:.1}" font-size="10" text-anchor="end" fill="#333">{l}</text>"##,
            v = py(*y),
            r = W - MR,
            tx = ML - 5.0,
            ty = py(*y) + 3.5,
            l = number(*y)
        );
    }
    for x in xt {
        let _ = write!(
            s,
            r##"<line x1="{v:.1}" y1="{bottom}" x2="{v:.1}" y2="{b2}" stroke="#333"/><text x="{v:.1}" y="{ty}" font-size="10" text-anchor="middle" fill="#333">{l}</text>"##,
            v = px(*x),
            b2 = bottom + 4.0,
            ty = bottom + 15.0,
            l = number(*x)
        );
    }
    let _ = write!(
        s,
        r##"<line x1="{ML}" y1="{MT}" x2="{ML}" y2="{bottom}" stroke="#333"/><line x1="{ML}" y1="{bottom}" x2="{r}" y2="{bottom}" stroke="#333"/><text x="{cx}" y="{ly}" font-size="11" text-anchor="middle" fill="#333">{xl}</text><text transform="translate(13,{cy}) rotate(-90)" font-size="11" text-anchor="middle" fill="#333">{yl}</text>"##,
        r = W - MR,
        cx = (ML + W - MR) / 2.0,
        ly = bottom + 31.0,
        cy = (MT + bottom) / 2.0,
        xl = escape(x_label),
        yl = escape(y_label)
    );
}

/// Approximate width of a legend entry (swatch and text at 11 px).
fn entry_width(name: &str) -> f64 {
    28.0 + name.chars().count() as f64 * 6.3
}

fn legend_rows<'a>(names: impl Iterator<Item = &'a str>) -> usize {
    let mut rows = 1;
    let mut x = ML;
    for n in names {
        let w = entry_width(n);
        if x + w > W - MR && x > ML {
            rows += 1;
            x = ML;
        }
        x += w;
    }
    rows
}

fn legend<'a>(s: &mut String, h: f64, entries: impl Iterator<Item = (&'a str, &'a str, bool)>) {
    let mut x = ML;
    let mut y = h + 10.0;
    s.push_str(r#"<g class="legend">"#);
    for (name, c, dashed) in entries {
        let w = entry_width(name);
        if x + w > W - MR && x > ML {
            x = ML;
            y += 18.0;
        }
        let dash = if dashed {
            r#" stroke-dasharray="4,3""#
        } else {
            ""
        };
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="{ly:.1}" x2="{x2:.1}" y2="{ly:.1}" stroke="{c}" stroke-width="6"{dash}/><text x="{tx:.1}" y="{ty:.1}" font-size="11" fill="#222">{n}</text>"##,
            ly = y - 4.0,
            x2 = x + 18.0,
            tx = x + 22.0,
            ty = y,
            c = escape(c),
            n = escape(name)
        );
        x += w;
    }
    s.push_str("</g>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        let t = ticks(0.0, 1.0, 5);
        assert_eq!(t.len(), 6);
        assert!(
            t.iter()
                .zip([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
                .all(|(a, b)| (a - b).abs() < 1e-12)
        );
        let t = ticks(0.0, 18.3, 8);
        assert_eq!(t, vec![0.0, 5.0, 10.0, 15.0, 20.0]);
        let t = ticks(0.0, 9.1, 8);
        assert_eq!(t.len(), 6);
        assert_eq!(t.last(), Some(&10.0));
        assert_eq!(ticks(5.0, 5.0, 4), vec![5.0]);
    }

    #[test]
    fn line_chart_draws_its_series_markers_and_legend() {
        let chart = LineChart {
            title: "Throughput <A&B>".into(),
            x_label: "s".into(),
            y_label: "elements/s".into(),
            series: vec![
                Series {
                    name: "A".into(),
                    color: color(0).into(),
                    points: vec![(0.0, 1.0), (1.0, 3.0), (2.0, 2.0)],
                    step: false,
                    dashed: false,
                },
                Series {
                    name: "B".into(),
                    color: color(1).into(),
                    points: vec![(0.0, 2.0), (2.0, 4.0)],
                    step: true,
                    dashed: true,
                },
            ],
            markers: vec![(1.0, "epoch 1".into())],
            ..LineChart::default()
        };
        let svg = chart.render();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert_eq!(svg.matches(r#"class="series""#).count(), 2);
        assert!(svg.contains("stroke-dasharray=\"6,4\""));
        assert!(svg.contains("H") && svg.contains("epoch 1"));
        assert!(svg.contains("Throughput &lt;A&amp;B&gt;") && !svg.contains("<A&B>"));
        assert!(svg.contains(r#"class="legend""#));
    }

    #[test]
    fn empty_plots_say_so() {
        let svg = LineChart {
            title: "t".into(),
            ..LineChart::default()
        }
        .render();
        assert!(svg.contains("nothing was recorded"));
        assert!(Strip::default().render().contains("no intervals"));
    }

    #[test]
    fn bars_stack_their_parts() {
        let svg = Bars {
            title: "busy".into(),
            x_label: "seconds".into(),
            parts: vec![
                ("busy".into(), "#000".into()),
                ("idle".into(), "#111".into()),
            ],
            bars: vec![
                Bar {
                    label: "map".into(),
                    values: vec![1.0, 2.0],
                },
                Bar {
                    label: "batch".into(),
                    values: vec![0.0, 3.0],
                },
            ],
            unit: crate::format::seconds,
        }
        .render();
        // Zero-length parts are not drawn.
        assert_eq!(svg.matches("<rect").count(), 3);
        assert!(svg.contains("map: idle 2.00 s"));
    }

    #[test]
    fn strip_colours_spans_by_category() {
        let svg = Strip {
            title: "bottleneck".into(),
            rows: vec![StripRow {
                label: "A".into(),
                spans: vec![(0.0, 1.0, Some(3)), (1.0, 2.0, None)],
            }],
            categories: vec![(3, "image_ops".into())],
            x_label: "s".into(),
        }
        .render();
        assert!(svg.contains(color(3)) && svg.contains(NONE_COLOR));
        assert!(svg.contains("image_ops"));
    }
}
