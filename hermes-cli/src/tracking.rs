//! `hermes job`, `hermes batch` and `hermes workflow`: what became of a job, a batch or a
//! workflow, from the backend's records.

use std::sync::Arc;

use hermes_core::tracking::{BatchStatus, JobRecord};
use hermes_core::{Driver, Emitter};
use hermes_dashboard::view::{batch_state, callback, step_state, workflow_state};
use serde_json::{Value, json};

use crate::Failure;
use crate::args::format_rfc3339;

/// An emitter on `driver`, once it is known to keep records.
fn emitter(driver: &Arc<dyn Driver>) -> Result<Emitter, Failure> {
    if driver.jobs().is_none() {
        return Err(Failure::failed(format!(
            "the {} backend keeps no job records: give --store with the Redis, PostgreSQL or \
             directory URL its workers keep them in",
            driver.name()
        )));
    }
    Ok(Emitter::from_arc(driver.clone()))
}

/// A Unix time as RFC 3339.
fn time(at: f64) -> String {
    format_rfc3339(hermes_core::time::from_unix(at))
}

/// Prints the record of the job `id`; with `result`, its result in full.
pub(crate) async fn job(
    driver: &Arc<dyn Driver>,
    id: &str,
    json: bool,
    result: bool,
) -> Result<(), Failure> {
    let Some(record) = emitter(driver)?.status(id).await? else {
        return Err(Failure::failed(format!(
            "no record of job {id}: it was not tracked, or its record expired"
        )));
    };
    if json {
        println!("{}", serde_json::to_string(&record).unwrap_or_default());
        return Ok(());
    }
    print!("{}", job_lines(&record, result));
    Ok(())
}

/// The lines `hermes job` prints of `record`.
fn job_lines(record: &JobRecord, result: bool) -> String {
    let mut lines = vec![
        format!("job       {}", record.id),
        format!("type      {}", record.message_type),
        format!("state     {}", record.state),
        format!("priority  {}", record.priority),
        format!("retries   {}", record.retries),
    ];
    let mut add = |name: &str, value: Option<String>| {
        if let Some(value) = value {
            lines.push(format!("{name:<9} {value}"));
        }
    };
    add("worker", record.worker.clone());
    add("started", record.started.map(time));
    add("finished", record.finished.map(time));
    add("next", record.next_attempt.map(time));
    add("error", record.error.clone());
    add("group", record.group.clone());
    add(
        "progress",
        record.progress.as_ref().map(|p| match &p.note {
            Some(note) => format!("{}% {note}", p.percent),
            None => format!("{}%", p.percent),
        }),
    );
    add(
        "result",
        record.result.as_ref().map(|value| {
            if result {
                serde_json::to_string_pretty(value).unwrap_or_default()
            } else {
                format!("{} bytes (--result prints it)", value.to_string().len())
            }
        }),
    );
    lines.push(format!("updated   {}", time(record.updated)));
    lines.join("\n") + "\n"
}

/// Prints the batch `id`: its counts and callbacks.
pub(crate) async fn batch(driver: &Arc<dyn Driver>, id: &str, json: bool) -> Result<(), Failure> {
    let Some(status) = emitter(driver)?.batch_status(id).await? else {
        return Err(Failure::failed(format!(
            "no batch {id}: it was never opened, or it expired"
        )));
    };
    if json {
        println!("{}", batch_json(&status));
        return Ok(());
    }
    let mut lines = vec![
        format!("batch        {}", status.id),
        format!("state        {}", batch_state(&status)),
        format!("total        {}", status.total),
        format!("pending      {}", status.pending),
        format!("succeeded    {}", status.succeeded),
        format!("failed       {}", status.failed),
        format!("on success   {}", callback(status.on_success)),
        format!("on complete  {}", callback(status.on_complete)),
        format!("created      {}", time(status.created)),
    ];
    if let Some(description) = &status.description {
        lines.insert(1, format!("description  {description}"));
    }
    if let Some(finished) = status.finished {
        lines.push(format!("finished     {}", time(finished)));
    }
    if let Some(parent) = &status.parent {
        lines.push(format!("within       {parent}"));
    }
    println!("{}", lines.join("\n"));
    Ok(())
}

fn batch_json(status: &BatchStatus) -> Value {
    json!({
        "id": status.id,
        "description": status.description,
        "parent": status.parent,
        "open": status.open,
        "total": status.total,
        "pending": status.pending,
        "succeeded": status.succeeded,
        "failed": status.failed,
        "on_success": callback(status.on_success),
        "on_complete": callback(status.on_complete),
        "created": status.created,
        "finished": status.finished,
    })
}

/// Prints the workflow `id`: its state and each step's.
pub(crate) async fn workflow(
    driver: &Arc<dyn Driver>,
    id: &str,
    json: bool,
) -> Result<(), Failure> {
    let Some(status) = emitter(driver)?.workflow_status(id).await? else {
        return Err(Failure::failed(format!(
            "no workflow {id}: it was never emitted, or it expired"
        )));
    };
    let state = workflow_state(&status.state);
    if json {
        let steps: Vec<Value> = status
            .steps
            .iter()
            .map(|s| json!({"name": s.name, "type": s.message_type, "id": s.id, "state": step_state(&s.state)}))
            .collect();
        println!(
            "{}",
            json!({"id": status.id, "description": status.description, "state": state,
                   "created": status.created, "finished": status.finished, "steps": steps})
        );
        return Ok(());
    }
    println!("workflow  {}\nstate     {state}", status.id);
    let width = status.steps.iter().map(|s| s.name.len()).max().unwrap_or(0);
    for step in &status.steps {
        println!(
            "  {:<width$}  {:<24}  {}",
            step.name,
            step.message_type,
            step_state(&step.state)
        );
    }
    Ok(())
}
