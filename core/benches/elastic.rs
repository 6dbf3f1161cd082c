//! Elastic resume, measured: checkpoint sizes, the time to the first batch after resuming on
//! another number of hosts (next to a fresh start's), every record read once, and what
//! following records costs a run.
//!
//! ```sh
//! cargo bench -p sluice-core --bench elastic            # 64 files x 20,000 records
//! cargo bench -p sluice-core --bench elastic -- quick   # 16 files x 5,000 records
//! cargo bench -p sluice-core --bench elastic -- overhead   # only the cost of following
//! ```
//!
//! The data (written to a temporary directory): files of 100-byte records, 1.28 M records in
//! all (the size of ImageNet's training set). Three pipelines, each with a 10,000-record
//! shuffle buffer and batches of 256: files interleaved 8 at a time with a filter keeping
//! about 9 in 10 (file-level shards); a global shuffle (positions); `range` (a source that
//! seeks). Eight hosts each read a third of their share, checkpoint, and stop; three and
//! twelve hosts resume from the eight checkpoints.

use std::path::Path;
use std::time::{Duration, Instant};

use sluice_core::prelude::*;
use sluice_core::proto::tfrecord::{Compression, TfRecordWriter};
use sluice_core::{Checkpoint, PipelineIter};

const SHUFFLE: usize = 10_000;
const BATCH: usize = 256;

fn write_files(dir: &Path, files: usize, records: usize) {
    let mut payload = vec![0u8; 100];
    for f in 0..files {
        let p = dir.join(format!("part-{f:05}.tfrecord"));
        let mut w = TfRecordWriter::create(&p, Compression::None).unwrap();
        for r in 0..records {
            let tag = format!("{f}:{r}");
            payload[..tag.len()].copy_from_slice(tag.as_bytes());
            payload[tag.len()..].fill(b' ');
            w.write_record(&payload).unwrap();
        }
        w.finish().unwrap();
    }
}

fn keep(e: &Element) -> sluice_core::Result<bool> {
    let bytes = &e.tensor("record").unwrap().as_bytes_list().unwrap()[0];
    let h = bytes[..12]
        .iter()
        .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(*b as u64));
    Ok(h % 10 != 0)
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Files,
    GlobalShuffle,
    Range,
}

fn pipeline(kind: Kind, dir: &Path, total: i64, hosts: u64, rank: u64, followed: bool) -> Dataset {
    let pattern = format!("{}/part-*.tfrecord", dir.display());
    let ds = match kind {
        Kind::Files => Dataset::tfrecord([pattern])
            .unwrap()
            .shard(hosts, rank)
            .interleave(InterleaveSpec::new(8))
            .shuffle(SHUFFLE)
            .filter(keep)
            .batch(BATCH),
        Kind::GlobalShuffle => Dataset::tfrecord_global_shuffle(
            [pattern],
            GlobalShuffleSpec::default().index_dir(dir.join("index")),
        )
        .unwrap()
        .shard(hosts, rank)
        .shuffle(SHUFFLE)
        .batch(BATCH),
        Kind::Range => Dataset::range(0, total)
            .shard(hosts, rank)
            .shuffle(SHUFFLE)
            .batch(BATCH),
    };
    // A `take` of everything changes nothing but stops records from being followed (the
    // run then cannot resume elastically): the cost of following them, by difference.
    let ds = if followed { ds } else { ds.take(u64::MAX) };
    ds.with_options(Options::default().with_seed(1).with_cpu_budget(2))
}

fn rows(e: &Element) -> usize {
    e.get("record")
        .or_else(|| e.get("value"))
        .map(|v| match v {
            Value::Dense(t) => t.shape().first().copied().unwrap_or(1),
            _ => 1,
        })
        .unwrap_or(1)
}

struct Resumed {
    first_batch: Duration,
    rows: usize,
}

fn first_and_rest(mut it: PipelineIter, started: Instant) -> Resumed {
    let first = it.next().map(|e| rows(&e.unwrap())).unwrap_or(0);
    let first_batch = started.elapsed();
    let rest: usize = it.map(|e| rows(&e.unwrap())).sum();
    Resumed {
        first_batch,
        rows: first + rest,
    }
}

fn scenario(kind: Kind, dir: &Path, total: usize) {
    let make = |hosts, rank| pipeline(kind, dir, total as i64, hosts, rank, true);
    // One host's whole epoch: what every resumed run must add up to.
    let whole: usize = make(1, 0).iter().unwrap().map(|e| rows(&e.unwrap())).sum();
    let fresh = {
        let t = Instant::now();
        let mut it = make(8, 0).iter().unwrap();
        it.next();
        t.elapsed()
    };
    let n = 8u64;
    let mut before = 0usize;
    let mut checkpoints: Vec<Checkpoint> = Vec::new();
    for rank in 0..n {
        let mut it = make(n, rank).iter().unwrap();
        let batches = total / n as usize / BATCH / 3;
        before += it
            .by_ref()
            .take(batches)
            .map(|e| rows(&e.unwrap()))
            .sum::<usize>();
        checkpoints.push(it.checkpoint().unwrap());
    }
    let sizes: Vec<usize> = checkpoints.iter().map(|c| c.to_json().len()).collect();
    let progress: Vec<usize> = checkpoints
        .iter()
        .map(|c| {
            c.elastic
                .as_ref()
                .and_then(|e| e.progress.as_ref())
                .map_or(0, |p| p.len())
        })
        .collect();
    println!(
        "{kind:?}: whole epoch {whole} records; 8 hosts read {before} ({:.0} %), checkpoint JSON per host: max {} B, mean {} B (progress part max {} B)",
        100.0 * before as f64 / whole as f64,
        sizes.iter().max().unwrap(),
        sizes.iter().sum::<usize>() / sizes.len(),
        progress.iter().max().unwrap()
    );
    println!(
        "  first batch of a fresh start on 8 hosts (rank 0): {:.3} s",
        fresh.as_secs_f64()
    );
    for m in [3u64, 12] {
        let mut after = 0usize;
        let mut worst = Duration::ZERO;
        let mut call = Duration::ZERO;
        for rank in 0..m {
            let t = Instant::now();
            let it = make(m, rank).resume_elastic(&checkpoints).unwrap();
            call = call.max(t.elapsed());
            let r = first_and_rest(it, t);
            worst = worst.max(r.first_batch);
            after += r.rows;
        }
        assert_eq!(
            before + after,
            whole,
            "{kind:?}: 8 -> {m} hosts read every record once"
        );
        println!(
            "  8 -> {m:2} hosts: resume_elastic returns in {:.3} s at most, first batch after {:.3} s at most; records before + after = {} = the epoch",
            call.as_secs_f64(),
            worst.as_secs_f64(),
            before + after
        );
    }
}

fn overhead(dir: &Path, total: usize) {
    // Runs of one host's epoch with records followed and not, alternating which goes
    // first each round (one process: allocator and CPU state drift between runs).
    let rounds = 7;
    let mut times: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for followed in order {
            // SLUICE_BENCH_ONLY=followed|plain: one side only (to profile it).
            match std::env::var("SLUICE_BENCH_ONLY").as_deref() {
                Ok("followed") if !followed => continue,
                Ok("plain") if followed => continue,
                _ => {}
            }
            let ds = pipeline(Kind::Files, dir, total as i64, 1, 0, followed);
            let t = Instant::now();
            let n: usize = ds.iter().unwrap().map(|e| rows(&e.unwrap())).sum();
            assert!(n > 0);
            times[usize::from(!followed)].push(t.elapsed().as_secs_f64());
        }
    }
    let stat = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (
            v.first().copied().unwrap_or(f64::NAN),
            v.get(v.len() / 2).copied().unwrap_or(f64::NAN),
        )
    };
    let (fb, fm) = stat(&mut times[0]);
    let (pb, pm) = stat(&mut times[1]);
    let rate = |s: f64| total as f64 / s;
    println!(
        "following records (Files, one host, {rounds} rounds alternating): followed best {:.0} / median {:.0} records/s; not followed best {:.0} / median {:.0}; cost {:+.1} % (best), {:+.1} % (median)",
        rate(fb),
        rate(fm),
        rate(pb),
        rate(pm),
        100.0 * (fb / pb - 1.0),
        100.0 * (fm / pm - 1.0)
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let (files, per_file) = if quick { (16, 5_000) } else { (64, 20_000) };
    let dir = tempfile::tempdir().unwrap();
    let t = Instant::now();
    write_files(dir.path(), files, per_file);
    let total = files * per_file;
    println!(
        "data: {files} files x {per_file} records of 100 bytes ({total} records), written in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    if !std::env::args().any(|a| a == "overhead") {
        for kind in [Kind::Files, Kind::GlobalShuffle, Kind::Range] {
            scenario(kind, dir.path(), total);
        }
    }
    overhead(dir.path(), total);
}
