//! A signup endpoint that inserts the user and emits the welcome mail in one transaction: the
//! mail is sent if and only if the user's row is committed.
//!
//! ```text
//! DATABASE_URL=postgres://postgres@127.0.0.1/test cargo run -p hermes-postgres --example signup
//! curl -X POST 127.0.0.1:3000/signup -H 'content-type: application/json' -d '{"email":"ada@example.com"}'
//! ```

// ANCHOR: app
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use hermes_core::Job;
use hermes_postgres::PostgresDriver;
use serde::{Deserialize, Serialize};

/// The job: a welcome mail to send.
#[derive(Serialize, Deserialize)]
struct WelcomeMail {
    to: String,
}

impl Job for WelcomeMail {
    const TYPE: &'static str = "welcome-mail";
}

#[derive(Clone)]
struct App {
    db: sqlx::PgPool,
    jobs: PostgresDriver,
}

#[derive(Deserialize)]
struct Signup {
    email: String,
}

async fn signup(
    State(app): State<App>,
    Json(form): Json<Signup>,
) -> Result<StatusCode, StatusCode> {
    let failed = |_| StatusCode::INTERNAL_SERVER_ERROR;
    let mut transaction = app.db.begin().await.map_err(failed)?;
    let inserted = sqlx::query("INSERT INTO users (email) VALUES ($1)")
        .bind(&form.email)
        .execute(&mut *transaction)
        .await;
    if inserted.is_err() {
        // Taken already: the transaction rolls back when dropped, and no mail is queued.
        return Err(StatusCode::CONFLICT);
    }
    let mail = WelcomeMail { to: form.email };
    app.jobs
        .emit_job_in(&mut *transaction, &mail)
        .await
        .map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?;
    transaction.commit().await.map_err(failed)?;
    Ok(StatusCode::CREATED)
}
// ANCHOR_END: app

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1/test".to_owned());
    // ANCHOR: setup
    let db = sqlx::PgPool::connect(&url).await?;
    sqlx::query("CREATE TABLE IF NOT EXISTS users (email text PRIMARY KEY)")
        .execute(&db)
        .await?;
    let jobs = PostgresDriver::from_url(&format!("{url}?queue=mails")).await?;
    let app = Router::new()
        .route("/signup", post(signup))
        .with_state(App { db, jobs });
    // ANCHOR_END: setup
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("listening on http://127.0.0.1:3000");
    axum::serve(listener, app).await?;
    Ok(())
}
