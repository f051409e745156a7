//! Plain text tables: columns padded to their widest cell.

/// `rows` (the first is the header) as lines of columns two spaces apart.
pub(crate) fn render<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// A duration as people write it: `10s`, `1.5s`, `250ms`.
pub(crate) fn seconds(duration: std::time::Duration) -> String {
    if duration < std::time::Duration::from_secs(1) {
        format!("{}ms", duration.as_millis())
    } else {
        format!("{}s", (duration.as_secs_f64() * 10.0).round() / 10.0)
    }
}
