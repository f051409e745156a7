//! The page frame and HTML escaping: everything shown comes from the queue, so every text is
//! escaped.

use std::fmt::Write;

use crate::base::Base;

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

/// A whole page titled `title` around `body`, its links under `base`.
pub(crate) fn page(base: &Base, title: &str, body: &str) -> String {
    frame(base, title, body, false)
}

/// A page whose `main` the live refresh replaces every 2 s, unless paused or in use.
pub(crate) fn live_page(base: &Base, title: &str, body: &str) -> String {
    frame(base, title, body, true)
}

fn frame(base: &Base, title: &str, body: &str, live: bool) -> String {
    let mut html = String::new();
    let _ = write!(
        html,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"color-scheme\" content=\"light dark\">\
         <title>Hermes - {title}</title><link rel=\"stylesheet\" href=\"{style}\"></head>\
         <body><nav><a href=\"{overview}\">Overview</a><a href=\"{queues}\">Queues</a>\
         <a href=\"{dead}\">Dead letters</a><a href=\"{workers}\">Workers</a>\
         <a href=\"{types}\">Job types</a><a href=\"{groups}\">Batches</a><a href=\"{cron}\">Cron</a>\
         <a href=\"{limits}\">Limits</a>\
         <a href=\"{metrics}\">Metrics</a><button type=\"button\" id=\"live\" hidden>Live</button>\
         </nav><main{live}><h1>{title}</h1>{body}</main><script src=\"{script}\"></script>\
         </body></html>",
        title = escape(title),
        style = base.to("/assets/style.css"),
        overview = base.to("/"),
        queues = base.to("/queues"),
        dead = base.to("/dead"),
        workers = base.to("/workers"),
        types = base.to("/types"),
        groups = base.to("/groups"),
        cron = base.to("/cron"),
        limits = base.to("/limits"),
        metrics = base.to("/metrics"),
        live = if live { " data-live" } else { "" },
        script = base.to("/assets/live.js"),
    );
    html
}

/// `text` percent-encoded for a query string.
pub(crate) fn query_value(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// A table with `header` and `rows`, every cell escaped but those marked as HTML.
pub(crate) fn table(header: &[&str], rows: &[Vec<Cell>]) -> String {
    let mut html = String::from("<div class=\"scroll\"><table><tr>");
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
    html.push_str("</table></div>");
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
