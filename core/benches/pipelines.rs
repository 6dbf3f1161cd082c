//! The reference pipelines of `bench/tfdata_baseline.py`, in Sluice, on the same
//! files, printing the same JSON, to compare side by side.
//!
//! ```sh
//! python bench/tfdata_baseline.py gen DIR          # 16 shards x 256 JPEG Examples
//! cargo bench -p sluice-core --bench pipelines -- DIR read parse cache2
//! python bench/tfdata_baseline.py run DIR parse    # tf.data, same files
//! ```
//!
//! - `read`: interleave 4 -> repeat 10 -> batch 256 (records/s, MB/s)
//! - `parse`: interleave 4 -> repeat 5 -> batch 256 -> parse_example(image, label)
//! - `augment`: interleave 4 -> parse -> image_ops(decode, random crop 224, flip, brightness,
//!   contrast, normalize; parallel) -> batch 64 -> prefetch (images/s)
//!   `image_ops` then `batch` run fused (`map_and_batch_fusion`, on by default): the rows of
//!   each batch decoded and augmented in parallel straight into the batch's buffer
//! - `eval`: the evaluation counterpart of `augment`: interleave 4 -> parse ->
//!   image_ops(decode, centre crop 224, to [0, 1], normalize) -> batch 64 -> prefetch
//!   (images/s; no tf.data counterpart in `tfdata_baseline.py`)
//! - `augment_unfused`: `augment` with `map_and_batch_fusion` off (each image made on its
//!   own, then copied into its batch)
//! - `augment_pb`: `augment_unfused` with the batch assembled in parallel (`num_parallel` auto)
//! - `augment_batched`: the same, batching first: interleave 4 -> parse -> batch 64 ->
//!   image_ops (rows in parallel, written straight into the batch) -> prefetch (images/s)
//! - `decode_only`: the JPEGs in memory decoded by a plain parallel loop (the ceiling for
//!   `augment`)
//! - `decode_to_batch`: `decode_only`, each image's first 224x224x3 values then written as
//!   `f32` into a row of a 64-row batch buffer (38.5 MB, made before the clock, its pages
//!   first touched inside it, as `augment`'s first batch buffer is): the decode plus the
//!   output any pipeline delivering `augment`'s batches has to write, nothing else
//! - `cache2`: interleave 4 -> map(parse, decode JPEG, resize 64x64 f32) -> cache -> batch 64
//!   (parallel) -> prefetch; two epochs; the second (served from the memory cache) is reported.
//! - `global_shuffle`: global shuffle of every record (record indexes, positioned reads,
//!   `num_parallel` auto) -> batch 256 -> parse_example (images/s); two epochs, the second
//!   (indexes already built) is reported. The indexes are written beside the data.
//! - `buffered_shuffle`: the same with interleave 4 -> shuffle(10_000) instead, to compare;
//!   two epochs, the second reported.
//! - `global_shuffle_raw` / `buffered_shuffle_raw`: the two shuffles over `DIR/*.tfrecord-*`
//!   (any dataset, e.g. `sluice gen --images 400000 --size 16`) -> batch 256 of raw records,
//!   nothing parsed, so the shuffles' own cost shows (records/s, MB/s); two epochs, the
//!   second reported.
//! - `augment@IL,IMG,PF` (e.g. `augment@auto,auto,auto`, `augment@seq,2,8`): the `augment`
//!   pipeline repeated 4 times in one run (16,384 images, a few seconds, so autotune has
//!   time to act) with the interleave's reading threads `IL`, `image_ops`'s workers `IMG`
//!   (`seq`, a number, or `auto`) and the prefetch buffer `PF` (a number or `auto`).
//! - `autotune_grid`: `augment@...` for autotune, the naive setting (`seq,seq,1`) and every
//!   hand setting within the 2-CPU budget (IL in seq/1/2, IMG in 1/2, PF in 2/8), in
//!   `ROUNDS` (env, default 3) rounds of alternating order.
//!
//! `OBSERVE=timeline|trace` (env) observes the run as `sluice run --json` (a timeline) or
//! `sluice run --trace` (a trace too, written to `$TMPDIR/sluice-bench-trace.json` after the
//! timed epochs) do, to measure what observing costs (BENCHMARKS.md, "Observing a run").
//!
//! `EPOCHS=N` (env) runs each pipeline that otherwise runs once (all but `cache2` and the
//! shuffles; `decode_only` too) `N` times and reports the last run, as
//! `tfdata_baseline.py run DIR augment --epochs N` does: the steady state, without the first
//! run's start-up (threads, fresh buffers and their page faults).

use std::time::Instant;

use sluice_core::prelude::*;

fn spec() -> ParseExampleSpec {
    ParseExampleSpec::new([
        ("image", FeatureSpec::scalar(FeatureType::String)),
        ("label", FeatureSpec::scalar(FeatureType::Int64)),
    ])
}

fn interleaved(dir: &str) -> Dataset {
    Dataset::tfrecord([format!("{dir}/train.tfrecord-*")])
        .expect("bench data (run tfdata_baseline.py gen DIR first)")
        .interleave(InterleaveSpec::new(4).num_parallel(NumParallel::Auto))
}

fn small_one(e: Element) -> Result<Element> {
    let jpeg = e
        .tensor("image")
        .and_then(|t| t.as_bytes_list())
        .expect("image")[0]
        .clone();
    let img = image::load_from_memory_with_format(&jpeg, image::ImageFormat::Jpeg)
        .map_err(sluice_core::Error::user)?
        .to_rgb8();
    let small = image::imageops::resize(&img, 64, 64, image::imageops::FilterType::Triangle);
    let data: Vec<f32> = small.as_raw().iter().map(|&v| v as f32).collect();
    let mut out = Element::new(e.id());
    out.insert(
        "image",
        Tensor::new(&[64, 64, 3], TensorData::F32(data.into()))?,
    );
    out.insert("label", e.tensor("label").expect("label").clone());
    Ok(out)
}

/// tfdata_baseline.py's `augment_one` after parsing: decode JPEG, random crop 224, random
/// flip, to [0, 1], random brightness 0.1, random contrast 0.75-1.5, (x - 0.5) / 0.25.
fn augment_ops() -> ImageOpsSpec {
    ImageOpsSpec::new(vec![
        ImageOp::Decode { channels: Some(3) },
        ImageOp::RandomCrop {
            height: 224,
            width: 224,
        },
        ImageOp::RandomFlipLeftRight { p: 0.5 },
        ImageOp::ToUnitF32,
        ImageOp::RandomBrightness { max_delta: 0.1 },
        ImageOp::RandomContrast {
            lower: 0.75,
            upper: 1.5,
        },
        ImageOp::Normalize {
            mean: vec![0.5; 3],
            std: vec![0.25; 3],
            scale: 1.0,
        },
    ])
}

/// The reference for the augment pipeline: a plain loop decoding every JPEG in memory,
/// on as many threads as the machine has (rayon), nothing else.
fn decode_only(dir: &str) {
    use rayon::prelude::*;
    let jpegs = jpegs_in_memory(dir);
    let mut secs = 0.0;
    for _ in 0..env_epochs() {
        let t = Instant::now();
        let pixels: usize = jpegs
            .par_iter()
            .map(|j| {
                sluice_core::image::decode_image(j, Some(3))
                    .expect("decodes")
                    .len()
            })
            .sum();
        secs = t.elapsed().as_secs_f64();
        assert!(pixels > 0);
    }
    print_loop_result("decode_only", jpegs.len(), secs);
}

/// The JSON line of a decode loop (the fields `bench/driver.py` reads).
fn print_loop_result(pipeline: &str, records: usize, secs: f64) {
    println!(
        "{{\"system\": \"sluice {}\", \"pipeline\": \"{pipeline}\", \"records\": {records}, \"seconds\": {secs:.4}, \"records_per_s\": {:.1}, \"threads\": {}}}",
        env!("CARGO_PKG_VERSION"),
        records as f64 / secs,
        rayon::current_num_threads()
    );
}

/// Every record's encoded image, read and parsed before any clock starts.
fn jpegs_in_memory(dir: &str) -> Vec<bytes::Bytes> {
    let records: Vec<Element> = Dataset::tfrecord([format!("{dir}/train.tfrecord-*")])
        .expect("bench data")
        .parse_example(spec())
        .collect()
        .expect("records");
    records
        .iter()
        .map(|e| e.tensor("image").unwrap().as_bytes_list().unwrap()[0].clone())
        .collect()
}

/// [`decode_only`], each decoded image's first `224 * 224 * 3` values then cast to `f32`
/// into a row of a batch of 64 (rows filled in parallel, a batch at a time; the buffer is
/// reused from batch to batch, as `augment`'s pool reuses its batch buffer).
fn decode_to_batch(dir: &str) {
    use rayon::prelude::*;
    const ROW: usize = 224 * 224 * 3;
    const BATCH: usize = 64;
    let jpegs = jpegs_in_memory(dir);
    let mut secs = 0.0;
    let mut sum = 0.0f64;
    // Zeroed by the allocator (fresh pages): first written inside the first timed epoch;
    // later epochs (`EPOCHS`) reuse it, as a run's later batches reuse `augment`'s.
    let mut batch = vec![0.0f32; BATCH * ROW];
    for _ in 0..env_epochs() {
        let t = Instant::now();
        for chunk in jpegs.chunks(BATCH) {
            batch
                .par_chunks_mut(ROW)
                .zip(chunk.par_iter())
                .for_each(|(row, j)| {
                    let img = sluice_core::image::decode_image(j, Some(3)).expect("decodes");
                    let pixels = img.as_u8().expect("u8 pixels");
                    assert!(pixels.len() >= ROW, "images of at least 224x224x3 values");
                    for (d, &x) in row.iter_mut().zip(&pixels[..ROW]) {
                        *d = f32::from(x);
                    }
                });
            sum += f64::from(batch[ROW - 1]);
        }
        secs = t.elapsed().as_secs_f64();
    }
    std::hint::black_box(sum);
    print_loop_result("decode_to_batch", jpegs.len(), secs);
}

/// `EPOCHS` from the environment (default 1): runs of a single-epoch pipeline, the last
/// reported.
fn env_epochs() -> usize {
    std::env::var("EPOCHS")
        .ok()
        .and_then(|e| e.parse().ok())
        .filter(|&e| e > 0)
        .unwrap_or(1)
}

/// Counts (records, bytes) in one output batch.
type Counter = fn(&Element) -> (usize, usize);

fn parallel(s: &str) -> NumParallel {
    match s {
        "seq" => NumParallel::Sequential,
        "auto" => NumParallel::Auto,
        n => NumParallel::Fixed(n.parse().expect("seq, auto or a number")),
    }
}

/// The `augment` pipeline with explicit settings, repeated 4 times.
fn augment_with(dir: &str, settings: &str) -> Dataset {
    let parts: Vec<&str> = settings.split(',').collect();
    let [il, img, pf] = parts[..] else {
        panic!("augment@IL,IMG,PF, got {settings}")
    };
    let buffer = match pf {
        "auto" => BufferSize::Auto,
        n => BufferSize::Fixed(n.parse().expect("auto or a number")),
    };
    Dataset::tfrecord([format!("{dir}/train.tfrecord-*")])
        .expect("bench data (run tfdata_baseline.py gen DIR first)")
        .interleave(InterleaveSpec::new(4).num_parallel(parallel(il)))
        .parse_example(spec())
        .image_ops(augment_ops().num_parallel(parallel(img)))
        .batch(64)
        .prefetch(buffer)
        .repeat(Some(4))
}

fn autotune_grid(dir: &str) {
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let mut settings = vec!["auto,auto,auto".to_string(), "seq,seq,1".to_string()];
    for il in ["seq", "1", "2"] {
        for img in ["1", "2"] {
            for pf in ["2", "8"] {
                settings.push(format!("{il},{img},{pf}"));
            }
        }
    }
    for round in 0..rounds {
        let mut order = settings.clone();
        if round % 2 == 1 {
            order.reverse();
        }
        for s in order {
            run(dir, &format!("augment@{s}"));
        }
    }
}

fn run(dir: &str, name: &str) {
    if name == "autotune_grid" {
        return autotune_grid(dir);
    }
    let (ds, epochs, count): (Dataset, usize, Counter) = match name {
        _ if name.starts_with("augment@") => {
            (augment_with(dir, &name["augment@".len()..]), 1, |b| {
                (b.tensor("label").unwrap().len(), 0)
            })
        }
        _ if name.starts_with("augment_batched@") => (
            interleaved(dir)
                .parse_example(spec())
                .batch(64)
                .image_ops(augment_ops().num_parallel(parallel(&name["augment_batched@".len()..])))
                .prefetch(BufferSize::Auto),
            1,
            |b| (b.tensor("label").unwrap().len(), 0),
        ),
        "read" => (interleaved(dir).repeat(Some(10)).batch(256), 1, |b| {
            let recs = b.tensor("record").unwrap().as_bytes_list().unwrap();
            (recs.len(), recs.iter().map(|r| r.len()).sum())
        }),
        "parse" => (
            interleaved(dir)
                .repeat(Some(5))
                .batch(256)
                .parse_example(spec()),
            1,
            |b| (b.tensor("label").unwrap().len(), 0),
        ),
        "cache2" => (
            interleaved(dir)
                .parse_example(spec())
                .map_with(MapSpec::parallel(NumParallel::Auto), |e, _| small_one(e))
                .cache(CacheSpec::Memory)
                // tf.data's default `parallel_batch` optimization assembles batches on
                // several threads; so does this.
                .batch_with(BatchSpec::new(64).num_parallel(NumParallel::Auto))
                .prefetch(BufferSize::Auto)
                .with_options(Options::default().with_map_and_batch_fusion(false)),
            2,
            |b| (b.tensor("label").unwrap().len(), 0),
        ),
        "augment_pb" => (
            interleaved(dir)
                .parse_example(spec())
                .image_ops(augment_ops().num_parallel(NumParallel::Auto))
                .batch_with(BatchSpec::new(64).num_parallel(NumParallel::Auto))
                .prefetch(BufferSize::Auto)
                .with_options(Options::default().with_map_and_batch_fusion(false)),
            1,
            |b| (b.tensor("label").unwrap().len(), 0),
        ),
        "augment" => (
            interleaved(dir)
                .parse_example(spec())
                .image_ops(augment_ops().num_parallel(NumParallel::Auto))
                .batch(64)
                .prefetch(BufferSize::Auto),
            1,
            |b| (b.tensor("label").unwrap().len(), 0),
        ),
        "eval" => (
            interleaved(dir)
                .parse_example(spec())
                .image_ops(
                    ImageOpsSpec::new(vec![
                        ImageOp::Decode { channels: Some(3) },
                        ImageOp::CenterCrop {
                            height: 224,
                            width: 224,
                        },
                        ImageOp::ToUnitF32,
                        ImageOp::Normalize {
                            mean: vec![0.485, 0.456, 0.406],
                            std: vec![0.229, 0.224, 0.225],
                            scale: 1.0,
                        },
                    ])
                    .num_parallel(NumParallel::Auto),
                )
                .batch(64)
                .prefetch(BufferSize::Auto),
            1,
            |b| (b.tensor("label").unwrap().len(), 0),
        ),
        // `augment` with map_and_batch_fusion off: each image made on its own, then copied
        // into its batch (what `augment` did before the fusion).
        "augment_unfused" => (
            interleaved(dir)
                .parse_example(spec())
                .image_ops(augment_ops().num_parallel(NumParallel::Auto))
                .batch(64)
                .prefetch(BufferSize::Auto)
                .with_options(Options::default().with_map_and_batch_fusion(false)),
            1,
            |b| (b.tensor("label").unwrap().len(), 0),
        ),
        // The same work on batches: batch the encoded images, then decode and augment the
        // rows of each batch in parallel (rayon), writing straight into the batch's buffer.
        "augment_batched" => (
            interleaved(dir)
                .parse_example(spec())
                .batch(64)
                .image_ops(augment_ops())
                .prefetch(BufferSize::Auto),
            1,
            |b| (b.tensor("label").unwrap().len(), 0),
        ),
        "global_shuffle" => (
            Dataset::tfrecord_global_shuffle(
                [format!("{dir}/train.tfrecord-*")],
                GlobalShuffleSpec::default(),
            )
            .expect("bench data (run tfdata_baseline.py gen DIR first)")
            .batch(256)
            .parse_example(spec()),
            2,
            |b| (b.tensor("label").unwrap().len(), 0),
        ),
        "buffered_shuffle" => (
            interleaved(dir)
                .shuffle(10_000)
                .batch(256)
                .parse_example(spec()),
            2,
            |b| (b.tensor("label").unwrap().len(), 0),
        ),
        "global_shuffle_raw" => (
            Dataset::tfrecord_global_shuffle(
                [format!("{dir}/*.tfrecord-*")],
                GlobalShuffleSpec::default(),
            )
            .expect("a TFRecord dataset")
            .batch(256),
            2,
            |b| {
                let recs = b.tensor("record").unwrap().as_bytes_list().unwrap();
                (recs.len(), recs.iter().map(|r| r.len()).sum())
            },
        ),
        "buffered_shuffle_raw" => (
            Dataset::tfrecord([format!("{dir}/*.tfrecord-*")])
                .expect("a TFRecord dataset")
                .interleave(InterleaveSpec::new(4).num_parallel(NumParallel::Auto))
                .shuffle(10_000)
                .batch(256),
            2,
            |b| {
                let recs = b.tensor("record").unwrap().as_bytes_list().unwrap();
                (recs.len(), recs.iter().map(|r| r.len()).sum())
            },
        ),
        "decode_only" => return decode_only(dir),
        "decode_to_batch" => return decode_to_batch(dir),
        other => panic!("unknown pipeline {other}"),
    };
    let epochs = if epochs == 1 { env_epochs() } else { epochs };
    let observe = std::env::var("OBSERVE").unwrap_or_else(|_| "off".into());
    let tracer = sluice_core::observe::Tracer::new(Default::default());
    match observe.as_str() {
        "off" => {}
        "timeline" => ds.observe(
            sluice_core::observe::Observe::new()
                .timeline(sluice_core::observe::Timeline::new(Default::default())),
        ),
        "trace" => ds.observe(
            sluice_core::observe::Observe::new()
                .timeline(sluice_core::observe::Timeline::new(Default::default()))
                .trace(tracer.clone()),
        ),
        other => panic!("OBSERVE={other}: expected off, timeline or trace"),
    }
    let mut last = (0usize, 0usize, 0f64);
    let mut report = String::new();
    for _ in 0..epochs {
        let t = Instant::now();
        let (mut n, mut bytes) = (0, 0);
        for b in ds.iter().expect("pipeline builds") {
            let (k, nb) = count(&b.expect("pipeline runs"));
            n += k;
            bytes += nb;
        }
        last = (n, bytes, t.elapsed().as_secs_f64());
        report = ds.stats().map(|s| s.report()).unwrap_or_default();
    }
    let (n, bytes, secs) = last;
    if observe == "trace" {
        let path = std::env::temp_dir().join("sluice-bench-trace.json");
        tracer.write_to(&path).expect("the trace is written");
        eprintln!("trace: {} ({} events)", path.display(), tracer.events());
    }
    println!(
        "{{\"system\": \"sluice {}\", \"pipeline\": \"{name}\", \"observe\": \"{observe}\", \"records\": {n}, \"seconds\": {secs:.4}, \"records_per_s\": {:.1}, \"mb_per_s\": {}}}",
        env!("CARGO_PKG_VERSION"),
        n as f64 / secs,
        if bytes > 0 {
            format!("{:.1}", bytes as f64 / secs / 1e6)
        } else {
            "null".into()
        }
    );
    eprintln!("{report}");
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let Some(dir) = args
        .first()
        .cloned()
        .or_else(|| std::env::var("SLUICE_BENCH_DATA").ok())
    else {
        eprintln!(
            "usage: cargo bench -p sluice-core --bench pipelines -- DIR [read|parse|cache2]..."
        );
        return;
    };
    let names: Vec<&str> = if args.len() > 1 {
        args[1..].iter().map(String::as_str).collect()
    } else {
        vec!["read", "parse", "cache2"]
    };
    for name in names {
        run(&dir, name);
    }
}
