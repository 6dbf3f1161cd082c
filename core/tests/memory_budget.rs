//! The RAM budget bounds the bytes a pipeline's buffers hold (the run's byte ledger):
//! producers wait instead of growing past it, an element larger than the whole budget is
//! an error saying so, and the output is the same with and without a tight budget.

use std::sync::Arc;
use std::time::Duration;

use sluice_core::prelude::*;
use sluice_core::{ByteLedger, ErrorKind, MemoryUsage};

const MIB: usize = 1 << 20;

/// Element `i` with `value` = i and a `payload` of `size` bytes (its bytes depend on `i`).
fn big(e: Element, size: usize) -> Element {
    let i = e.tensor("value").unwrap().as_i64().unwrap()[0];
    let payload = Tensor::new(
        &[size],
        TensorData::U8(bytes::Bytes::from(vec![(i % 251) as u8; size])),
    )
    .unwrap();
    e.with("payload", payload)
}

fn source(n: i64, size: usize) -> Dataset {
    Dataset::range(0, n).map(move |e| Ok(big(e, size)))
}

fn options(budget: u64) -> Options {
    Options::default()
        .with_seed(7)
        .with_cpu_budget(4)
        .with_ram_budget(budget)
}

/// `(value, first payload byte, payload length)` of every element, and the ledger's usage
/// at the end; the consumer is slow for the first elements, so buffers fill.
fn drain(ds: &Dataset) -> (Vec<(i64, u8, usize)>, MemoryUsage) {
    let mut it = ds.iter().unwrap();
    let mut out = Vec::new();
    for e in it.by_ref() {
        let e = e.unwrap();
        if out.len() < 8 {
            std::thread::sleep(Duration::from_millis(15));
        }
        let p = e.tensor("payload").unwrap();
        let bytes = p.as_u8().unwrap();
        let values = e.tensor("value").unwrap().as_i64().unwrap().to_vec();
        out.push((values[0], bytes[0], bytes.len()));
    }
    (out, it.memory())
}

/// The pipelines of the measurements, over `size`-byte elements, each with the
/// largest item each of its buffers may take past the budget when its consumer waits for
/// it and it holds nothing (the progress guarantee).
fn pipelines(size: usize) -> Vec<(&'static str, Dataset, usize)> {
    let per_file = move |e: &Element| {
        let f = e.tensor("value").unwrap().as_i64().unwrap()[0];
        Ok(source(6, size).map(move |e| {
            let i = e.tensor("value").unwrap().as_i64().unwrap()[0];
            Ok(e.with("value", Tensor::scalar_i64(f * 100 + i)))
        }))
    };
    vec![
        (
            "prefetch 32 -> batch 4 -> prefetch 4",
            source(32, size)
                .prefetch(BufferSize::Fixed(32))
                .batch_with(BatchSpec::new(4).num_parallel(NumParallel::Fixed(2)))
                .prefetch(BufferSize::Fixed(4)),
            // prefetch, the batch's work in flight, prefetch.
            size + 4 * size + 4 * size,
        ),
        (
            "interleave 4 (threads) -> prefetch 8",
            Dataset::range(0, 4)
                .interleave_with(
                    InterleaveSpec::new(4).num_parallel(NumParallel::Fixed(4)),
                    per_file,
                )
                .prefetch(BufferSize::Fixed(8)),
            // 4 reading threads, prefetch.
            5 * size,
        ),
        (
            "parallel map -> prefetch 16",
            Dataset::range(0, 32)
                .map_with(MapSpec::parallel(NumParallel::Fixed(4)), move |e, _| {
                    Ok(big(e, size))
                })
                .prefetch(BufferSize::Fixed(16)),
            // the map's work in flight, prefetch.
            2 * size,
        ),
        (
            "prefetch 16 -> inline batch 3",
            source(30, size)
                .prefetch(BufferSize::Fixed(16))
                .batch(3)
                .prefetch(BufferSize::Fixed(2)),
            // prefetch, prefetch.
            size + 3 * size,
        ),
    ]
}

#[test]
fn backpressure_keeps_the_bytes_held_within_the_budget() {
    let size = MIB;
    let budget = 6 * MIB as u64;
    for (name, ds, past) in pipelines(size) {
        let (tight, usage) = drain(&ds.with_options(options(budget)));
        // (And a few bytes: a parallel stage's work reserves what its outputs weighed on
        // average.)
        assert!(
            usage.high_water <= budget + past as u64 + 1024,
            "{name}: the buffers held {} bytes at most, over the budget {budget} + one item \
             per buffer ({past})",
            usage.high_water
        );
        assert!(
            usage.high_water >= size as u64,
            "{name}: the ledger saw the buffers ({usage:?})"
        );
        assert_eq!(usage.held, 0, "{name}: everything held was released");
        // The same elements, in the same order, with room for everything.
        let (roomy, roomy_usage) = drain(&ds.with_options(options(1 << 34)));
        assert_eq!(tight, roomy, "{name}: a tight budget changed the output");
        assert!(
            roomy_usage.high_water > usage.high_water,
            "{name}: without a tight budget the buffers run further ahead ({} vs {})",
            roomy_usage.high_water,
            usage.high_water
        );
    }
}

#[test]
fn an_element_larger_than_the_budget_is_an_error_that_says_so() {
    let ds = source(4, 2 * MIB)
        .prefetch(BufferSize::Fixed(2))
        .with_options(options(MIB as u64));
    let err = ds.collect().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ResourceExhausted, "{err}");
    let msg = err.to_string();
    assert!(msg.contains(&format!("{} bytes", 2 * MIB + 8)), "{msg}");
    assert!(msg.contains(&format!("{MIB} bytes")), "{msg}");
    assert!(msg.contains("prefetch#"), "{msg}");

    // A batch larger than the budget, through a parallel stage: the batch's group.
    let ds = source(8, MIB / 2)
        .batch_with(BatchSpec::new(4).num_parallel(NumParallel::Fixed(2)))
        .with_options(options(MIB as u64));
    let err = ds.collect().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ResourceExhausted, "{err}");
    assert!(err.to_string().contains("batch#"), "{err}");

    // A batch assembled on the consumer's thread fails as soon as its elements exceed the
    // budget, before it is made.
    let ds = source(8, MIB / 2)
        .batch(4)
        .with_options(options(MIB as u64 + MIB as u64 / 4));
    let err = ds.collect().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ResourceExhausted, "{err}");
    assert!(err.to_string().contains("batch being assembled"), "{err}");

    // Under the skip policy the element is dropped and counted.
    let ds = Dataset::range(0, 6)
        .map(|e| {
            let i = e.tensor("value").unwrap().as_i64().unwrap()[0];
            Ok(big(e, if i == 3 { 2 * MIB } else { 1024 }))
        })
        .prefetch(BufferSize::Fixed(2))
        .with_options(options(MIB as u64).with_error_policy(ErrorPolicy::Skip));
    let values: Vec<i64> = ds
        .collect()
        .unwrap()
        .iter()
        .map(|e| e.tensor("value").unwrap().as_i64().unwrap()[0])
        .collect();
    assert_eq!(values, [0, 1, 2, 4, 5]);
}

#[test]
fn the_shuffle_buffer_and_the_cache_keep_their_errors_through_the_ledger() {
    let err = source(8, MIB)
        .shuffle(8)
        .with_options(options(3 * MIB as u64))
        .collect()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ResourceExhausted);
    assert!(err.to_string().contains("shuffle buffer"), "{err}");
    let err = source(8, MIB)
        .cache(CacheSpec::Memory)
        .with_options(options(3 * MIB as u64))
        .collect()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ResourceExhausted);
    assert!(err.to_string().contains("in-memory cache"), "{err}");
    // Within the budget, a shuffle's buffer is in the ledger while the run goes on.
    let ds = source(8, MIB)
        .shuffle(4)
        .with_options(options(16 * MIB as u64));
    let (out, usage) = drain(&ds);
    assert_eq!(out.len(), 8);
    assert!(usage.high_water >= 4 * MIB as u64, "{usage:?}");
    assert_eq!(usage.held, 0);
}

#[test]
fn checkpoints_resume_the_same_elements_under_a_tight_budget() {
    let ds = source(24, MIB / 2)
        .prefetch(BufferSize::Fixed(16))
        .map_with(MapSpec::parallel(NumParallel::Fixed(3)), |e, _| Ok(e))
        .prefetch(BufferSize::Fixed(4))
        .with_options(options(2 * MIB as u64));
    let whole = drain(&ds).0;
    let mut it = ds.iter().unwrap();
    for _ in 0..9 {
        it.next().unwrap().unwrap();
    }
    let checkpoint = it.checkpoint().unwrap();
    drop(it);
    let mut resumed = ds.resume(&checkpoint).unwrap();
    let mut rest = Vec::new();
    for e in resumed.by_ref() {
        let e = e.unwrap();
        let p = e.tensor("payload").unwrap().as_u8().unwrap();
        let v = e.tensor("value").unwrap().as_i64().unwrap()[0];
        rest.push((v, p[0], p.len()));
    }
    assert_eq!(rest, whole[9..]);
    // The budget and one element per buffer (prefetch, map, prefetch) at most (and a few
    // bytes: the map's work reserves what its outputs weighed on average).
    let usage = resumed.memory();
    assert!(
        usage.high_water <= 2 * MIB as u64 + 3 * (MIB as u64 / 2 + 8) + 1024,
        "{usage:?}"
    );
}

#[test]
fn a_dropped_pipeline_releases_what_its_buffers_held() {
    let ds = source(1000, 256 << 10)
        .prefetch(BufferSize::Fixed(64))
        .with_options(options(4 * MIB as u64));
    let mut it = ds.iter().unwrap();
    it.next().unwrap().unwrap();
    let ledger: Arc<ByteLedger> = it.ledger();
    // The producer fills the budget and waits.
    let t = std::time::Instant::now();
    while ledger.held() + (256 << 10) <= 4 * MIB as u64 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(Duration::from_millis(30));
    assert!(ledger.held() <= 4 * MIB as u64, "{:?}", ledger.usage());
    assert!(ledger.held() > 2 * MIB as u64, "{:?}", ledger.usage());
    drop(it);
    assert_eq!(ledger.held(), 0);
}

#[test]
fn several_inputs_make_progress_under_a_budget_one_of_them_fills() {
    // Each input of a zip runs ahead on its own thread into a buffer of 16 elements of
    // 1 MiB; the budget holds 3: the first input's buffer fills it while the zip waits on
    // the second, which may take one element past the budget (its consumer waits for it).
    let branch = |name: &'static str| {
        Dataset::range(0, 40)
            .map(move |e| {
                let payload = Tensor::new(&[MIB], TensorData::U8(vec![1u8; MIB].into()))?;
                Ok(Element::new(e.id()).with(name, payload))
            })
            .prefetch(BufferSize::Fixed(16))
    };
    let ds = Dataset::zip(vec![branch("left"), branch("right")])
        .prefetch(BufferSize::Fixed(4))
        .with_options(options(3 * MIB as u64));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut it = ds.iter().unwrap();
        let mut n = 0;
        for e in it.by_ref() {
            e.unwrap();
            n += 1;
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = tx.send((n, it.memory()));
    });
    let (n, usage) = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the zip makes progress");
    assert_eq!(n, 40);
    assert!(
        usage.high_water <= 3 * MIB as u64 + 4 * (2 * MIB as u64 + 64),
        "{usage:?}"
    );
}
