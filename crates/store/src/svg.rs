//! Small inline SVG charts for the HTML report: axes with round ticks,
//! lines, dots and vertical spans. No script, no fonts or files fetched:
//! the SVG is text inside the HTML.

use crate::escape::esc;
use std::fmt::Write as _;

/// What a series draws.
pub enum Mark {
    /// A polyline through the points (sorted by x by the caller).
    Line { dashed: bool },
    /// A dot per point.
    Dots,
    /// Both.
    LineDots,
    /// A vertical bar per point from `y` to `y2`, `width` px wide.
    Span { width: f64 },
    /// A dashed vertical line across the plot at each point's x (a
    /// result against the trials around it); y is not read.
    Rule,
}

pub struct Series {
    pub name: String,
    pub color: &'static str,
    pub mark: Mark,
    /// (x, y, y2); y2 is only read by `Mark::Span`.
    pub points: Vec<(f64, f64, f64)>,
}

pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// Labels for x = 0, 1, 2, ... instead of a numeric axis.
    pub x_categories: Option<Vec<String>>,
    /// The top of the y axis when the caller chose it (None: the highest
    /// value, so everything shows). A line above it is cut at the plot's
    /// top, never flattened onto it; a dot above it is left out.
    pub y_max: Option<f64>,
    pub series: Vec<Series>,
}

/// Colours readers can tell apart, also printed in grey.
pub const PALETTE: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 360.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 80.0;

/// Round tick values covering [lo, hi]: steps of 1, 2 or 5 x 10^n.
pub fn ticks(lo: f64, hi: f64, max_ticks: usize) -> Vec<f64> {
    if hi <= lo || !lo.is_finite() || !hi.is_finite() {
        return vec![lo];
    }
    let raw = (hi - lo) / max_ticks.max(1) as f64;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * magnitude);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

/// A tick label: `14.9M`, `250k`, `1,518`, `0.5`.
pub fn short_number(x: f64) -> String {
    let a = x.abs();
    let trim = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if a >= 1e9 {
        format!("{}G", trim(format!("{:.2}", x / 1e9)))
    } else if a >= 1e6 {
        format!("{}M", trim(format!("{:.2}", x / 1e6)))
    } else if a >= 1e4 {
        format!("{}k", trim(format!("{:.1}", x / 1e3)))
    } else if a >= 100.0 || x == x.round() {
        format!("{}", x.round())
    } else {
        trim(format!("{x:.3}"))
    }
}

/// The chart as an `<svg>` element.
pub fn render(chart: &Chart) -> String {
    let all = || chart.series.iter().flat_map(|s| s.points.iter());
    let (mut x_lo, mut x_hi) = match &chart.x_categories {
        Some(c) => (-0.5, c.len() as f64 - 0.5),
        None => all().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
            (lo.min(p.0), hi.max(p.0))
        }),
    };
    // y from 0: rates and shares read wrong on a cut axis.
    let y_max = all()
        .flat_map(|p| [p.1, p.2])
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let y_max = chart.y_max.filter(|m| *m > 0.0).unwrap_or(y_max);
    let y_hi = if y_max > 0.0 { y_max * 1.08 } else { 1.0 };
    if !x_lo.is_finite() || x_hi <= x_lo {
        x_lo = if x_lo.is_finite() { x_lo - 1.0 } else { 0.0 };
        x_hi = x_lo + 2.0;
    }
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let sx = |x: f64| LEFT + (x - x_lo) / (x_hi - x_lo) * plot_w;
    let sy = |y: f64| TOP + plot_h - (y / y_hi) * plot_h;

    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{t}">"#,
        t = esc(&chart.title)
    );
    let _ = write!(
        s,
        r##"<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/><text x="{x}" y="22" text-anchor="middle" font-size="15" font-weight="bold">{t}</text>"##,
        x = WIDTH / 2.0,
        t = esc(&chart.title)
    );
    // Grid and y ticks.
    for y in ticks(0.0, y_hi, 6) {
        let py = sy(y);
        let _ = write!(
            s,
            r##"<line x1="{LEFT}" y1="{py:.1}" x2="{x2}" y2="{py:.1}" stroke="#dddddd"/><text x="{tx}" y="{ty:.1}" text-anchor="end" font-size="11">{label}</text>"##,
            x2 = WIDTH - RIGHT,
            tx = LEFT - 6.0,
            ty = py + 4.0,
            label = short_number(y)
        );
    }
    // x ticks.
    let x_ticks: Vec<(f64, String)> = match &chart.x_categories {
        Some(c) => c
            .iter()
            .enumerate()
            .map(|(i, l)| (i as f64, l.clone()))
            .collect(),
        None => ticks(x_lo, x_hi, 8)
            .into_iter()
            .map(|x| (x, short_number(x)))
            .collect(),
    };
    for (x, label) in x_ticks {
        let px = sx(x);
        let _ = write!(
            s,
            r##"<line x1="{px:.1}" y1="{y1}" x2="{px:.1}" y2="{y2}" stroke="#888888"/><text x="{px:.1}" y="{ty}" text-anchor="middle" font-size="11">{l}</text>"##,
            y1 = TOP + plot_h,
            y2 = TOP + plot_h + 5.0,
            ty = TOP + plot_h + 18.0,
            l = esc(&label)
        );
    }
    // Axes and their labels.
    let _ = write!(
        s,
        r##"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{yb}" stroke="#000000"/><line x1="{LEFT}" y1="{yb}" x2="{xr}" y2="{yb}" stroke="#000000"/><text x="{xm}" y="{xl}" text-anchor="middle" font-size="12">{xlab}</text><text x="16" y="{ym}" text-anchor="middle" font-size="12" transform="rotate(-90 16 {ym})">{ylab}</text>"##,
        yb = TOP + plot_h,
        xr = WIDTH - RIGHT,
        xm = LEFT + plot_w / 2.0,
        xl = TOP + plot_h + 36.0,
        ym = TOP + plot_h / 2.0,
        xlab = esc(&chart.x_label),
        ylab = esc(&chart.y_label)
    );
    for series in &chart.series {
        let c = series.color;
        // The line's pieces inside the plot (all of it unless y_max cut it).
        let polylines = |s: &mut String, dash: &str| {
            for piece in clip_below(&series.points, y_hi) {
                let points = piece
                    .iter()
                    .map(|p| format!("{:.1},{:.1}", sx(p.0), sy(p.1)))
                    .collect::<Vec<_>>()
                    .join(" ");
                let _ = write!(
                    s,
                    r#"<polyline points="{points}" fill="none" stroke="{c}" stroke-width="2"{dash}/>"#
                );
            }
        };
        let dots = |s: &mut String| {
            for p in series.points.iter().filter(|p| p.1 <= y_hi) {
                let _ = write!(
                    s,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="4" fill="{c}"><title>{}: {} / {}</title></circle>"#,
                    sx(p.0),
                    sy(p.1),
                    esc(&series.name),
                    short_number(p.0),
                    short_number(p.1)
                );
            }
        };
        match series.mark {
            Mark::Line { dashed } => {
                let dash = if dashed {
                    r#" stroke-dasharray="6 4""#
                } else {
                    ""
                };
                polylines(&mut s, dash);
            }
            Mark::Dots => dots(&mut s),
            Mark::LineDots => {
                polylines(&mut s, "");
                dots(&mut s);
            }
            Mark::Rule => {
                for p in &series.points {
                    let _ = write!(
                        s,
                        r#"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{yb}" stroke="{c}" stroke-width="2" stroke-dasharray="6 4"><title>{}: {}</title></line>"#,
                        esc(&series.name),
                        short_number(p.0),
                        x = sx(p.0),
                        yb = TOP + plot_h,
                    );
                }
            }
            Mark::Span { width } => {
                for p in &series.points {
                    let (top, bottom) = (sy(p.1.max(p.2)), sy(p.1.min(p.2)));
                    let _ = write!(
                        s,
                        r#"<rect x="{:.1}" y="{top:.1}" width="{width}" height="{:.1}" fill="{c}" fill-opacity="0.75"><title>{}</title></rect>"#,
                        sx(p.0) - width / 2.0,
                        (bottom - top).max(1.5),
                        esc(&series.name)
                    );
                }
            }
        }
    }
    // Legend under the x axis label.
    let mut lx = LEFT;
    let ly = HEIGHT - 16.0;
    // Rules are named in their title (the chart's title says what they are).
    for series in chart
        .series
        .iter()
        .filter(|s| !matches!(s.mark, Mark::Rule))
    {
        let _ = write!(
            s,
            r#"<rect x="{lx}" y="{y}" width="14" height="10" fill="{c}"/><text x="{tx}" y="{ty}" font-size="11">{n}</text>"#,
            y = ly - 9.0,
            c = series.color,
            tx = lx + 18.0,
            ty = ly,
            n = esc(&series.name)
        );
        lx += 30.0 + 6.5 * series.name.chars().count() as f64;
    }
    s.push_str("</svg>");
    s
}

/// The pieces of the line through `points` that lie at or below `top`,
/// each ending where the line crosses `top` (linear between points).
fn clip_below(points: &[(f64, f64, f64)], top: f64) -> Vec<Vec<(f64, f64, f64)>> {
    let cross = |a: &(f64, f64, f64), b: &(f64, f64, f64)| {
        let t = (top - a.1) / (b.1 - a.1);
        (a.0 + t * (b.0 - a.0), top, 0.0)
    };
    let mut pieces = Vec::new();
    let mut piece: Vec<(f64, f64, f64)> = Vec::new();
    for (i, p) in points.iter().enumerate() {
        let prev = i.checked_sub(1).map(|j| &points[j]);
        match (p.1 <= top, prev) {
            (true, Some(q)) if q.1 > top => piece.push(cross(q, p)),
            (false, Some(q)) if q.1 <= top => {
                piece.push(cross(q, p));
                pieces.push(std::mem::take(&mut piece));
            }
            _ => {}
        }
        if p.1 <= top {
            piece.push(*p);
        }
    }
    if !piece.is_empty() {
        pieces.push(piece);
    }
    pieces.retain(|p| p.len() > 1);
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let t = ticks(0.0, 1_600_000.0, 6);
        assert_eq!(t[1] - t[0], 500_000.0);
        assert_eq!(ticks(64.0, 1518.0, 8)[0], 200.0);
    }

    #[test]
    fn short_numbers() {
        assert_eq!(short_number(14_880_952.0), "14.88M");
        assert_eq!(short_number(250_000.0), "250k");
        assert_eq!(short_number(1518.0), "1518");
        assert_eq!(short_number(0.5), "0.5");
    }

    #[test]
    fn a_chart_has_its_marks() {
        let svg = render(&Chart {
            title: "t <1>".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            x_categories: None,
            y_max: None,
            series: vec![Series {
                name: "s".into(),
                color: PALETTE[0],
                mark: Mark::LineDots,
                points: vec![(1.0, 2.0, 0.0), (2.0, 3.0, 0.0)],
            }],
        });
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert_eq!(svg.matches("<circle").count(), 2);
        assert!(svg.contains("t &lt;1&gt;"));
    }

    #[test]
    fn a_line_above_the_chosen_top_is_cut_not_flattened() {
        // Down from 10 to 0 over x 0..10, the axis topped at 5 (+8 %).
        let line: Vec<_> = (0..=10).map(|i| (i as f64, 10.0 - i as f64, 0.0)).collect();
        let pieces = clip_below(&line, 5.4);
        assert_eq!(pieces.len(), 1);
        let first = pieces[0][0];
        assert!((first.0 - 4.6).abs() < 1e-9 && first.1 == 5.4, "{first:?}");
        assert_eq!(pieces[0].last().unwrap().0, 10.0);
        // Up, down and up again: two pieces.
        let zig = [
            (0.0, 1.0, 0.0),
            (1.0, 9.0, 0.0),
            (2.0, 1.0, 0.0),
            (3.0, 2.0, 0.0),
        ];
        assert_eq!(clip_below(&zig, 5.0).len(), 2);
        let svg = render(&Chart {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            x_categories: None,
            y_max: Some(5.0),
            series: vec![Series {
                name: "s".into(),
                color: PALETTE[0],
                mark: Mark::Line { dashed: false },
                points: line,
            }],
        });
        // Ticks stop at the chosen top: 0..5, not 0..10.
        let y_tick = |v: &str| format!(r#"text-anchor="end" font-size="11">{v}</text>"#);
        assert!(svg.contains(&y_tick("5")), "{svg}");
        assert!(
            !svg.contains(&y_tick("6")) && !svg.contains(&y_tick("10")),
            "{svg}"
        );
        assert_eq!(svg.matches("<polyline").count(), 1);
    }
}
