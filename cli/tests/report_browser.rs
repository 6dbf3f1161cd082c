//! `sluice report`'s pages in a real browser: Debian's headless Chromium, driven over the
//! DevTools protocol (a websocket). For the report of one real run and of two compared:
//! no console error, warning-level `console.error` or uncaught exception; every `<svg>`
//! laid out with a non-empty box and drawn marks (series lines, bars, spans) of non-empty
//! extent; a screenshot whose pixels are not blank (many colours, not all white).
//!
//! A negative control runs the same checker on a page with a deliberate `console.error`,
//! a thrown exception and an empty `<svg>`: the checker must report all three, so a green
//! run means the checks are real.
//!
//! Chromium must be installed (`apt-get install chromium`; `.ci/run` does): the test fails
//! without it. `SLUICE_CHROMIUM` names another binary. With `SLUICE_BLESS=1` the screenshot
//! of the one-run report is written to `docs/images/report.png` (the README shows it).

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

/// How long any step may take (Chromium's start, a page load, a call).
const TIMEOUT: Duration = Duration::from_secs(60);
/// The window the pages are looked at in (and the README's screenshot size).
const WIDTH: u32 = 1000;
const HEIGHT: u32 = 1250;

mod support;

use support::{gen_data, report, run_json};

/// The Chromium to run: `SLUICE_CHROMIUM`, else Debian's `/usr/bin/chromium`, else
/// `chromium` on the PATH. Panics with how to install it.
fn chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("SLUICE_CHROMIUM") {
        return PathBuf::from(p);
    }
    let debian = Path::new("/usr/bin/chromium");
    if debian.exists() {
        return debian.into();
    }
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join("chromium"))
                .find(|p| p.exists())
        })
        .unwrap_or_else(|| {
            panic!(
                "Chromium is not installed: this test opens `sluice report`'s pages in headless \
                 Chromium. Install it (`apt-get install chromium` on Debian; .ci/run does) or \
                 name a binary with SLUICE_CHROMIUM."
            )
        })
}

/// A headless Chromium and one DevTools session on a page of it.
struct Browser {
    child: Child,
    ws: WebSocket<MaybeTlsStream<TcpStream>>,
    session: String,
    next_id: u64,
    /// Events received while waiting for replies (in order).
    events: Vec<Value>,
    _profile: tempfile::TempDir,
}

impl Browser {
    fn launch() -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let mut child = Process::new(chromium())
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--hide-scrollbars",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starts chromium");
        // "DevTools listening on ws://127.0.0.1:PORT/devtools/browser/ID" on stderr; the rest
        // of stderr is drained (a full pipe would stall Chromium).
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            let mut seen = String::new();
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if !sent {
                    if let Some(at) = line.find("ws://") {
                        sent = true;
                        let _ = tx.send(Ok(line[at..].trim().to_string()));
                    } else {
                        seen.push_str(&line);
                        seen.push('\n');
                    }
                }
            }
            if !sent {
                let _ = tx.send(Err(seen));
            }
        });
        let url = match rx.recv_timeout(TIMEOUT) {
            Ok(Ok(url)) => url,
            Ok(Err(stderr)) => {
                let _ = child.kill();
                panic!("chromium exited without its DevTools address; stderr:\n{stderr}")
            }
            Err(_) => {
                let _ = child.kill();
                panic!("chromium did not print its DevTools address within {TIMEOUT:?}")
            }
        };
        let (ws, _) = tungstenite::connect(url.as_str()).expect("connects to DevTools");
        if let MaybeTlsStream::Plain(s) = ws.get_ref() {
            s.set_read_timeout(Some(TIMEOUT)).unwrap();
        }
        let mut b = Browser {
            child,
            ws,
            session: String::new(),
            next_id: 0,
            events: Vec::new(),
            _profile: profile,
        };
        let target = b.call_browser("Target.createTarget", json!({"url": "about:blank"}));
        let target = target["targetId"].as_str().unwrap().to_string();
        let attached = b.call_browser(
            "Target.attachToTarget",
            json!({"targetId": target, "flatten": true}),
        );
        b.session = attached["sessionId"].as_str().unwrap().to_string();
        for domain in ["Runtime.enable", "Log.enable", "Page.enable"] {
            b.call(domain, json!({}));
        }
        b.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": false}),
        );
        b
    }

    /// Sends `method` to the browser (`session` None) or the page; returns its result,
    /// keeping the events that arrive meanwhile.
    fn send(&mut self, session: Option<String>, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        self.ws
            .send(Message::text(msg.to_string()))
            .expect("sends to DevTools");
        let deadline = Instant::now() + TIMEOUT;
        loop {
            assert!(Instant::now() < deadline, "{method}: no reply");
            let reply = self.next_message();
            if reply["id"] == json!(id) {
                if let Some(err) = reply.get("error") {
                    panic!("{method}: {err}");
                }
                return reply["result"].clone();
            }
            if reply.get("method").is_some() {
                self.events.push(reply);
            }
        }
    }

    fn next_message(&mut self) -> Value {
        loop {
            match self.ws.read().expect("reads from DevTools") {
                Message::Text(t) => return serde_json::from_str(t.as_str()).unwrap(),
                Message::Close(_) => panic!("DevTools closed the connection"),
                _ => continue,
            }
        }
    }

    fn call_browser(&mut self, method: &str, params: Value) -> Value {
        self.send(None, method, params)
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let session = Some(self.session.clone());
        self.send(session, method, params)
    }

    /// Opens `path` and waits for its load event.
    fn open(&mut self, path: &Path) {
        self.events.clear();
        let url = format!("file://{}", path.canonicalize().unwrap().display());
        let nav = self.call("Page.navigate", json!({"url": url}));
        assert!(nav.get("errorText").is_none(), "{path:?}: {nav}");
        let deadline = Instant::now() + TIMEOUT;
        while !self
            .events
            .iter()
            .any(|e| e["method"] == "Page.loadEventFired")
        {
            assert!(Instant::now() < deadline, "{path:?} did not load");
            let m = self.next_message();
            if m.get("method").is_some() {
                self.events.push(m);
            }
        }
    }

    /// `expression`'s value (JSON-able) in the page.
    fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        assert!(r.get("exceptionDetails").is_none(), "{expression}: {r}");
        r["result"]["value"].clone()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let id = self.next_id + 1;
        let _ = self.ws.send(Message::text(
            json!({"id": id, "method": "Browser.close"}).to_string(),
        ));
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the checker found on a page.
#[derive(Debug)]
struct PageCheck {
    /// Console errors, uncaught exceptions and error-level log entries, as text.
    errors: Vec<String>,
    /// Per `<svg>`: its label, box size and how many of its marks have a non-empty box.
    svgs: Vec<(String, f64, f64, u64)>,
    /// The viewport's screenshot.
    png: Vec<u8>,
}

impl PageCheck {
    /// The `<svg>`s that did not render: an empty box or no drawn mark.
    fn blank_svgs(&self) -> Vec<String> {
        self.svgs
            .iter()
            .filter(|(_, w, h, marks)| *w < 1.0 || *h < 1.0 || *marks == 0)
            .map(|s| format!("{s:?}"))
            .collect()
    }
}

/// Every drawn mark: series lines, and rectangles with a tooltip (bars, spans); the boxes
/// of plots that say "nothing was recorded" have none.
const SVG_PROBE: &str = r#"
Array.from(document.querySelectorAll('svg')).map(s => {
  const r = s.getBoundingClientRect();
  const marks = Array.from(s.querySelectorAll('path.series, rect, path'))
    .filter(e => e.tagName !== 'rect' || e.querySelector('title'))
    .filter(e => { const b = e.getBBox(); return b.width > 0 || b.height > 0; });
  return [s.getAttribute('aria-label') || '', r.width, r.height, marks.length];
})"#;

fn check_page(b: &mut Browser, path: &Path) -> PageCheck {
    b.open(path);
    let svgs = b.eval(SVG_PROBE);
    let svgs = svgs
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s[0].as_str().unwrap().to_string(),
                s[1].as_f64().unwrap(),
                s[2].as_f64().unwrap(),
                s[3].as_u64().unwrap(),
            )
        })
        .collect();
    let shot = b.call("Page.captureScreenshot", json!({"format": "png"}));
    let png = base64::engine::general_purpose::STANDARD
        .decode(shot["data"].as_str().unwrap())
        .unwrap();
    // Late events (a timer's exception) arrive before this reply.
    b.eval("new Promise(r => setTimeout(() => r(1), 200))");
    let mut errors = Vec::new();
    for e in &b.events {
        let p = &e["params"];
        match e["method"].as_str().unwrap_or_default() {
            "Runtime.consoleAPICalled"
                if matches!(p["type"].as_str(), Some("error" | "assert")) =>
            {
                let args: Vec<String> = p["args"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|a| {
                        a.get("value")
                            .or(a.get("description"))
                            .map_or_else(|| a.to_string(), |v| v.to_string())
                    })
                    .collect();
                errors.push(format!("console.{}: {}", p["type"], args.join(" ")));
            }
            "Runtime.exceptionThrown" => {
                let d = &p["exceptionDetails"];
                errors.push(format!(
                    "exception: {} {}",
                    d["text"], d["exception"]["description"]
                ));
            }
            "Log.entryAdded" if p["entry"]["level"] == "error" => {
                errors.push(format!("log: {}", p["entry"]["text"]));
            }
            _ => {}
        }
    }
    PageCheck { errors, svgs, png }
}

/// The screenshot's distinct colours and the share of its pixels that are not
/// (near-)white.
fn pixels(png: &[u8]) -> (u32, u32, usize, f64) {
    let img = image::load_from_memory(png).expect("a PNG").to_rgb8();
    let mut colours = std::collections::HashSet::new();
    let mut inked = 0usize;
    for p in img.pixels() {
        colours.insert(p.0);
        if p.0.iter().any(|c| *c < 235) {
            inked += 1;
        }
    }
    let n = (img.width() * img.height()) as f64;
    (img.width(), img.height(), colours.len(), inked as f64 / n)
}

#[test]
fn report_pages_render_in_headless_chromium_without_errors() {
    let dir = tempfile::tempdir().unwrap();
    let data = gen_data(dir.path(), 192, 3);
    let a = run_json(dir.path(), &data, "a.json", &["--epochs", "2"]);
    let b = run_json(dir.path(), &data, "b.json", &[]);
    let one = dir.path().join("one.html");
    let two = dir.path().join("two.html");
    report(&[&a], &one);
    report(&[&a, &b], &two);

    let mut browser = Browser::launch();
    for page in [&one, &two] {
        let c = check_page(&mut browser, page);
        assert!(c.errors.is_empty(), "{page:?}: {:#?}", c.errors);
        assert_eq!(c.svgs.len(), 7, "{page:?}: {:?}", c.svgs);
        assert!(c.blank_svgs().is_empty(), "{page:?}: {:?}", c.blank_svgs());
        let (w, h, colours, inked) = pixels(&c.png);
        assert_eq!((w, h), (WIDTH, HEIGHT));
        assert!(colours >= 16, "{page:?}: {colours} colours");
        assert!(
            inked > 0.05,
            "{page:?}: {:.1}% of pixels not white",
            inked * 100.0
        );
        if page == &one && std::env::var_os("SLUICE_BLESS").is_some_and(|v| v == "1") {
            let to = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/images/report.png");
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            assert!(c.png.len() < 300_000, "screenshot of {} bytes", c.png.len());
            std::fs::write(&to, &c.png).unwrap();
        }
    }
}

/// The negative control: the checker sees a `console.error`, an uncaught exception (one
/// while loading, one from a timer) and an `<svg>` that draws nothing.
#[test]
fn the_checker_reports_console_errors_exceptions_and_blank_plots() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("broken.html");
    std::fs::write(
        &page,
        r#"<!DOCTYPE html><html><head><meta charset="utf-8"><title>broken</title></head><body>
<svg aria-label="drawn" viewBox="0 0 100 50" width="200" height="100"><path class="series" d="M0,0L100,50" stroke="red"/></svg>
<svg aria-label="blank" viewBox="0 0 100 50" width="200" height="100"></svg>
<script>console.error("deliberate console error");</script>
<script>throw new Error("deliberate exception");</script>
<script>setTimeout(() => { throw new Error("deliberate late exception"); }, 10);</script>
</body></html>"#,
    )
    .unwrap();
    let mut browser = Browser::launch();
    let c = check_page(&mut browser, &page);
    let all = c.errors.join("\n");
    assert!(all.contains("deliberate console error"), "{all}");
    assert!(all.contains("deliberate exception"), "{all}");
    assert!(all.contains("deliberate late exception"), "{all}");
    let blank = c.blank_svgs();
    assert_eq!(blank.len(), 1, "{blank:?}");
    assert!(blank[0].contains("blank"));
    // A nearly white page is blank to the pixel check.
    let (_, _, colours, inked) = pixels(&c.png);
    assert!(colours < 16 || inked < 0.05, "{colours} colours, {inked}");
}
