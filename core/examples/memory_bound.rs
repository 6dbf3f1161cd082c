//! Peak RSS of pipelines over large elements at several RAM budgets (RELIABILITY.md,
//! "Memory bounded in bytes").
//!
//! ```text
//! cargo run --release -p sluice-core --example memory_bound            # the whole table
//! cargo run --release -p sluice-core --example memory_bound -- CASE SIZE BUDGET
//! ```
//!
//! Without arguments it runs every case in a fresh process of its own (itself, with
//! arguments) and prints a Markdown table. A case reads elements of SIZE bytes (`range` +
//! a `map` making a payload of that many bytes), through one of the pipelines below, with a
//! consumer that takes 5 ms per element (so buffers fill), and prints the process's peak
//! RSS (`VmHWM` in `/proc/self/status`) in MiB, the elements read, and the error if the
//! pipeline refused. `idle` is the same process with no payload: the fixed overhead.
//!
//! Each case runs twice: with glibc's default allocator settings, and with
//! `MALLOC_MMAP_THRESHOLD_=1048576`, which turns off glibc's dynamic mmap threshold (after
//! a large block is freed, glibc serves blocks of that size from its per-thread heaps
//! instead, and each heap may keep up to twice that size of freed memory resident): the
//! difference is memory the allocator keeps, not memory the pipeline holds.

use std::process::Command;
use std::time::Duration;

use sluice_core::prelude::*;

const MIB: u64 = 1 << 20;

/// `VmHWM` of this process, in bytes.
fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

fn payload(e: Element, size: usize) -> Result<Element> {
    let i = e
        .tensor("value")
        .and_then(|t| t.as_i64())
        .map_or(0, |v| v[0]);
    let bytes = vec![(i % 251) as u8 + 1; size];
    Ok(e.with(
        "payload",
        Tensor::new(&[size], TensorData::U8(bytes.into()))?,
    ))
}

/// Elements of `size` bytes, `n` of them.
fn source(n: i64, size: usize) -> Dataset {
    Dataset::range(0, n).map(move |e| payload(e, size))
}

fn pipeline(case: &str, n: i64, size: usize) -> Dataset {
    match case {
        "batch" => source(n, size)
            .prefetch(BufferSize::Fixed(32))
            .batch(8)
            .prefetch(BufferSize::Fixed(4)),
        "interleave" => Dataset::range(0, 4)
            .interleave_with(
                InterleaveSpec::new(4).num_parallel(NumParallel::Fixed(4)),
                move |e| {
                    let f = e
                        .tensor("value")
                        .and_then(|t| t.as_i64())
                        .map_or(0, |v| v[0]);
                    Ok(Dataset::range(f * n / 4, (f + 1) * n / 4).map(move |e| payload(e, size)))
                },
            )
            .prefetch(BufferSize::Fixed(8)),
        "parallel_map" => Dataset::range(0, n)
            .map_with(MapSpec::parallel(NumParallel::Fixed(4)), move |e, _| {
                payload(e, size)
            })
            .prefetch(BufferSize::Fixed(8)),
        // The fixed overhead: the batch pipeline with no payload.
        "idle" => Dataset::range(0, n)
            .prefetch(BufferSize::Fixed(32))
            .batch(8)
            .prefetch(BufferSize::Fixed(4)),
        other => panic!("unknown case {other}"),
    }
}

/// Runs one case in this process and prints `peak_bytes elements error`.
fn run_case(case: &str, size: usize, budget: u64) {
    // Enough elements for several times the largest budget to flow through.
    let n = ((3 * (1u64 << 30)) / size.max(1) as u64).clamp(64, 20_000) as i64;
    let ds = pipeline(case, n, size).with_options(
        Options::default()
            .with_seed(1)
            .with_cpu_budget(4)
            .with_ram_budget(budget),
    );
    let mut read = 0u64;
    let mut error = String::new();
    match ds.iter() {
        Ok(it) => {
            for e in it {
                match e {
                    Ok(_) => read += 1,
                    Err(e) => {
                        error = e.to_string();
                        break;
                    }
                }
                std::thread::sleep(Duration::from_millis(5));
                if read >= 200 {
                    break;
                }
            }
        }
        Err(e) => error = e.to_string(),
    }
    println!("{} {read} {}", peak_rss(), error.replace('\n', " "));
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [case, size, budget] = args.as_slice() {
        run_case(case, size.parse().unwrap(), budget.parse().unwrap());
        return;
    }
    let me = std::env::current_exe().expect("this program");
    let run_with = |case: &str, size: usize, budget: u64, fixed: bool| -> (u64, u64, String) {
        let mut command = Command::new(&me);
        command.args([case, &size.to_string(), &budget.to_string()]);
        if fixed {
            command.env("MALLOC_MMAP_THRESHOLD_", "1048576");
        }
        let out = command.output().expect("a case runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let mut parts = text.trim().splitn(3, ' ');
        let peak = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        let read = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        (peak, read, parts.next().unwrap_or("").to_string())
    };
    let run = |case: &str, size: usize, budget: u64| run_with(case, size, budget, false);
    let (idle, _, _) = run("idle", 0, 64 * MIB);
    println!(
        "fixed overhead (no payload, same threads): {:.0} MiB\n",
        idle as f64 / MIB as f64
    );
    println!(
        "| pipeline | element | budget | peak RSS | peak RSS, mmap threshold 1 MiB | over budget (ditto) | elements read |"
    );
    println!("|---|---|---|---|---|---|---|");
    let sizes = [("20 MB", 20_000_000usize), ("100 KB", 100_000)];
    let extra: Vec<(&str, usize, u64)> = std::env::var("MEMORY_BOUND_ISSUE")
        .map(|_| {
            vec![
                ("batch", 16 << 20, 64 * MIB),
                ("interleave", 16 << 20, 64 * MIB),
            ]
        })
        .unwrap_or_default();
    let mut cases = Vec::new();
    for case in ["batch", "interleave", "parallel_map"] {
        for (_, size) in sizes {
            for budget in [64 * MIB, 256 * MIB, 1024 * MIB] {
                cases.push((case, size, budget));
            }
        }
    }
    cases.extend(extra);
    for (case, size, budget) in cases {
        let (peak, read, error) = run(case, size, budget);
        let (fixed, _, _) = run_with(case, size, budget, true);
        let over = fixed as f64 / MIB as f64 - budget as f64 / MIB as f64;
        let name = match case {
            "batch" => "prefetch 32 → batch 8 → prefetch 4",
            "interleave" => "interleave 4 (4 threads) → prefetch 8",
            _ => "parallel map (4) → prefetch 8",
        };
        let element = if size >= 1 << 20 {
            format!("{:.0} MB", size as f64 / 1e6)
        } else {
            format!("{:.0} KB", size as f64 / 1e3)
        };
        let outcome = if error.is_empty() {
            read.to_string()
        } else {
            format!(
                "{read}, then: {}",
                error.chars().take(120).collect::<String>()
            )
        };
        println!(
            "| {name} | {element} | {} MiB | {:.0} MiB | {:.0} MiB | {over:+.0} MiB | {outcome} |",
            budget / MIB,
            peak as f64 / MIB as f64,
            fixed as f64 / MIB as f64,
        );
    }
}
