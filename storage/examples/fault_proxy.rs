//! The fault proxy of the tests as a program, for benchmarks: forwards HTTP requests to an
//! S3-compatible server, delaying each by a fixed latency.
//!
//! ```text
//! cargo run -p sluice-storage --example fault_proxy --features testing --release -- \
//!     --upstream http://127.0.0.1:5000 --latency-ms 20
//! ```
//!
//! Prints `listening on http://127.0.0.1:PORT` once ready, then serves until its stdin
//! closes or it is killed. `--until-killed` ignores stdin (for a proxy started in the
//! background of a script, whose stdin is often `/dev/null`).

use std::io::{Read, Write};
use std::time::Duration;

use anyhow::{Context, bail};
use sluice_storage::testing::FaultProxy;

const USAGE: &str =
    "usage: fault_proxy --upstream http://HOST:PORT [--latency-ms N] [--until-killed]";

fn main() -> anyhow::Result<()> {
    let mut upstream = None;
    let mut latency_ms = 0u64;
    let mut until_killed = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag.to_string(), Some(value.to_string())),
            None => (arg.clone(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .with_context(|| format!("{flag} needs a value\n{USAGE}"))
        };
        match flag.as_str() {
            "--upstream" => upstream = Some(value()?),
            "--latency-ms" => {
                let v = value()?;
                latency_ms = v
                    .parse()
                    .with_context(|| format!("--latency-ms {v:?}: not a number of milliseconds"))?;
            }
            "--until-killed" => until_killed = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    let Some(upstream) = upstream else {
        bail!("--upstream is required\n{USAGE}");
    };
    if !upstream.starts_with("http://") {
        bail!("--upstream {upstream:?}: expected http://HOST:PORT");
    }

    let proxy = FaultProxy::start(&upstream);
    proxy.latency(Duration::from_millis(latency_ms));
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on {}", proxy.endpoint())?;
    stdout.flush()?;
    drop(stdout);

    if until_killed {
        loop {
            std::thread::park();
        }
    }
    // Serve until stdin closes (the parent went away or closed the pipe).
    let mut stdin = std::io::stdin().lock();
    let mut sink = [0u8; 4096];
    loop {
        match stdin.read(&mut sink) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    Ok(())
}
