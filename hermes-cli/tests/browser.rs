//! `hermes dashboard` in a real browser (Debian's Chromium, headless, driven through
//! ChromeDriver): on a filesystem queue with a worker running, the overview shows the driver's
//! counts, the "Replay" button of a dead letter puts it back and the worker handles it, the
//! workers page lists the worker, and the chart draws the throughput. The test saves a
//! screenshot of the overview in the test target folder, and also at `HERMES_SCREENSHOT` when
//! that is set (relative to the workspace's root; the README's picture is made so). On the
//! filesystem and on Redis, a queue's pages and actions, each checked in the backend (their
//! screenshots also in the folder `HERMES_SCREENSHOTS` when set).
//!
//! Needs `chromium` and `chromedriver` (the test command installs them); without them the test
//! is skipped with a note, or fails under `HERMES_TEST_STRICT=1`.

mod common;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::dashboard::{Dashboard, bury};
use fantoccini::{Client, ClientBuilder, Locator};
use hermes::fs::FileSystemDriver;
use hermes_core::flow::PauseTarget;
use hermes_core::inspect::{Figure, QueueState, QueueStats};
use hermes_core::{
    DEFAULT_PRIORITY, Dispatcher, DispatcherOptions, Driver, Message, SharedFileShutdown, Shutdown,
};
use hermes_testkit::suite::{available_or_skip, strict};
use serde_json::json;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const PATIENCE: Duration = Duration::from_secs(20);

/// A child process killed when dropped, so a failed test leaves nothing running.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn browser_available() -> Result<(), String> {
    for program in [CHROMIUM, CHROMEDRIVER] {
        if !Path::new(program).exists() {
            return Err(format!("{program} is not installed"));
        }
    }
    Ok(())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// ChromeDriver on a free loopback port, once it accepts connections.
fn start_chromedriver() -> (Running, u16) {
    let port = free_port();
    let child = Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("running chromedriver");
    let running = Running(child);
    let deadline = Instant::now() + PATIENCE;
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "chromedriver did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    (running, port)
}

/// A headless Chromium session, with the flags a closed network needs and a fresh profile.
async fn open_browser(port: u16, profile: &Path) -> Client {
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".to_owned(),
        json!({
            "binary": CHROMIUM,
            "args": [
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
                format!("--user-data-dir={}", profile.display()),
                "--window-size=1280,900",
            ],
        }),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(capabilities)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect("a browser session")
}

/// The text of the element `css`, found again when the page's own script replaced it between
/// finding it and reading it (a stale element), or looked for again while a page that a click
/// asked for is still loading (no such element yet).
async fn text(browser: &Client, css: &str) -> String {
    let mut tries = 0;
    loop {
        let element = match browser.find(Locator::Css(css)).await {
            Ok(element) => element,
            Err(e) if tries < 20 && e.is_no_such_element() => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            Err(e) => panic!("{css} on the page: {e}"),
        };
        match element.text().await {
            Ok(text) => return text,
            // A replaced element is stale, or (as Chromium also says) no longer in the document.
            Err(e)
                if tries < 20
                    && (e.is_stale_element_reference()
                        || e.to_string().contains("does not belong to the document")) =>
            {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("the text of {css}: {e}"),
        }
    }
}

/// Waits until `check` holds for the text of `css`, reloading nothing: the page's own script
/// refreshes it.
async fn wait_for_text(browser: &Client, css: &str, check: impl Fn(&str) -> bool, what: &str) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let shown = text(browser, css).await;
        if check(&shown) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {css} shows {shown:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// How the dashboard writes a summed figure.
fn shown(stats: &[QueueStats], figure: impl Fn(&QueueStats) -> Figure<u64>) -> String {
    let total: u64 = stats.iter().filter_map(|q| figure(q).value()).sum();
    total.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_a_browser() {
    if !available_or_skip(strict(), "the_dashboard_in_a_browser", browser_available()) {
        return;
    }
    let dir = std::env::temp_dir().join(format!("hermes-browser-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let url = format!("file://{}?queue=jobs", dir.display());
    let driver = FileSystemDriver::from_url(&url).unwrap();
    bury(&driver, "dead-1", "card declined").await;
    for n in 0..3 {
        let message = Message::builder("report.export")
            .id(format!("waiting-{n}"))
            .build()
            .unwrap();
        driver.send(&message, DEFAULT_PRIORITY).await.unwrap();
    }
    let later = Message::builder("report.export")
        .id("later")
        .execute_at(hermes_core::time::unix_now() + 3600.0)
        .build()
        .unwrap();
    driver.send(&later, DEFAULT_PRIORITY).await.unwrap();

    let dashboard = Dashboard::start(&url, &[]);
    let address = format!("http://{}", dashboard.address);
    let (_chromedriver, port) = start_chromedriver();
    let profile = dir.join("browser-profile");
    let browser = open_browser(port, &profile).await;

    // The overview shows what the driver counts.
    browser.goto(&format!("{address}/")).await.unwrap();
    let stats = driver.inspect().unwrap().stats().await.unwrap();
    assert_eq!(
        text(&browser, "#waiting").await,
        shown(&stats, |q| q.waiting)
    );
    assert_eq!(
        text(&browser, "#delayed").await,
        shown(&stats, |q| q.delayed)
    );
    assert_eq!(text(&browser, "#dead").await, shown(&stats, |q| q.dead));
    assert_eq!(text(&browser, "#waiting").await, "3");
    assert_eq!(text(&browser, "#dead").await, "1");

    // A worker starts and takes the waiting messages, and a steady trickle of new ones.
    let handled = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut options = DispatcherOptions::default();
    options.announce_ttl = Some(Duration::from_secs(3));
    let mut dispatcher = Dispatcher::new(driver.clone()).options(options);
    for message_type in ["report.export", "charge"] {
        let handled = handled.clone();
        dispatcher.register_fn(message_type, move |m| {
            let handled = handled.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                handled.lock().unwrap().push(m.id().to_owned());
                Ok(true)
            }
        });
    }
    let stop = SharedFileShutdown::new(dir.join("shutdown"));
    let dispatcher = dispatcher.with_shutdown(stop.clone());
    let worker = tokio::spawn(async move { dispatcher.handle(&[]).await });
    let trickle = {
        let driver = driver.clone();
        tokio::spawn(async move {
            for n in 0.. {
                let message = Message::builder("report.export")
                    .id(format!("trickle-{n}"))
                    .build()
                    .unwrap();
                driver.send(&message, DEFAULT_PRIORITY).await.unwrap();
                tokio::time::sleep(Duration::from_millis(25 + (n % 40) * 2)).await;
            }
        })
    };
    wait_for_text(
        &browser,
        "#waiting",
        |t| t != "3",
        "the worker takes the waiting messages",
    )
    .await;

    // "Replay" on the dead letter: the list empties and the worker handles it. The live
    // refresh is paused meanwhile, so the button clicked is the one found.
    set_live(&browser, false).await;
    browser.goto(&format!("{address}/dead")).await.unwrap();
    assert!(text(&browser, "main").await.contains("card declined"));
    browser
        .find(Locator::Css("button.replay"))
        .await
        .expect("a Replay button")
        .click()
        .await
        .unwrap();
    // The click loads the list again: the old page may still show until it does.
    wait_for_text(
        &browser,
        "main",
        |t| t.contains("No dead letters."),
        "the dead letter list empties",
    )
    .await;
    let deadline = Instant::now() + PATIENCE;
    while !handled.lock().unwrap().iter().any(|id| id == "dead-1") {
        assert!(
            Instant::now() < deadline,
            "the worker handled the replayed letter"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        driver
            .dead_letters()
            .unwrap()
            .list(DEFAULT_PRIORITY, 10)
            .await
            .unwrap()
            .is_empty()
    );

    // The workers page lists the running worker.
    browser.goto(&format!("{address}/workers")).await.unwrap();
    let listed = driver.workers().unwrap().list().await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(text(&browser, "main").await.contains(&listed[0].id));

    // The overview counts what the worker handled and charts it.
    set_live(&browser, true).await;
    browser.goto(&format!("{address}/")).await.unwrap();
    wait_for_text(
        &browser,
        "#handled",
        |t| t.parse::<u64>().is_ok_and(|n| n >= 4),
        "the overview counts the handled messages",
    )
    .await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    let points: serde_json::Value = browser
        .execute(
            "var l = document.querySelector('#chart polyline.handled'); \
             return l ? l.getAttribute('points').split(' ').length : 0;",
            vec![],
        )
        .await
        .unwrap();
    assert!(
        points.as_u64().unwrap_or(0) >= 3,
        "the chart draws: {points}"
    );
    assert_eq!(text(&browser, "#dead").await, "0");
    assert_eq!(text(&browser, "#failed").await, "0");

    let png = browser.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    let mut places = vec![PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png")];
    if let Some(path) = std::env::var_os("HERMES_SCREENSHOT") {
        // A relative path is taken from the workspace's root.
        places.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path));
    }
    for place in places {
        std::fs::write(&place, &png).unwrap();
        eprintln!("screenshot: {}", place.display());
    }

    browser.close().await.unwrap();
    trickle.abort();
    stop.shutdown(None).await.unwrap();
    worker.await.unwrap().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Waits until the page's `main` holds `wanted`, reloading it: after an action the browser
/// follows the redirect back to the page.
async fn wait_for_main(browser: &Client, check: impl Fn(&str) -> bool, what: &str) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if check(&text(browser, "main").await) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Turns the live refresh on or off, as its button does, for the pages loaded after.
async fn set_live(browser: &Client, on: bool) {
    let value = if on { "on" } else { "off" };
    browser
        .execute(
            &format!("window.localStorage.setItem('hermes-live', '{value}');"),
            vec![],
        )
        .await
        .unwrap();
}

async fn click(browser: &Client, css: &str) {
    browser
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .click()
        .await
        .unwrap();
}

/// Saves the whole page (the window made as tall as it, up to 2,000 pixels) as `name`.png in
/// the test target folder, and in `HERMES_SCREENSHOTS` (a folder, relative to the workspace's
/// root) when that is set.
async fn save_screenshot(browser: &Client, name: &str) {
    let height: serde_json::Value = browser
        .execute("return document.documentElement.scrollHeight;", vec![])
        .await
        .unwrap();
    let height = height.as_u64().unwrap_or(900).clamp(600, 2_000) as u32;
    browser.set_window_size(1280, height + 100).await.unwrap();
    let png = browser.screenshot().await.unwrap();
    browser.set_window_size(1280, 900).await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    let mut places = vec![PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.png"))];
    if let Some(folder) = std::env::var_os("HERMES_SCREENSHOTS") {
        let folder = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(folder);
        places.push(folder.join(format!("{name}.png")));
    }
    for place in places {
        std::fs::write(&place, &png).unwrap();
        eprintln!("screenshot: {}", place.display());
    }
}

/// A queue's pages and actions in the browser, checked in the backend after each action:
/// foreign text shows as text and runs nothing, a selection is deleted after the browser's
/// confirmation, a delayed job runs now, a job's page shows it, the queue pauses and resumes.
async fn the_queue_pages_work(url: &str, driver: &dyn Driver, backend: &str) {
    let hostile = Message::builder("<script>window.hermesInjected = 1</script>")
        .id("hostile")
        .payload(&json!({ "note": "\"><img src=x onerror=\"window.hermesInjected = 2\">" }))
        .build()
        .unwrap();
    driver.send(&hostile, DEFAULT_PRIORITY).await.unwrap();
    for n in 0..3 {
        let message = Message::builder("report.export")
            .id(format!("w-{n}"))
            .payload(&json!({ "row": n }))
            .build()
            .unwrap();
        driver.send(&message, DEFAULT_PRIORITY).await.unwrap();
    }
    let later = Message::builder("report.export")
        .id("later")
        .execute_at(hermes_core::time::unix_now() + 3600.0)
        .build()
        .unwrap();
    driver.send(&later, DEFAULT_PRIORITY).await.unwrap();
    let browse = driver.browse().unwrap();
    let state_of = |id: &'static str| async move {
        browse
            .find(DEFAULT_PRIORITY, id)
            .await
            .unwrap()
            .map(|(state, _)| state)
    };

    let dashboard = Dashboard::start(url, &[]);
    let address = format!("http://{}", dashboard.address);
    let (_chromedriver, port) = start_chromedriver();
    let profile = std::env::temp_dir().join(format!(
        "hermes-browser-queue-{backend}-{}",
        std::process::id()
    ));
    let browser = open_browser(port, &profile).await;

    browser.goto(&format!("{address}/queues")).await.unwrap();
    set_live(&browser, false).await;
    click(&browser, "a.queue").await;
    wait_for_main(&browser, |t| t.contains("w-2"), "the queue's jobs").await;
    let main = text(&browser, "main").await;
    assert!(
        main.contains("<script>window.hermesInjected = 1</script>"),
        "{main}"
    );
    let injected: serde_json::Value = browser
        .execute("return window.hermesInjected === undefined;", vec![])
        .await
        .unwrap();
    assert_eq!(injected, json!(true), "foreign text ran as script");
    save_screenshot(&browser, &format!("dashboard-queue-{backend}")).await;

    // Delete two jobs, confirming in the browser's dialog.
    click(&browser, "input[type=checkbox][value=\"w-0\"]").await;
    click(&browser, "input[type=checkbox][value=\"w-1\"]").await;
    click(&browser, "button.delete").await;
    browser.accept_alert().await.expect("a confirmation");
    wait_for_main(
        &browser,
        |t| !t.contains("w-0"),
        "the list without the deleted",
    )
    .await;
    assert_eq!(state_of("w-0").await, None);
    assert_eq!(state_of("w-1").await, None);
    assert_eq!(state_of("w-2").await, Some(QueueState::Waiting));

    // The delayed job, run now.
    click(&browser, "a[href*=\"state=delayed\"]").await;
    wait_for_main(&browser, |t| t.contains("later"), "the delayed job").await;
    click(&browser, "input[type=checkbox][value=\"later\"]").await;
    click(&browser, "button.run-now").await;
    wait_for_main(&browser, |t| t.contains("No jobs here."), "none delayed").await;
    assert_eq!(state_of("later").await, Some(QueueState::Waiting));

    // One job's page.
    browser
        .goto(&format!("{address}/job?priority=100&id=w-2"))
        .await
        .unwrap();
    let main = text(&browser, "main").await;
    assert!(
        main.contains("report.export") && main.contains("\"row\": 2"),
        "{main}"
    );
    save_screenshot(&browser, &format!("dashboard-job-{backend}")).await;

    // Pause and resume the queue.
    browser.goto(&format!("{address}/queue")).await.unwrap();
    click(&browser, "button.pause").await;
    wait_for_main(&browser, |t| t.contains("Paused:"), "the queue paused").await;
    let paused = driver.controls().unwrap().paused().await.unwrap();
    assert_eq!(paused, [PauseTarget::Priority(DEFAULT_PRIORITY)]);
    click(&browser, "button.resume").await;
    wait_for_main(&browser, |t| !t.contains("Paused:"), "the queue resumed").await;
    assert!(
        driver
            .controls()
            .unwrap()
            .paused()
            .await
            .unwrap()
            .is_empty()
    );

    // The live refresh shows a new job without a reload, and its button pauses it.
    browser.goto(&format!("{address}/queue")).await.unwrap();
    click(&browser, "#live").await;
    assert_eq!(text(&browser, "#live").await, "Live: on");
    let fresh = Message::builder("report.export")
        .id("fresh-1")
        .build()
        .unwrap();
    driver.send(&fresh, DEFAULT_PRIORITY).await.unwrap();
    wait_for_main(
        &browser,
        |t| t.contains("fresh-1"),
        "the new job shows by itself",
    )
    .await;
    click(&browser, "#live").await;
    assert_eq!(text(&browser, "#live").await, "Live: paused");
    let unseen = Message::builder("report.export")
        .id("fresh-2")
        .build()
        .unwrap();
    driver.send(&unseen, DEFAULT_PRIORITY).await.unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        !text(&browser, "main").await.contains("fresh-2"),
        "paused, the page stays"
    );

    browser.close().await.unwrap();
    dashboard.stop();
    let _ = std::fs::remove_dir_all(&profile);
}

/// A filesystem queue of its own: its folder (emptied), URL and driver.
fn filesystem_queue(name: &str) -> (PathBuf, String, FileSystemDriver) {
    let dir = std::env::temp_dir().join(format!("hermes-browser-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let url = format!("file://{}?queue=jobs", dir.display());
    let driver = FileSystemDriver::from_url(&url).unwrap();
    (dir, url, driver)
}

/// A Redis queue of its own: its URL and driver.
async fn redis_queue(name: &str) -> (String, hermes::redis::RedisSetDriver) {
    let key = hermes_testkit::suite::unique_queue_name(name);
    let base =
        std::env::var("HERMES_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
    let url = format!("{base}/0?key={key}&schedule_key={key}_schedule");
    let driver = hermes::redis::RedisSetDriver::from_url(&url)
        .await
        .expect("Redis");
    (url, driver)
}

/// Empties what a test left waiting or delayed.
async fn purge(driver: &dyn Driver) {
    let inspect = driver.inspect().unwrap();
    for state in [QueueState::Waiting, QueueState::Delayed] {
        inspect.purge(DEFAULT_PRIORITY, state).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_pages_in_a_browser_on_the_filesystem() {
    if !available_or_skip(
        strict(),
        "the_queue_pages_on_the_filesystem",
        browser_available(),
    ) {
        return;
    }
    let (dir, url, driver) = filesystem_queue("q");
    the_queue_pages_work(&url, &driver, "filesystem").await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_pages_in_a_browser_on_redis() {
    if !available_or_skip(strict(), "the_queue_pages_on_redis", browser_available()) {
        return;
    }
    let (url, driver) = redis_queue("browser").await;
    the_queue_pages_work(&url, &driver, "redis").await;
    purge(&driver).await;
}

/// A row of an import, a job of a batch.
#[derive(serde::Serialize, serde::Deserialize)]
struct Row {
    n: u32,
}

impl hermes_core::Job for Row {
    const TYPE: &'static str = "import.row";
}

/// Loads `path` again until `check` holds for its `main` (what a worker does shows within a few
/// seconds, its counters within their flush).
async fn reload_until(browser: &Client, url: &str, check: impl Fn(&str) -> bool, what: &str) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        browser.goto(url).await.unwrap();
        let main = text(browser, "main").await;
        if check(&main) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {main}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The other pages and their actions with a worker running, each checked in the backend: the
/// overview's history, the workers and what they run, the limits' use, the job types, a batch,
/// the cron entries and Run now, a dead letter deleted (confirmed) and one replayed from its
/// queue's tab, a delayed job cancelled (confirmed). A screenshot of each page.
async fn the_other_pages_work(url: &str, driver: Arc<dyn Driver>, backend: &str) {
    use hermes_core::flow::Limits;
    use hermes_core::tracking::Batch;
    use hermes_core::{CronEntry, Emitter, HandlerError, Scheduler, cron::CronSchedule};

    bury(&*driver, "dead-a", "card declined").await;
    bury(&*driver, "dead-b", "card expired").await;
    let to_cancel = Message::builder("report.export")
        .id("to-cancel")
        .execute_at(hermes_core::time::unix_now() + 3600.0)
        .build()
        .unwrap();
    driver.send(&to_cancel, DEFAULT_PRIORITY).await.unwrap();

    let handled = Arc::new(Mutex::new(Vec::<String>::new()));
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let mut options = DispatcherOptions::default();
    options.announce_ttl = Some(Duration::from_secs(3));
    let emitter = Emitter::from_arc(driver.clone());
    let scheduler = Scheduler::new(emitter.clone());
    scheduler
        .add(
            CronEntry::new(
                "nightly-export",
                CronSchedule::new("0 3 * * *", "UTC").unwrap(),
                "report.export",
            )
            .payload(&json!({ "report": "sales" }))
            .unwrap(),
        )
        .unwrap();
    let mut dispatcher = Dispatcher::from_arc(driver.clone())
        .options(options)
        .concurrency(6)
        .with_scheduler(scheduler);
    dispatcher
        .limit(
            "call-api",
            Limits::new()
                .concurrency(2)
                .rate(hermes_core::flow::Rate::per_minute(600))
                .concurrency_per_key(2),
        )
        .unwrap();
    for message_type in ["report.export", "charge", "import.row"] {
        let handled = handled.clone();
        dispatcher.register_fn(message_type, move |m| {
            let handled = handled.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                handled.lock().unwrap().push(m.id().to_owned());
                Ok(true)
            }
        });
    }
    let held = gate.clone();
    dispatcher.register_fn("call-api", move |_| {
        let held = held.clone();
        async move {
            let _pass = held.acquire().await.map_err(HandlerError::msg)?;
            Ok(true)
        }
    });
    let stop = dispatcher.cancellation_token();
    let worker = tokio::spawn(async move { dispatcher.handle(&[]).await });
    for n in 0..3 {
        let call = Message::builder("call-api")
            .id(format!("call-{n}"))
            .limit_key("acme")
            .build()
            .unwrap();
        driver.send(&call, DEFAULT_PRIORITY).await.unwrap();
    }
    let done = Message::builder("report.export")
        .id("batch-done")
        .build()
        .unwrap();
    let batch = emitter
        .emit_batch_of(
            Batch::new()
                .description("rows import")
                .on_complete_message(&done, DEFAULT_PRIORITY),
            &[Row { n: 1 }, Row { n: 2 }, Row { n: 3 }],
        )
        .await
        .unwrap();
    let was_handled = |id: &str| handled.lock().unwrap().iter().any(|h| h == id);

    let dashboard = Dashboard::start(url, &[]);
    let address = format!("http://{}", dashboard.address);
    let (_chromedriver, port) = start_chromedriver();
    let profile = std::env::temp_dir().join(format!(
        "hermes-browser-pages-{backend}-{}",
        std::process::id()
    ));
    let browser = open_browser(port, &profile).await;
    browser.goto(&format!("{address}/")).await.unwrap();
    set_live(&browser, false).await;

    // The batches: this one in the list, opening its page.
    reload_until(
        &browser,
        &format!("{address}/groups"),
        |t| t.contains(&batch) && t.contains("rows import"),
        "the batch in the list",
    )
    .await;
    click(&browser, "main a.group").await;
    wait_for_main(&browser, |t| t.contains("on complete"), "the batch's page").await;

    // A batch: its three rows and its callback ran.
    let batch_page = format!("{address}/groups?id={batch}");
    reload_until(
        &browser,
        &batch_page,
        |t| t.contains("3 of 3 finished") && t.contains("rows import"),
        "the batch finishes",
    )
    .await;
    let deadline = Instant::now() + PATIENCE;
    loop {
        let status = emitter.batch_status(&batch).await.unwrap().unwrap();
        if status.on_complete == hermes_core::tracking::CallbackState::Done {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the batch's callback ran: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    reload_until(
        &browser,
        &batch_page,
        |t| t.contains("done"),
        "the callback done",
    )
    .await;
    save_screenshot(&browser, &format!("dashboard-batch-{backend}")).await;

    // The queue's succeeded tab: the batch's callback, from its record (a quick success with
    // nothing to keep, as the rows are, leaves none), opening its job's page.
    reload_until(
        &browser,
        &format!("{address}/queue?state=succeeded&type=report.export"),
        |t| t.contains(".on-complete"),
        "the callback in the succeeded tab",
    )
    .await;
    click(&browser, "main a.job").await;
    wait_for_main(
        &browser,
        |t| t.contains("batch or workflow") && t.contains("succeeded"),
        "a succeeded job's page",
    )
    .await;

    // The workers page: the worker, and the two calls it runs (the third waits on the limit).
    let workers = driver.workers().unwrap().list().await.unwrap();
    assert_eq!(workers.len(), 1, "{workers:?}");
    reload_until(
        &browser,
        &format!("{address}/workers"),
        |t| t.contains(&workers[0].id) && t.matches("call-api").count() == 2,
        "the worker and its two calls",
    )
    .await;
    save_screenshot(&browser, &format!("dashboard-workers-{backend}")).await;

    // The limits page: the calls' limit, full.
    reload_until(
        &browser,
        &format!("{address}/limits?type=call-api&key=acme"),
        |t| {
            t.contains("2 of 2 running")
                && t.contains("2 of 600 started")
                && t.contains("2 of 2 running for \"acme\"")
        },
        "the limits' use, and the key's",
    )
    .await;
    save_screenshot(&browser, &format!("dashboard-limits-{backend}")).await;

    // The job types page, once the worker has added its counters (every 5 s).
    reload_until(
        &browser,
        &format!("{address}/types"),
        |t| t.contains("import.row") && t.contains("report.export"),
        "the job types",
    )
    .await;
    save_screenshot(&browser, &format!("dashboard-types-{backend}")).await;

    // The overview's history charts what the worker handled, and each queue's latency.
    let drawn = "return document.querySelectorAll('#per-minute rect.handled').length > 0 \
                 && document.querySelectorAll('#waits-per-minute circle').length > 0;";
    let deadline = Instant::now() + PATIENCE;
    loop {
        browser.goto(&format!("{address}/")).await.unwrap();
        let shown: serde_json::Value = browser.execute(drawn, vec![]).await.unwrap();
        if shown == json!(true) {
            break;
        }
        assert!(Instant::now() < deadline, "the overview's history");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    save_screenshot(&browser, &format!("dashboard-overview-{backend}")).await;

    // The cron page, and Run now: the worker handles the entry's message.
    reload_until(
        &browser,
        &format!("{address}/cron"),
        |t| t.contains("nightly-export") && t.contains("0 3 * * *"),
        "the cron entry",
    )
    .await;
    save_screenshot(&browser, &format!("dashboard-cron-{backend}")).await;
    click(&browser, "button.run-now").await;
    let deadline = Instant::now() + PATIENCE;
    while !handled
        .lock()
        .unwrap()
        .iter()
        .any(|id| id.starts_with("cron-nightly-export-now-"))
    {
        assert!(Instant::now() < deadline, "the entry's message ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Dead letters: one deleted after the browser's confirmation, the other replayed from its
    // queue's tab.
    let dead = driver.dead_letters().unwrap();
    let dead_ids = || async {
        let letters = dead.list(DEFAULT_PRIORITY, 10).await.unwrap();
        letters.into_iter().map(|l| l.id).collect::<Vec<_>>()
    };
    browser.goto(&format!("{address}/dead")).await.unwrap();
    save_screenshot(&browser, &format!("dashboard-dead-{backend}")).await;
    click(
        &browser,
        "form:has(input[name=id][value=\"dead-a\"]) button.delete",
    )
    .await;
    browser.accept_alert().await.expect("a confirmation");
    wait_for_main(&browser, |t| !t.contains("dead-a"), "dead-a deleted").await;
    assert_eq!(dead_ids().await, ["dead-b"]);
    browser
        .goto(&format!("{address}/queue?priority=100&state=dead"))
        .await
        .unwrap();
    click(&browser, "input[type=checkbox][value=\"dead-b\"]").await;
    click(&browser, "button.replay").await;
    wait_for_main(&browser, |t| !t.contains("dead-b"), "dead-b replayed").await;
    assert!(dead_ids().await.is_empty());
    let deadline = Instant::now() + PATIENCE;
    while !was_handled("dead-b") {
        assert!(Instant::now() < deadline, "the worker handled dead-b");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A delayed job cancelled, after the browser's confirmation.
    browser
        .goto(&format!("{address}/queue?priority=100&state=delayed"))
        .await
        .unwrap();
    click(&browser, "input[type=checkbox][value=\"to-cancel\"]").await;
    click(&browser, "button.cancel").await;
    browser.accept_alert().await.expect("a confirmation");
    let controls = driver.controls().unwrap();
    let deadline = Instant::now() + PATIENCE;
    while !controls
        .cancellations(0.0)
        .await
        .unwrap()
        .iter()
        .any(|c| c.id == "to-cancel")
    {
        assert!(Instant::now() < deadline, "the job cancelled");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A running job cancelled from the in-flight tab: its cancellation is in the backend for
    // the worker running it.
    browser
        .goto(&format!("{address}/queue?priority=100&state=in-flight"))
        .await
        .unwrap();
    let running = browser
        .find(Locator::Css("input[type=checkbox][name=id]"))
        .await
        .expect("a running job")
        .attr("value")
        .await
        .unwrap()
        .expect("its id");
    assert!(running.starts_with("call-"), "{running}");
    click(
        &browser,
        &format!("input[type=checkbox][value=\"{running}\"]"),
    )
    .await;
    click(&browser, "button.cancel").await;
    browser.accept_alert().await.expect("a confirmation");
    let deadline = Instant::now() + PATIENCE;
    while !controls
        .cancellations(0.0)
        .await
        .unwrap()
        .iter()
        .any(|c| c.id == running)
    {
        assert!(Instant::now() < deadline, "the running job cancelled");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    browser.close().await.unwrap();
    dashboard.stop();
    gate.add_permits(3);
    stop.cancel();
    worker.await.unwrap().unwrap();
    let _ = std::fs::remove_dir_all(&profile);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_in_a_browser_on_the_filesystem() {
    if !available_or_skip(
        strict(),
        "every_page_on_the_filesystem",
        browser_available(),
    ) {
        return;
    }
    let (dir, url, driver) = filesystem_queue("p");
    the_other_pages_work(&url, Arc::new(driver), "filesystem").await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_in_a_browser_on_redis() {
    if !available_or_skip(strict(), "every_page_on_redis", browser_available()) {
        return;
    }
    let (url, driver) = redis_queue("browser-pages").await;
    the_other_pages_work(&url, Arc::new(driver.clone()), "redis").await;
    purge(&driver).await;
}
