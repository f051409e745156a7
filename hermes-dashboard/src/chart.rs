//! Bar charts drawn on the server as SVG, with their axes and units: a page shows them without
//! a script.

use std::fmt::Write;

use hermes_core::history::Point;

use crate::html::escape;

const WIDTH: f64 = 600.0;
const HEIGHT: f64 = 160.0;
/// Room for the axes' labels.
const LEFT: f64 = 44.0;
const BOTTOM: f64 = 18.0;

/// The opening of a chart's SVG with its axes, its top value and its unit on the y axis.
fn open(id: &str, title: &str, top: &str, unit: &str) -> String {
    let plot_h = HEIGHT - BOTTOM;
    let tick = LEFT - 4.0;
    format!(
        "<svg id=\"{id}\" class=\"history\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" \
         aria-label=\"{}\">\
         <line class=\"axis\" x1=\"{LEFT}\" y1=\"0\" x2=\"{LEFT}\" y2=\"{plot_h}\"/>\
         <line class=\"axis\" x1=\"{LEFT}\" y1=\"{plot_h}\" x2=\"{WIDTH}\" y2=\"{plot_h}\"/>\
         <text class=\"tick\" x=\"{tick}\" y=\"10\" text-anchor=\"end\">{}</text>\
         <text class=\"tick\" x=\"{tick}\" y=\"{plot_h}\" text-anchor=\"end\">0</text>\
         <text class=\"tick unit\" x=\"{}\" y=\"10\" text-anchor=\"start\">{}</text>",
        escape(title),
        escape(top),
        LEFT + 4.0,
        escape(unit)
    )
}

/// The x axis's labels at the first, middle and last of `ats`, the SVG's end, and the figure
/// holding it with its caption and `legend`.
fn close(
    mut svg: String,
    title: &str,
    ats: &[f64],
    label: impl Fn(f64) -> String,
    legend: &str,
) -> String {
    if let (Some(first), Some(last)) = (ats.first(), ats.last()) {
        let middle = ats[ats.len() / 2];
        for (x, anchor, at) in [
            (LEFT, "start", *first),
            (LEFT + (WIDTH - LEFT) / 2.0, "middle", middle),
            (WIDTH, "end", *last),
        ] {
            let _ = write!(
                svg,
                "<text class=\"tick\" x=\"{x}\" y=\"{HEIGHT}\" text-anchor=\"{anchor}\">{}</text>",
                escape(&label(at))
            );
        }
    }
    svg.push_str("</svg>");
    format!(
        "<figure class=\"history\"><figcaption>{}</figcaption>{svg}{legend}</figure>",
        escape(title)
    )
}

/// A bar chart of `points` (handled in blue, failed in red, per bucket), titled `title`, its
/// y axis in `unit`, its x axis labelled by `label` at the first, middle and last point.
pub(crate) fn bars(
    id: &str,
    title: &str,
    unit: &str,
    points: &[Point],
    label: impl Fn(f64) -> String,
) -> String {
    let top = points.iter().map(|p| p.handled).max().unwrap_or(0).max(1);
    let plot_h = HEIGHT - BOTTOM;
    let slot = (WIDTH - LEFT) / points.len().max(1) as f64;
    let mut svg = open(id, title, &top.to_string(), unit);
    for (i, point) in points.iter().enumerate() {
        let x = LEFT + i as f64 * slot;
        let w = (slot - 1.0).max(0.5);
        for (class, value) in [("handled", point.handled), ("failed", point.failed)] {
            if value == 0 {
                continue;
            }
            let h = value as f64 / top as f64 * (plot_h - 2.0);
            let _ = write!(
                svg,
                "<rect class=\"{class}\" x=\"{x:.1}\" y=\"{:.1}\" width=\"{w:.1}\" \
                 height=\"{h:.1}\"><title>{}: {value} {class}</title></rect>",
                plot_h - h,
                escape(&label(point.at))
            );
        }
    }
    let ats: Vec<f64> = points.iter().map(|p| p.at).collect();
    close(svg, title, &ats, label, "")
}

/// One line of a line chart: its name in the legend and a value per point (`None`: a gap).
pub(crate) struct Line {
    pub(crate) name: String,
    pub(crate) values: Vec<Option<f64>>,
}

/// How many lines get a colour of their own; later ones share the last.
const COLOURS: usize = 6;

/// A line chart of `lines` over the points `ats`, titled `title`, its y axis in `unit`, a
/// legend naming each line, its x axis labelled by `label` at the first, middle and last point.
pub(crate) fn lines(
    id: &str,
    title: &str,
    unit: &str,
    ats: &[f64],
    lines: &[Line],
    label: impl Fn(f64) -> String,
) -> String {
    let top = lines
        .iter()
        .flat_map(|l| l.values.iter().flatten())
        .fold(0.0_f64, |a, b| a.max(*b));
    let top = if top > 0.0 { top } else { 1.0 };
    let plot_h = HEIGHT - BOTTOM;
    let step = (WIDTH - LEFT) / ats.len().max(1) as f64;
    let mut svg = open(id, title, &format!("{top}"), unit);
    let mut legend = String::from("<p class=\"legend\">");
    for (n, line) in lines.iter().enumerate() {
        let colour = n.min(COLOURS - 1);
        let mut path = String::new();
        let mut pen_down = false;
        for (i, value) in line.values.iter().enumerate() {
            let Some(value) = value else {
                pen_down = false;
                continue;
            };
            let x = LEFT + (i as f64 + 0.5) * step;
            let y = plot_h - value / top * (plot_h - 2.0);
            let _ = write!(path, "{}{x:.1} {y:.1} ", if pen_down { "L" } else { "M" });
            pen_down = true;
            let at = ats.get(i).copied().unwrap_or_default();
            let _ = write!(
                svg,
                "<circle class=\"line-{colour}\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"1.5\">\
                 <title>{}: {}, {value} {}</title></circle>",
                escape(&label(at)),
                escape(&line.name),
                escape(unit)
            );
        }
        let _ = write!(
            svg,
            "<path class=\"line-{colour}\" d=\"{}\"/>",
            path.trim_end()
        );
        let _ = write!(
            legend,
            "<span class=\"key line-{colour}\">{}</span>",
            escape(&line.name)
        );
    }
    legend.push_str("</p>");
    close(svg, title, ats, label, &legend)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_has_its_axes_units_and_a_bar_per_count() {
        let points = [
            Point {
                at: 0.0,
                handled: 4,
                failed: 1,
            },
            Point {
                at: 60.0,
                handled: 0,
                failed: 0,
            },
            Point {
                at: 120.0,
                handled: 2,
                failed: 0,
            },
        ];
        let svg = bars("c", "Per <minute>", "msgs/min", &points, |at| {
            format!("t{at}")
        });
        assert_eq!(svg.matches("<rect class=\"handled\"").count(), 2);
        assert_eq!(svg.matches("<rect class=\"failed\"").count(), 1);
        assert!(svg.contains(">4</text>") && svg.contains(">msgs/min</text>"));
        assert!(svg.contains(">t0</text>") && svg.contains(">t120</text>"));
        assert!(svg.contains("Per &lt;minute&gt;"));
    }

    #[test]
    fn a_line_chart_has_a_path_and_a_legend_entry_per_line_with_gaps() {
        let lines = [
            Line {
                name: "default <100>".into(),
                values: vec![Some(5.0), None, Some(20.0)],
            },
            Line {
                name: "high".into(),
                values: vec![None, Some(1.0), None],
            },
        ];
        let svg = super::lines("w", "Waits", "ms", &[0.0, 60.0, 120.0], &lines, |at| {
            format!("t{at}")
        });
        assert_eq!(svg.matches("<path ").count(), 2);
        assert_eq!(svg.matches("<circle ").count(), 3);
        let first = svg.split("<path class=\"line-0\" d=\"").nth(1).unwrap();
        let first = &first[..first.find('"').unwrap()];
        assert_eq!(
            first.matches('M').count(),
            2,
            "a gap lifts the pen: {first}"
        );
        assert!(svg.contains(">20</text>") && svg.contains(">ms</text>"));
        assert!(svg.contains("default &lt;100&gt;") && !svg.contains("<100>"));
        assert!(svg.contains(">t0</text>") && svg.contains(">t120</text>"));
    }
}
