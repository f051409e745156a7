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
    let plot_w = WIDTH - LEFT;
    let plot_h = HEIGHT - BOTTOM;
    let slot = plot_w / points.len().max(1) as f64;
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg id=\"{id}\" class=\"history\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" \
         aria-label=\"{}\">",
        escape(title)
    );
    let _ = write!(
        svg,
        "<line class=\"axis\" x1=\"{LEFT}\" y1=\"0\" x2=\"{LEFT}\" y2=\"{plot_h}\"/>\
         <line class=\"axis\" x1=\"{LEFT}\" y1=\"{plot_h}\" x2=\"{WIDTH}\" y2=\"{plot_h}\"/>\
         <text class=\"tick\" x=\"{}\" y=\"10\" text-anchor=\"end\">{top}</text>\
         <text class=\"tick\" x=\"{}\" y=\"{plot_h}\" text-anchor=\"end\">0</text>\
         <text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
        LEFT - 4.0,
        LEFT - 4.0,
        LEFT - 4.0,
        plot_h / 2.0,
        escape(unit)
    );
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
    if let (Some(first), Some(last)) = (points.first(), points.last()) {
        let middle = points[points.len() / 2];
        for (x, anchor, at) in [
            (LEFT, "start", first.at),
            (LEFT + plot_w / 2.0, "middle", middle.at),
            (WIDTH, "end", last.at),
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
        "<figure class=\"history\"><figcaption>{}</figcaption>{svg}</figure>",
        escape(title)
    )
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
}
