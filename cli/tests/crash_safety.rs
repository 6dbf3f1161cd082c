//! Crash safety of what `sluice run` writes (issue 26): the `sluice` binary is killed with
//! SIGKILL at seeded random moments while it writes `--output` shards, a disk cache or
//! checkpoints; then every file under its final name must be complete (reads back, CRCs
//! good, the right records), nothing partial may be taken for complete, and a rerun (or
//! `--resume`) must finish the job with exactly the output of an uninterrupted run.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sluice_proto::TfMessage;
use sluice_proto::example::{BytesList, Example, Feature, Features, Int64List, feature::Kind};
use sluice_proto::tfrecord::{Compression, ReaderOptions, TfRecordReader, TfRecordWriter};

const RECORDS: usize = 3000;
/// Kill points per writer.
const KILLS: usize = 8;

fn sluice() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sluice"));
    c.stdout(Stdio::null()).stderr(Stdio::null());
    c
}

/// SplitMix64: the kill points, the same every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A moment in `[0, 0.9 × span]` (a run's time varies with the machine's load).
    fn moment(&mut self, span: Duration) -> Duration {
        span.mul_f64((self.next() % 900) as f64 / 1000.0)
    }
}

/// `data.tfrecord`: `RECORDS` Examples with `id` and a 200-byte `payload`.
fn data(dir: &Path) {
    let mut w =
        TfRecordWriter::create(dir.join("data.tfrecord"), Compression::None).expect("creates");
    for i in 0..RECORDS {
        let mut features = Features::default();
        features.feature.insert(
            "id".into(),
            Feature {
                kind: Some(Kind::Int64List(Int64List {
                    value: vec![i as i64],
                })),
            },
        );
        features.feature.insert(
            "payload".into(),
            Feature {
                kind: Some(Kind::BytesList(BytesList {
                    value: vec![vec![(i % 251) as u8; 200].into()],
                })),
            },
        );
        let ex = Example {
            features: Some(features),
        };
        w.write_record(&ex.to_bytes()).expect("writes");
    }
    w.finish().expect("finishes");
}

fn pipeline(dir: &Path, data: &Path, extra: &str, batch: usize) -> PathBuf {
    let path = dir.join("p.toml");
    fs::write(
        &path,
        format!(
            "[source]\ndir = {:?}\nfiles = [\"data.tfrecord\"]\n\n[options]\nseed = 7\n\n\
             [[stage]]\nkind = \"parse_example\"\nfeatures.id = {{ dtype = \"int64\" }}\n\
             features.payload = {{ dtype = \"string\" }}\n\n{extra}\
             [[stage]]\nkind = \"shuffle\"\nbuffer_size = 64\n\n\
             [[stage]]\nkind = \"batch\"\nbatch_size = {batch}\n",
            data.display().to_string()
        ),
    )
    .unwrap();
    path
}

/// Runs `cmd` to the end; panics unless it succeeds. Returns how long it took.
fn complete(cmd: &mut Command) -> Duration {
    let started = Instant::now();
    let status = cmd.status().expect("runs");
    assert!(status.success(), "{cmd:?}: {status}");
    started.elapsed()
}

/// Starts `cmd` and kills it (SIGKILL) after `after`; whether it was still running.
fn kill_after(cmd: &mut Command, after: Duration) -> bool {
    let mut child = cmd.spawn().expect("starts");
    let deadline = Instant::now() + after;
    loop {
        if let Some(status) = child.try_wait().expect("waits") {
            assert!(status.success(), "{cmd:?}: {status}");
            return false;
        }
        if Instant::now() >= deadline {
            child.kill().expect("kills");
            child.wait().expect("reaps");
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Kills a run of `cmd()` at `at`; when that run finished first, `reset()` and try again at
/// half the moment (the machine's load changes how long a run takes), up to 6 times.
/// Whether a kill hit a running writer.
fn kill_while_running(cmd: impl Fn() -> Command, reset: impl Fn(), mut at: Duration) -> bool {
    for _ in 0..6 {
        if kill_after(&mut cmd(), at) {
            return true;
        }
        reset();
        at /= 2;
    }
    false
}

/// The records of a TFRecord file, every CRC checked.
fn records(path: &Path) -> Vec<Vec<u8>> {
    TfRecordReader::open(path, ReaderOptions::default())
        .expect("opens")
        .map(|r| {
            r.unwrap_or_else(|e| panic!("{}: {e}", path.display()))
                .data
                .to_vec()
        })
        .collect()
}

fn names(dir: &Path) -> Vec<String> {
    let mut n: Vec<String> = fs::read_dir(dir)
        .map(|r| {
            r.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    n.sort();
    n
}

#[test]
fn output_shards_killed_at_random_points_are_whole_or_absent() {
    let work = tempfile::tempdir().unwrap();
    data(work.path());
    let p = pipeline(work.path(), work.path(), "", 8);
    let reference = work.path().join("reference");
    let out = |dir: &Path| {
        let mut c = sluice();
        c.arg("run").arg(&p).arg("--output").arg(dir);
        c.args(["--shards", "3"]);
        c
    };
    let span = complete(&mut out(&reference)).min(complete(&mut out(&reference)));
    let shards = names(&reference);
    assert_eq!(shards.len(), 3, "{shards:?}");
    let want: Vec<Vec<u8>> = shards
        .iter()
        .map(|s| fs::read(reference.join(s)).unwrap())
        .collect();
    assert_eq!(
        shards
            .iter()
            .map(|s| records(&reference.join(s)).len())
            .sum::<usize>(),
        RECORDS
    );
    let mut rng = Rng(26);
    let mut killed = 0;
    for k in 0..KILLS {
        let dir = work.path().join(format!("out-{k}"));
        killed += kill_while_running(
            || out(&dir),
            || {
                let _ = fs::remove_dir_all(&dir);
            },
            rng.moment(span),
        ) as usize;
        // Under its final name: a whole shard, the same bytes as the reference's.
        for (s, bytes) in shards.iter().zip(&want) {
            let at = dir.join(s);
            if at.exists() {
                assert_eq!(records(&at).len(), RECORDS / 3, "kill {k}: {s}");
                assert_eq!(&fs::read(&at).unwrap(), bytes, "kill {k}: {s}");
            }
        }
        // Anything else is a hidden temporary no reader's pattern matches.
        for n in names(&dir) {
            assert!(
                shards.contains(&n) || n.starts_with(".part.tfrecord-"),
                "kill {k}: {n}"
            );
        }
        // A rerun writes the job whole and cleans up what the killed run left.
        complete(&mut out(&dir));
        assert_eq!(names(&dir), shards, "kill {k}");
        for (s, bytes) in shards.iter().zip(&want) {
            assert_eq!(
                &fs::read(dir.join(s)).unwrap(),
                bytes,
                "kill {k}: rerun {s}"
            );
        }
    }
    eprintln!("--output: {killed} of {KILLS} kills hit a running writer");
    assert_eq!(killed, KILLS, "kills that hit a running writer");
}

#[test]
fn a_disk_cache_killed_at_random_points_is_whole_or_rebuilt() {
    let work = tempfile::tempdir().unwrap();
    data(work.path());
    let run = |cache: &Path, digests: &Path| {
        let p = pipeline(
            cache.parent().unwrap(),
            work.path(),
            &format!(
                "[[stage]]\nkind = \"cache\"\ndirectory = {:?}\n\n",
                cache.display().to_string()
            ),
            8,
        );
        let mut c = sluice();
        c.arg("run")
            .arg(p)
            .args(["--epochs", "2", "--digests"])
            .arg(digests);
        c
    };
    let reference = work.path().join("reference");
    fs::create_dir_all(&reference).unwrap();
    let want_digests = reference.join("digests");
    let span = complete(&mut run(&reference.join("cache"), &want_digests));
    let want = fs::read_to_string(&want_digests).unwrap();
    assert_eq!(want.lines().count(), 2 * RECORDS / 8);
    let cache_file = |dir: &Path| {
        names(dir)
            .into_iter()
            .find(|n| n.ends_with(".tfrecord"))
            .map(|n| dir.join(n))
    };
    let whole = fs::read(cache_file(&reference.join("cache")).expect("a cache")).unwrap();
    let mut rng = Rng(2026);
    let mut killed = 0;
    for k in 0..KILLS {
        let at = work.path().join(format!("run-{k}"));
        fs::create_dir_all(&at).unwrap();
        let cache = at.join("cache");
        let digests = at.join("digests");
        killed += kill_while_running(
            || run(&cache, &digests),
            || {
                let _ = fs::remove_dir_all(&cache);
            },
            rng.moment(span),
        ) as usize;
        // A cache file under its final name is the whole cache: header, every element,
        // end marker, CRCs good.
        if let Some(file) = cache_file(&cache) {
            assert_eq!(records(&file).len(), RECORDS + 2, "kill {k}");
            assert_eq!(fs::read(&file).unwrap(), whole, "kill {k}");
        }
        // The rerun (reading the cache, or building it again) gives the same elements.
        complete(&mut run(&cache, &digests));
        assert_eq!(fs::read_to_string(&digests).unwrap(), want, "kill {k}");
        assert_eq!(
            fs::read(cache_file(&cache).expect("a cache")).unwrap(),
            whole
        );
        assert!(
            names(&cache).iter().all(|n| !n.contains(".tmp-")),
            "kill {k}: {:?}",
            names(&cache)
        );
    }
    eprintln!("cache: {killed} of {KILLS} kills hit a running writer");
    assert_eq!(killed, KILLS, "kills that hit a running writer");
}

#[test]
fn checkpoints_killed_at_random_points_resume_to_exactly_the_uninterrupted_run() {
    let work = tempfile::tempdir().unwrap();
    data(work.path());
    // A checkpoint after every batch (each synced twice): batches of 64 keep it fast.
    let p = pipeline(work.path(), work.path(), "", 64);
    let run = |ckpt: &Path, digests: &Path, resume: bool| {
        let mut c = sluice();
        c.arg("run")
            .arg(&p)
            .args(["--epochs", "2", "--checkpoint"])
            .arg(ckpt);
        c.args(["--checkpoint-every", "0", "--digests"])
            .arg(digests);
        if resume {
            c.arg("--resume").arg(ckpt);
        }
        c
    };
    let want_digests = work.path().join("want");
    let want_ckpt = work.path().join("want.ckpt");
    let span = complete(&mut run(&want_ckpt, &want_digests, false)).min(complete(&mut run(
        &want_ckpt,
        &want_digests,
        false,
    )));
    let want = fs::read_to_string(&want_digests).unwrap();
    assert_eq!(want.lines().count(), 2 * RECORDS.div_ceil(64));
    let mut rng = Rng(7);
    let (mut killed, mut resumed) = (0, 0);
    for k in 0..KILLS {
        let at = work.path().join(format!("run-{k}"));
        fs::create_dir_all(&at).unwrap();
        let ckpt = at.join("run.ckpt");
        let digests = at.join("digests");
        let hit = kill_while_running(
            || run(&ckpt, &digests, false),
            || {
                let _ = fs::remove_file(&ckpt);
                let _ = fs::remove_file(&digests);
            },
            // The first kill comes before any checkpoint: the job is run again whole.
            if k == 0 {
                Duration::ZERO
            } else {
                rng.moment(span)
            },
        );
        killed += hit as usize;
        // A checkpoint under its name is whole: it parses (else resuming would fail).
        let exists = ckpt.exists();
        if exists && hit {
            let text = fs::read_to_string(&ckpt).unwrap();
            serde_json::from_str::<serde_json::Value>(&text)
                .unwrap_or_else(|e| panic!("kill {k}: partial checkpoint: {e}\n{text}"));
            resumed += 1;
        } else if exists {
            serde_json::from_str::<serde_json::Value>(&fs::read_to_string(&ckpt).unwrap())
                .expect("the final checkpoint");
        }
        if k == 0 {
            assert!(!exists, "a checkpoint before the run started");
        }
        complete(&mut run(&ckpt, &digests, exists));
        assert_eq!(fs::read_to_string(&digests).unwrap(), want, "kill {k}");
        assert_eq!(names(&at), vec!["digests", "run.ckpt"], "kill {k}");
    }
    eprintln!("checkpoints: {killed} of {KILLS} kills hit a running writer, {resumed} resumed");
    assert_eq!(killed, KILLS, "kills that hit a running writer");
    assert!(resumed >= 1, "no kill left a checkpoint to resume");
}
