//! `limits`: each job type's limits as the live workers announce them, with how much of each is
//! in use now; a per-key limit's use is looked up for one key (`limits?type=T&key=K`).

use std::sync::Arc;

use axum::extract::{Query, State as Shared};
use axum::response::{Html, IntoResponse, Response};
use hermes_core::flow::{Bound, MAX_LIMIT_KEY_LEN};
use serde::Deserialize;

use crate::base::Base;
use crate::html::{Cell, escape, live_page, table};
use crate::state::State;
use crate::view::{AnnouncedLimits, announced_limits, limit_lines, rate};

/// The key to look up, if any.
#[derive(Deserialize)]
pub(crate) struct KeyQuery {
    #[serde(rename = "type")]
    message_type: Option<String>,
    key: Option<String>,
}

/// What `bound` has in use, as `3 of 5 running` or `12 of 50 per 1m`.
fn in_use(bound: &Bound, used: u32) -> String {
    match bound {
        Bound::Slots { max, .. } => format!("{used} of {max} running"),
        Bound::Starts { rate: r, .. } => {
            let shown = rate(r);
            let (max, period) = shown.split_once(" per ").unwrap_or((&shown, ""));
            format!("{used} of {max} started in the last {period}")
        }
        _ => format!("{used} in use"),
    }
}

/// The rows of one type: a row per limit, with its use where `usage` has it.
fn rows(limits: &AnnouncedLimits, usage: &[Option<String>]) -> Vec<Vec<Cell>> {
    let lines = limit_lines(&limits.limits.limits);
    lines
        .into_iter()
        .zip(usage.iter().chain(std::iter::repeat(&None)))
        .map(|((kind, allows), used)| {
            vec![
                Cell::Text(limits.limits.message_type.clone()),
                Cell::Text(kind.to_owned()),
                Cell::Text(allows),
                Cell::Text(used.clone().unwrap_or_else(|| {
                    if kind.ends_with("per key") {
                        "per key: look one up below".to_owned()
                    } else {
                        "?".to_owned()
                    }
                })),
                Cell::Text(format!(
                    "{}{}",
                    limits.workers,
                    if limits.differ { " (some differ)" } else { "" }
                )),
            ]
        })
        .collect()
}

/// `limits`: the page.
pub(crate) async fn page(
    Shared(state): Shared<Arc<State>>,
    base: Base,
    Query(query): Query<KeyQuery>,
) -> Response {
    let Some(listed) = state.driver.workers() else {
        let body = format!(
            "<p>{} lists no workers, which announce their types' limits.</p>",
            escape(state.driver.name())
        );
        return Html(live_page(&base, "Limits", &body)).into_response();
    };
    let workers = match state.call(&base, listed.list()).await {
        Ok(workers) => workers,
        Err(failed) => return failed,
    };
    let all = announced_limits(&workers);
    if all.is_empty() {
        let body = "<p class=\"empty\">No running worker announces limits.</p>";
        return Html(live_page(&base, "Limits", body)).into_response();
    }
    let key = query
        .key
        .as_deref()
        .filter(|k| !k.is_empty() && k.len() <= MAX_LIMIT_KEY_LEN);
    let mut body = String::new();
    if query
        .key
        .as_deref()
        .is_some_and(|k| k.len() > MAX_LIMIT_KEY_LEN)
    {
        body.push_str(&format!(
            "<p class=\"paused\">A limit key is at most {MAX_LIMIT_KEY_LEN} bytes.</p>"
        ));
    }
    let mut all_rows = Vec::new();
    for limits in &all {
        let of_type = &limits.limits;
        let keyed = key.filter(|_| query.message_type.as_deref() == Some(&of_type.message_type));
        let bounds = of_type.limits.bounds(&of_type.message_type, keyed);
        let mut usage = Vec::with_capacity(bounds.len());
        for bound in &bounds {
            let used = match state.driver.limits() {
                Some(store) => match state.call(&base, store.usage(bound)).await {
                    Ok(used) => Some(in_use(bound, used)),
                    Err(failed) => return failed,
                },
                None => None,
            };
            usage.push(used);
        }
        // `bounds` holds the type's own limits, then the key's: the order `limit_lines` shows.
        let per_type = of_type.limits.bounds(&of_type.message_type, None).len();
        let mut shown: Vec<Option<String>> = usage[..per_type].to_vec();
        let lines = limit_lines(&of_type.limits);
        let per_key_lines = lines.len() - per_type;
        let keyed_usage = usage[per_type..].iter().cloned();
        shown.extend(
            keyed_usage
                .map(|u| u.map(|u| format!("{u} for {:?}", keyed.unwrap_or_default())))
                .chain(std::iter::repeat(None))
                .take(per_key_lines),
        );
        all_rows.extend(rows(limits, &shown));
    }
    body.push_str(&table(
        &["type", "limit", "allows", "in use now", "workers"],
        &all_rows,
    ));
    let keyed_types: Vec<&str> = all
        .iter()
        .filter(|l| l.limits.limits.uses_keys())
        .map(|l| l.limits.message_type.as_str())
        .collect();
    if !keyed_types.is_empty() {
        let mut options = String::new();
        for t in &keyed_types {
            let selected = if query.message_type.as_deref() == Some(*t) {
                " selected"
            } else {
                ""
            };
            options.push_str(&format!(
                "<option value=\"{0}\"{selected}>{0}</option>",
                escape(t)
            ));
        }
        body.push_str(&format!(
            "<h2>One key</h2><form method=\"get\" action=\"{}\" class=\"filters\">\
             <label>type <select name=\"type\">{options}</select></label>\
             <label>limit key <input name=\"key\" value=\"{}\" maxlength=\"{MAX_LIMIT_KEY_LEN}\">\
             </label><button type=\"submit\">Show its use</button></form>",
            escape(&base.to("/limits")),
            escape(key.unwrap_or_default()),
        ));
    }
    if state.driver.limits().is_none() {
        body.push_str(&format!(
            "<p class=\"note\">{} keeps no limit state here, so their use is unknown.</p>",
            escape(state.driver.name())
        ));
    }
    Html(live_page(&base, "Limits", &body)).into_response()
}
