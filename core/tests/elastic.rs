//! Elastic resume: checkpoints taken by N hosts part way through an epoch, resumed on M
//! hosts (and again on L), read every record of the epoch exactly once, for pipelines with
//! shuffle, global shuffle, filter, interleave, mixing of sources, batching, unbatching and
//! flat maps; and what cannot resume elastically says why.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use proptest::prelude::*;
use sluice_core::prelude::*;
use sluice_core::proto::tfrecord::{Compression, TfRecordWriter};
use sluice_core::{Checkpoint, Value};

/// Files of `counts[i]` records each, every record distinct (`"{tag}{file}:{record}"`).
fn write_files(dir: &Path, tag: &str, counts: &[usize]) -> String {
    std::fs::create_dir_all(dir).unwrap();
    for (i, &n) in counts.iter().enumerate() {
        let p = dir.join(format!("{tag}-{i:03}.tfrecord"));
        let mut w = TfRecordWriter::create(&p, Compression::None).unwrap();
        for j in 0..n {
            w.write_record(format!("{tag}{i}:{j}").as_bytes()).unwrap();
        }
        w.finish().unwrap();
    }
    format!("{}/{tag}-*.tfrecord", dir.display())
}

/// Data sets shared by the tests: many small files, few large ones, and a second source.
struct Data {
    dir: PathBuf,
    many: String,
    few: String,
    other: String,
}

fn data() -> &'static Data {
    static DATA: OnceLock<Data> = OnceLock::new();
    DATA.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap().keep();
        let many = write_files(
            &dir.join("many"),
            "m",
            &[9, 0, 14, 3, 11, 7, 12, 5, 8, 10, 6, 13],
        );
        let few = write_files(&dir.join("few"), "f", &[61, 0, 47]);
        let other = write_files(&dir.join("other"), "o", &[25, 17, 31, 9]);
        Data {
            dir,
            many,
            few,
            other,
        }
    })
}

/// The pipelines tested, each run on `hosts` hosts as rank `rank`.
#[derive(Debug, Clone, Copy)]
enum Pipeline {
    /// `range`, a shuffle buffer, batches.
    RangeShuffleBatch,
    /// Many files: file-level shards, interleave, shuffle, filter, batch.
    FilesInterleave,
    /// Few files: record-level shards over an interleave, shuffle, filter, batch.
    FewFiles,
    /// A global shuffle, filter, batch.
    GlobalShuffle,
    /// Files and a range mixed by `sample_from`, shuffled, batched.
    Mixed,
    /// Batches of records split again (`unbatch`), a flat map making two of each.
    SplitAndFlatMap,
}

const PIPELINES: [Pipeline; 6] = [
    Pipeline::RangeShuffleBatch,
    Pipeline::FilesInterleave,
    Pipeline::FewFiles,
    Pipeline::GlobalShuffle,
    Pipeline::Mixed,
    Pipeline::SplitAndFlatMap,
];

fn record_text(e: &Element) -> String {
    String::from_utf8(e.tensor("record").unwrap().as_bytes_list().unwrap()[0].to_vec()).unwrap()
}

/// A deterministic filter keeping about two records in three.
fn keep(e: &Element) -> sluice_core::Result<bool> {
    let text = record_text(e);
    let h = text
        .bytes()
        .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
    Ok(h % 3 != 0)
}

fn range_as_record(e: Element) -> sluice_core::Result<Element> {
    let v = e.tensor("value").unwrap().as_i64().unwrap()[0];
    Ok(Element::new(e.id()).with("record", Tensor::scalar_bytes(format!("r{v}").into())))
}

fn build(p: Pipeline, hosts: u64, rank: u64) -> Dataset {
    let d = data();
    let options = Options::default().with_seed(11);
    let ds = match p {
        Pipeline::RangeShuffleBatch => Dataset::range(0, 173)
            .shard(hosts, rank)
            .map(range_as_record)
            .shuffle(9)
            .batch(4),
        Pipeline::FilesInterleave => Dataset::tfrecord([&d.many])
            .unwrap()
            .shard(hosts, rank)
            .interleave(InterleaveSpec::new(3))
            .shuffle(6)
            .filter(keep)
            .batch(3),
        Pipeline::FewFiles => Dataset::tfrecord([&d.few])
            .unwrap()
            .shard(hosts, rank)
            .interleave(InterleaveSpec::new(2))
            .shuffle(5)
            .filter(keep)
            .batch(5),
        Pipeline::GlobalShuffle => Dataset::tfrecord_global_shuffle(
            [&d.other],
            GlobalShuffleSpec::default().index_dir(d.dir.join("indexes")),
        )
        .unwrap()
        .shard(hosts, rank)
        .filter(keep)
        .batch(4),
        Pipeline::Mixed => Dataset::sample_from(
            vec![
                Dataset::tfrecord([&d.many]).unwrap().shard(hosts, rank),
                Dataset::range(0, 90)
                    .shard(hosts, rank)
                    .map(range_as_record),
            ],
            vec![0.6, 0.4],
        )
        .shuffle(7)
        .batch(6),
        Pipeline::SplitAndFlatMap => Dataset::tfrecord([&d.other])
            .unwrap()
            .shard(hosts, rank)
            .batch(4)
            .unbatch()
            .map_chunks(MapChunksSpec::default(), |chunk, _| {
                // Two outputs per record, a "-a" and a "-b" copy.
                let mut out = Vec::new();
                for (i, e) in chunk.into_iter().enumerate() {
                    for tag in ["a", "b"] {
                        let text = format!("{}-{tag}", record_text(&e));
                        out.push((
                            i,
                            Element::new(e.id()).with("record", Tensor::scalar_bytes(text.into())),
                        ));
                    }
                }
                Ok(out)
            })
            .shuffle(5)
            .batch(3),
    };
    ds.with_options(options)
}

/// The records of a (possibly batched) element.
fn records(e: &Element) -> Vec<String> {
    match e.get("record").unwrap() {
        Value::Dense(t) => t
            .as_bytes_list()
            .unwrap()
            .iter()
            .map(|b| String::from_utf8(b.to_vec()).unwrap())
            .collect(),
        other => panic!("unexpected value {other:?}"),
    }
}

/// Runs `hosts` hosts of `p` (fresh, or resumed from `resume`), each taking `steps[rank]`
/// elements (all when `None`), and returns what they delivered and their checkpoints.
fn run(
    p: Pipeline,
    hosts: u64,
    resume: Option<&[Checkpoint]>,
    steps: Option<&[usize]>,
) -> (Vec<String>, Vec<Checkpoint>) {
    let mut delivered = Vec::new();
    let mut checkpoints = Vec::new();
    for rank in 0..hosts {
        let ds = build(p, hosts, rank);
        let mut it = match resume {
            Some(cps) => ds.resume_elastic(cps).unwrap(),
            None => ds.iter().unwrap(),
        };
        let limit = steps.map_or(usize::MAX, |s| s[rank as usize % s.len()]);
        for item in it.by_ref().take(limit) {
            delivered.extend(records(&item.unwrap()));
        }
        checkpoints.push(it.checkpoint().unwrap());
    }
    (delivered, checkpoints)
}

/// The records one host reads in a whole epoch, sorted.
fn whole(p: Pipeline) -> Vec<String> {
    static WHOLE: OnceLock<std::sync::Mutex<BTreeMap<String, Vec<String>>>> = OnceLock::new();
    let cache = WHOLE.get_or_init(Default::default);
    let key = format!("{p:?}");
    if let Some(w) = cache.lock().unwrap().get(&key) {
        return w.clone();
    }
    let (mut all, _) = run(p, 1, None, None);
    all.sort();
    cache.lock().unwrap().insert(key, all.clone());
    all
}

/// Asserts `got` holds every record of the epoch exactly once.
fn assert_exactly_once(p: Pipeline, mut got: Vec<String>, what: &str) {
    got.sort();
    let want = whole(p);
    if got != want {
        let mut count: BTreeMap<&str, i64> = BTreeMap::new();
        for r in &want {
            *count.entry(r).or_default() += 1;
        }
        for r in &got {
            *count.entry(r).or_default() -= 1;
        }
        let missing: Vec<_> = count
            .iter()
            .filter(|(_, c)| **c > 0)
            .map(|(r, _)| *r)
            .take(5)
            .collect();
        let twice: Vec<_> = count
            .iter()
            .filter(|(_, c)| **c < 0)
            .map(|(r, _)| *r)
            .take(5)
            .collect();
        panic!(
            "{p:?}, {what}: {} records, want {}; missing {missing:?}, read twice {twice:?}",
            got.len(),
            want.len()
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    /// N hosts stop after random numbers of elements; M hosts finish the epoch; together
    /// they read every record once.
    #[test]
    fn n_hosts_then_m_hosts_read_every_record_once(
        which in 0..PIPELINES.len(),
        n in 1u64..5,
        m in 1u64..6,
        steps in proptest::collection::vec(0usize..30, 1..5),
    ) {
        let p = PIPELINES[which];
        let (mut got, cps) = run(p, n, None, Some(&steps));
        let (rest, _) = run(p, m, Some(&cps), None);
        got.extend(rest);
        assert_exactly_once(p, got, &format!("{n} hosts, steps {steps:?}, then {m}"));
    }

    /// And again: N, then M part of the way, then L to the end.
    #[test]
    fn a_resumed_run_resumes_again_on_another_number_of_hosts(
        which in 0..PIPELINES.len(),
        n in 1u64..4,
        m in 1u64..5,
        l in 1u64..4,
        steps in proptest::collection::vec(0usize..8, 1..4),
        steps2 in proptest::collection::vec(0usize..8, 1..4),
    ) {
        let p = PIPELINES[which];
        let (mut got, cps) = run(p, n, None, Some(&steps));
        let (more, cps2) = run(p, m, Some(&cps), Some(&steps2));
        got.extend(more);
        let (rest, _) = run(p, l, Some(&cps2), None);
        got.extend(rest);
        assert_exactly_once(p, got, &format!("{n} hosts {steps:?}, {m} hosts {steps2:?}, then {l}"));
    }
}

#[test]
fn the_same_number_of_hosts_resumes_exactly() {
    // Generation 0 checkpoints on as many hosts: each host continues its own stream, the
    // same elements as if it had not stopped.
    let p = Pipeline::FilesInterleave;
    for rank in 0..3 {
        let uninterrupted = run_one(p, 3, rank, None, usize::MAX).0;
        let (first, cp) = run_one(p, 3, rank, None, 4);
        let cps: Vec<Checkpoint> = (0..3)
            .map(|r| {
                if r == rank {
                    cp.clone()
                } else {
                    run_one(p, 3, r, None, 4).1
                }
            })
            .collect();
        let (rest, _) = run_one(p, 3, rank, Some(&cps), usize::MAX);
        assert_eq!([first, rest].concat(), uninterrupted);
    }
}

fn run_one(
    p: Pipeline,
    hosts: u64,
    rank: u64,
    resume: Option<&[Checkpoint]>,
    take: usize,
) -> (Vec<String>, Checkpoint) {
    let ds = build(p, hosts, rank);
    let mut it = match resume {
        Some(cps) => ds.resume_elastic(cps).unwrap(),
        None => ds.iter().unwrap(),
    };
    let mut out = Vec::new();
    for item in it.by_ref().take(take) {
        out.extend(records(&item.unwrap()));
    }
    let cp = it.checkpoint().unwrap();
    (out, cp)
}

#[test]
fn missing_duplicated_or_foreign_checkpoints_are_refused_with_a_reason() {
    let p = Pipeline::RangeShuffleBatch;
    let (_, cps) = run(p, 3, None, Some(&[2, 5, 1]));
    let resume = |cps: &[Checkpoint]| {
        build(p, 2, 0)
            .resume_elastic(cps)
            .map(|_| ())
            .unwrap_err()
            .to_string()
    };
    let err = resume(&cps[..2]);
    assert!(err.contains("no checkpoint holds lane 2"), "{err}");
    let err = resume(&[
        cps[0].clone(),
        cps[1].clone(),
        cps[2].clone(),
        cps[1].clone(),
    ]);
    assert!(err.contains("both hold lane 1"), "{err}");
    let (_, other) = run(Pipeline::FilesInterleave, 3, None, Some(&[1]));
    let err = resume(&[cps[0].clone(), other[1].clone(), cps[2].clone()]);
    assert!(err.contains("another pipeline"), "{err}");
    let err = build(p, 2, 0)
        .resume_elastic(&[])
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(err.contains("no checkpoints"), "{err}");
}

#[test]
fn a_pipeline_that_cannot_follow_records_says_why() {
    let make = |hosts: u64, rank: u64| {
        Dataset::range(0, 50)
            .shard(hosts, rank)
            .shuffle(4)
            .take(20)
            .with_options(Options::default().with_seed(1))
    };
    let mut it = make(2, 0).iter().unwrap();
    it.next();
    let cp = it.checkpoint().unwrap();
    let why = cp.elastic.as_ref().unwrap().unavailable.clone().unwrap();
    assert!(why.starts_with("stage take#"), "{why}");
    // It still resumes exactly on the same hosts.
    let mut again = make(2, 0).resume(&cp).unwrap();
    assert!(again.next().is_some());
    let err = make(3, 1)
        .resume_elastic(&[cp.clone(), cp])
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cannot resume on another number of hosts") && err.contains("take"),
        "{err}"
    );
}

#[test]
fn checkpoints_stay_small_whatever_was_read() {
    // 100,000 records read by one host through a 1,000-record shuffle buffer: the elastic
    // part holds the buffer's records (holes), not the records read.
    let make = |buffer: usize| {
        Dataset::range(0, 400_000)
            .shard(1, 0)
            .shuffle(buffer)
            .batch(32)
            .with_options(Options::default().with_seed(3))
    };
    for (buffer, most) in [(1_000, 2_000), (10_000, 10_000)] {
        let mut it = make(buffer).iter().unwrap();
        it.by_ref().take(100_000 / 32).for_each(drop);
        let json = it.checkpoint().unwrap().to_json();
        assert!(json.len() < most, "buffer {buffer}: {} bytes", json.len());
    }
}

#[test]
fn a_resumed_host_starts_reading_a_file_where_its_records_left_off() {
    // One file of 1,000 records; one host reads 600 and stops; two hosts resume (the one
    // file's lane split in two). Each starts reading the file at record 576 (the start of
    // the 64-record block holding the first record not done), not at its start.
    let dir = tempfile::tempdir().unwrap();
    let pattern = write_files(dir.path(), "s", &[1000]);
    let make = |hosts: u64, rank: u64| {
        Dataset::tfrecord([&pattern])
            .unwrap()
            .shard(hosts, rank)
            .batch(10)
            .with_options(Options::default().with_seed(2))
    };
    let mut it = make(1, 0).iter().unwrap();
    let mut got: Vec<String> = it
        .by_ref()
        .take(60)
        .flat_map(|b| records(&b.unwrap()))
        .collect();
    let cps = vec![it.checkpoint().unwrap()];
    drop(it);
    for rank in 0..2 {
        let mut it = make(2, rank).resume_elastic(&cps).unwrap();
        got.extend(it.by_ref().flat_map(|b| records(&b.unwrap())));
        let stats = it.stats();
        let reader = stats.stages.iter().find(|s| s.name == "tfrecord").unwrap();
        assert!(
            reader.elements_in <= 1000 - 576,
            "host {rank} read {} records",
            reader.elements_in
        );
    }
    got.sort();
    let mut want: Vec<String> = (0..1000).map(|j| format!("s0:{j}")).collect();
    want.sort();
    assert_eq!(got, want);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    /// Random data sets (file counts and sizes, so file-level or record-level shards), random
    /// buffer sizes and steps: N hosts, then M, read every record once.
    #[test]
    fn random_data_sets_resume_exactly_once(
        counts in proptest::collection::vec(0usize..40, 1..9),
        n in 1u64..5,
        m in 1u64..5,
        buffer in 1usize..20,
        cycle in 1usize..4,
        steps in proptest::collection::vec(0usize..15, 1..5),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let pattern = write_files(dir.path(), "x", &counts);
        let make = |hosts: u64, rank: u64| {
            Dataset::tfrecord([&pattern])
                .unwrap()
                .shard(hosts, rank)
                .interleave(InterleaveSpec::new(cycle))
                .shuffle(buffer)
                .filter(keep)
                .batch(3)
                .with_options(Options::default().with_seed(5))
        };
        let collect = |hosts: u64, resume: Option<&[Checkpoint]>, steps: Option<&[usize]>| {
            let mut got = Vec::new();
            let mut cps = Vec::new();
            for rank in 0..hosts {
                let ds = make(hosts, rank);
                let mut it = match resume {
                    Some(c) => ds.resume_elastic(c).unwrap(),
                    None => ds.iter().unwrap(),
                };
                let limit = steps.map_or(usize::MAX, |s| s[rank as usize % s.len()]);
                for b in it.by_ref().take(limit) {
                    got.extend(records(&b.unwrap()));
                }
                cps.push(it.checkpoint().unwrap());
            }
            (got, cps)
        };
        let (mut want, _) = collect(1, None, None);
        let (mut got, cps) = collect(n, None, Some(&steps));
        let (rest, _) = collect(m, Some(&cps), None);
        got.extend(rest);
        want.sort();
        got.sort();
        prop_assert_eq!(got, want, "{:?}: {} hosts {:?}, then {}", counts, n, steps, m);
    }
}
