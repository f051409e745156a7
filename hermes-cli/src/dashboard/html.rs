//! The page frame and HTML escaping: everything shown comes from the queue, so every text is
//! escaped.

use std::fmt::Write;

/// `text` with `&`, `<`, `>`, `"` and `'` escaped.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:0;color:#222}\
nav{background:#2d3e50;padding:.6em 1em}nav a{color:#fff;margin-right:1.2em;text-decoration:none}\
main{padding:1em}table{border-collapse:collapse}td,th{padding:.3em .8em;border-bottom:1px solid #ddd;text-align:left}\
.cards{display:flex;gap:1em}.card{border:1px solid #ddd;border-radius:6px;padding:.8em 1.2em}\
.card b{display:block;font-size:1.8em}form{display:inline}button{cursor:pointer}\
.note{color:#666}.chart{position:relative;border:1px solid #ddd;max-width:600px;height:160px}\
.chart svg{width:100%;height:100%}#chart-top{position:absolute;top:2px;left:4px;color:#666;font-size:.8em}\
pre{background:#f6f6f6;padding:.8em;overflow:auto}";

/// A whole page titled `title` around `body`.
pub(crate) fn page(title: &str, body: &str) -> String {
    let mut html = String::new();
    let _ = write!(
        html,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>Hermes - {}</title>\
         <style>{STYLE}</style></head><body><nav><a href=\"/\">Overview</a>\
         <a href=\"/queues\">Queues</a><a href=\"/dead\">Dead letters</a>\
         <a href=\"/workers\">Workers</a><a href=\"/metrics\">Metrics</a></nav>\
         <main><h1>{}</h1>{body}</main></body></html>",
        escape(title),
        escape(title)
    );
    html
}

/// A table with `header` and `rows`, every cell escaped but those marked as HTML.
pub(crate) fn table(header: &[&str], rows: &[Vec<Cell>]) -> String {
    let mut html = String::from("<table><tr>");
    for h in header {
        let _ = write!(html, "<th>{}</th>", escape(h));
    }
    html.push_str("</tr>");
    for row in rows {
        html.push_str("<tr>");
        for cell in row {
            match cell {
                Cell::Text(t) => {
                    let _ = write!(html, "<td>{}</td>", escape(t));
                }
                Cell::Html(h) => {
                    let _ = write!(html, "<td>{h}</td>");
                }
            }
        }
        html.push_str("</tr>");
    }
    html.push_str("</table>");
    html
}

/// A table cell.
pub(crate) enum Cell {
    /// Text, escaped.
    Text(String),
    /// Markup the dashboard made itself.
    Html(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_texts_cannot_inject_markup() {
        assert_eq!(
            escape("<script>alert('x')</script> & \"y\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;y&quot;"
        );
        let html = table(&["a"], &[vec![Cell::Text("<b>".into())]]);
        assert!(html.contains("&lt;b&gt;") && !html.contains("<b>"));
    }
}
