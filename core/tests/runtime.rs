//! The executor's contracts: errors with provenance, the skip policy, prompt shutdown,
//! statistics, and parse_example against what TensorFlow parsed.

use std::time::Duration;

use anyhow::Result;
use sluice_core::prelude::*;
use sluice_core::proto::TfMessage;
use sluice_core::proto::tfrecord::{Compression, TfRecordWriter};
use sluice_core::{Error, ErrorKind};

fn fixtures() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tfrecord").to_string()
}

#[test]
fn an_endless_pipeline_stops_when_dropped_mid_stream() {
    let ds = Dataset::range(0, 10)
        .repeat(None)
        .shuffle(5)
        .map_with(MapSpec::parallel(2), |e, _| Ok(e))
        .prefetch(BufferSize::Auto);
    let got: Vec<_> = ds
        .iter()
        .unwrap()
        .take(1000)
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(got.len(), 1000);
}

#[test]
fn a_parse_error_names_stage_element_file_and_offset() {
    let path = format!("{}/examples.tfrecord", fixtures());
    let ds = Dataset::tfrecord([&path])
        .unwrap()
        .parse_example(ParseExampleSpec::new([(
            "missing",
            FeatureSpec::scalar(FeatureType::Int64),
        )]));
    let err = ds.collect().unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("parse_example#2"), "{msg}");
    assert!(msg.contains("element 0:0"), "{msg}");
    assert!(msg.contains("examples.tfrecord at offset 0"), "{msg}");
    assert!(
        msg.ends_with("Feature: missing (data type: int64) is required but could not be found."),
        "{msg}"
    );
    assert!(matches!(err.root(), Error::InvalidData { .. }));
    // The context, structured: what every front end maps errors by.
    assert_eq!(err.kind(), ErrorKind::InvalidData);
    assert_eq!(err.feature(), Some("missing"));
    assert!(
        err.file().is_some_and(|f| f.ends_with("examples.tfrecord")),
        "{err:?}"
    );
    assert_eq!(err.offset(), Some(0));
    assert_eq!(err.record_index(), Some(0));
    assert!(
        err.stage().is_some_and(|s| s.starts_with("parse_example#")),
        "{err:?}"
    );
}

#[test]
fn parse_errors_are_worded_as_tensorflow_words_them() {
    let path = format!("{}/examples.tfrecord", fixtures());
    let check = |spec: FeatureSpec, want: &str| {
        let ds = Dataset::tfrecord([&path])
            .unwrap()
            .take(1)
            .batch(1)
            .parse_example(ParseExampleSpec::new([("label", spec)]));
        let msg = ds.collect().unwrap_err().root().to_string();
        assert_eq!(msg, want);
    };
    // Messages as TensorFlow 2.21's parse_example prints them (after "Name: <unknown>, ").
    check(
        FeatureSpec::scalar(FeatureType::Float),
        "Key: label, Index: 0.  Data types don't match. Data type: int64 but expected type: float",
    );
    check(
        FeatureSpec::var_len(FeatureType::String),
        "Key: label, Index: 0.  Data types don't match. Expected type: string, Actual type: int64",
    );
    check(
        FeatureSpec::FixedLen {
            dtype: FeatureType::Int64,
            shape: vec![2],
            default: None,
        },
        "Key: label, Index: 0.  Number of int64 values != expected.  Values size: 1 but output shape: [2]",
    );
}

#[test]
fn skip_policy_drops_and_counts_bad_elements() {
    let ds = Dataset::range(0, 100)
        .map_with(MapSpec::parallel(3), |e, _| {
            let v = e.tensor("value").unwrap().as_i64().unwrap()[0];
            if v % 10 == 3 {
                Err(Error::user(format!("bad value {v}")))
            } else {
                Ok(e)
            }
        })
        .with_options(Options::default().with_error_policy(ErrorPolicy::Skip));
    let mut it = ds.iter().unwrap();
    let got: Vec<_> = it.by_ref().collect::<Result<_, _>>().unwrap();
    assert_eq!(got.len(), 90);
    let stats = it.stats();
    assert_eq!(stats.skipped, 10);
    assert_eq!(
        stats
            .stages
            .iter()
            .find(|s| s.name == "map")
            .unwrap()
            .skipped,
        10
    );
}

#[test]
fn skip_policy_skips_corrupt_records_and_the_rest_of_a_truncated_file() {
    let f = fixtures();
    let ds = Dataset::tfrecord([
        format!("{f}/corrupt_data_crc.tfrecord"),
        format!("{f}/truncated.tfrecord"),
    ])
    .unwrap()
    .with_options(Options::default().with_error_policy(ErrorPolicy::Skip));
    let mut it = ds.iter().unwrap();
    let n = it.by_ref().filter(|r| r.is_ok()).count();
    // 63 good records of the first file; 63 records before the truncation of the second.
    assert_eq!(n, 63 + 63);
    assert_eq!(it.stats().skipped, 2);
    // Under the default policy the first damaged record ends the run with its location.
    let err = Dataset::tfrecord([format!("{f}/corrupt_data_crc.tfrecord")])
        .unwrap()
        .collect()
        .unwrap_err();
    assert!(err.to_string().contains("corrupted record at 268"), "{err}");
    // It names the record it could not read: its id and where it starts.
    assert_eq!(err.element(), Some(ElementId::new(0, 1)), "{err}");
    assert!(
        err.to_string().contains("element 0:1 (")
            && err
                .to_string()
                .contains("corrupt_data_crc.tfrecord at offset 256)"),
        "{err}"
    );
}

#[test]
fn stats_count_elements_and_name_the_bottleneck() {
    let ds = Dataset::range(0, 200)
        .map(Ok)
        .map_with(MapSpec::parallel(2), |e, _| {
            std::thread::sleep(Duration::from_micros(500));
            Ok(e)
        })
        .batch(10);
    let n = ds.iter().unwrap().count();
    assert_eq!(n, 20);
    let stats = ds.stats().unwrap();
    assert_eq!(stats.elements, 20);
    let names: Vec<_> = stats.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["range", "map", "map", "batch"]);
    assert_eq!(stats.stages[0].elements_out, 200);
    assert_eq!(stats.stages[3].elements_in, 200);
    assert_eq!(stats.stages[3].elements_out, 20);
    assert_eq!(stats.stages[2].workers, 2);
    let b = stats.bottleneck().expect("a bottleneck");
    assert_eq!((b.index, b.name.as_str()), (2, "map"), "{}", stats.report());
    assert!(stats.report().contains("bottleneck: #2 map"));
}

#[test]
fn parse_example_gives_the_values_tensorflow_parsed() -> Result<()> {
    let f = fixtures();
    let want: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(format!("{f}/examples.json"))?)?;
    let spec = ParseExampleSpec::new([
        ("label", FeatureSpec::scalar(FeatureType::Int64)),
        ("id", FeatureSpec::scalar(FeatureType::String)),
        ("scores", FeatureSpec::var_len(FeatureType::Float)),
        (
            "big_ints",
            FeatureSpec::FixedLen {
                dtype: FeatureType::Int64,
                shape: vec![5],
                default: None,
            },
        ),
        ("blob", FeatureSpec::var_len(FeatureType::String)),
        (
            "sometimes",
            FeatureSpec::FixedLen {
                dtype: FeatureType::Int64,
                shape: vec![],
                default: Some(vec![PadValue::Int(-1)]),
            },
        ),
    ]);
    for compression in ["", ".gz", ".zlib"] {
        // Unbatched and batched parsing agree with TensorFlow's values.
        let single = Dataset::tfrecord([format!("{f}/examples.tfrecord{compression}")])?
            .parse_example(spec.clone())
            .collect()?;
        let batched = Dataset::tfrecord([format!("{f}/examples.tfrecord{compression}")])?
            .batch(10)
            .parse_example(spec.clone())
            .unbatch()
            .collect()?;
        assert_eq!(single.len(), 64);
        assert_eq!(batched.len(), 64);
        for (i, (e, w)) in single.iter().zip(&want).enumerate() {
            let feat = &w["features"]["feature"];
            let ints = |name: &str| -> Vec<i64> {
                feat[name]["int64List"]["value"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|v| v.as_str().unwrap().parse().unwrap())
                            .collect()
                    })
                    .unwrap_or_default()
            };
            assert_eq!(
                e.tensor("label").unwrap().as_i64().unwrap(),
                ints("label"),
                "record {i}"
            );
            assert_eq!(
                e.tensor("big_ints").unwrap().as_i64().unwrap(),
                ints("big_ints")
            );
            let sometimes = ints("sometimes");
            let expect = if sometimes.is_empty() {
                vec![-1]
            } else {
                sometimes
            };
            assert_eq!(
                e.tensor("sometimes").unwrap().as_i64().unwrap(),
                expect,
                "record {i}"
            );
            let scores: Vec<f32> = feat["scores"]["floatList"]["value"]
                .as_array()
                .map(|a| a.iter().map(|v| v.as_f64().unwrap() as f32).collect())
                .unwrap_or_default();
            assert_eq!(e.tensor("scores").unwrap().as_f32().unwrap(), scores);
            let blob = e.tensor("blob").unwrap().as_bytes_list().unwrap();
            let want_blob: Vec<Vec<u8>> = feat["blob"]["bytesList"]["value"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|v| base64_decode(v.as_str().unwrap()))
                        .collect()
                })
                .unwrap_or_default();
            assert_eq!(
                blob.iter().map(|b| b.to_vec()).collect::<Vec<_>>(),
                want_blob
            );
            assert_eq!(&batched[i].tensor("scores"), &e.tensor("scores"));
            assert_eq!(&batched[i].tensor("label"), &e.tensor("label"));
        }
    }
    Ok(())
}

fn base64_decode(s: &str) -> Vec<u8> {
    // A tiny decoder for the test's own use (standard alphabet, padded).
    let table = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a' + 26) as u32,
            b'0'..=b'9' => (c - b'0' + 52) as u32,
            b'+' => 62,
            b'/' => 63,
            _ => 0,
        }
    };
    let bytes: Vec<u8> = s.bytes().filter(|c| *c != b'=').collect();
    let mut out = Vec::new();
    for chunk in bytes.chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= table(*c) << (18 - 6 * i);
        }
        out.push((n >> 16) as u8);
        if chunk.len() > 2 {
            out.push((n >> 8) as u8);
        }
        if chunk.len() > 3 {
            out.push(n as u8);
        }
    }
    out
}

#[test]
fn ragged_batches_of_varlen_features() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("v.tfrecord");
    let mut w = TfRecordWriter::create(&path, Compression::None)?;
    for n in [2usize, 0, 3] {
        let json = format!(
            r#"{{"features":{{"feature":{{"v":{{"int64List":{{"value":[{}]}}}}}}}}}}"#,
            (0..n)
                .map(|i| format!("\"{i}\""))
                .collect::<Vec<_>>()
                .join(",")
        );
        w.write_record(&sluice_core::proto::Example::from_json(&json)?.to_bytes())?;
    }
    w.finish()?;
    let out = Dataset::tfrecord([path.to_str().unwrap()])?
        .batch(3)
        .parse_example(ParseExampleSpec::new([(
            "v",
            FeatureSpec::var_len(FeatureType::Int64),
        )]))
        .collect()?;
    let Value::Ragged(r) = out[0].get("v").unwrap() else {
        panic!("ragged")
    };
    assert_eq!(&r.row_splits[..], &[0, 2, 2, 5]);
    assert_eq!(r.values.as_i64().unwrap(), &[0, 1, 0, 1, 2]);
    Ok(())
}

#[test]
fn a_starved_prefetch_passes_the_blame_to_the_slow_stage_above_it() {
    let ds = Dataset::range(0, 60)
        .map(|e| {
            std::thread::sleep(Duration::from_millis(1));
            Ok(e)
        })
        .prefetch(BufferSize::Fixed(4));
    assert_eq!(ds.iter().unwrap().count(), 60);
    let stats = ds.stats().unwrap();
    let b = stats.bottleneck().unwrap();
    assert_eq!(b.name, "map", "{}", stats.report());
    let prefetch = stats.stages.iter().find(|s| s.name == "prefetch").unwrap();
    assert!(
        prefetch.consumer_wait_seconds > 0.03,
        "the consumer did wait on prefetch's empty buffer"
    );
    assert!(prefetch.caused_wait_seconds < b.caused_wait_seconds);
}

#[test]
fn buffers_and_caches_respect_the_ram_budget() {
    let budget = Options::default().with_ram_budget(10_000);
    for over in [
        Dataset::range(0, 100_000).shuffle(50_000),
        Dataset::range(0, 100_000).cache(CacheSpec::Memory),
    ] {
        let err = over.with_options(budget.clone()).collect().unwrap_err();
        assert!(
            matches!(
                err.root(),
                Error::ResourceExhausted {
                    budget: "ram_budget",
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(err.kind(), ErrorKind::ResourceExhausted);
        assert!(err.to_string().contains("raise `ram_budget`"), "{err}");
    }
    // Within the budget both work.
    assert_eq!(
        Dataset::range(0, 100)
            .shuffle(100)
            .with_options(budget)
            .collect()
            .unwrap()
            .len(),
        100
    );
}

#[test]
fn interleave_reading_threads_stay_within_the_cpu_budget() {
    let f = fixtures();
    for (budget, want) in [(1, 1), (3, 3), (8, 4)] {
        for np in [NumParallel::Fixed(16), NumParallel::Auto] {
            let ds = Dataset::tfrecord([format!("{f}/images.tfrecord-*")])
                .unwrap()
                .interleave(InterleaveSpec::new(4).num_parallel(np))
                .with_options(Options::default().with_cpu_budget(budget));
            assert_eq!(ds.iter().unwrap().count(), 32);
            let stats = ds.stats().unwrap();
            let interleave = stats
                .stages
                .iter()
                .find(|s| s.name == "interleave")
                .unwrap();
            match np {
                NumParallel::Fixed(_) => {
                    assert_eq!(interleave.workers, want, "cpu budget {budget}")
                }
                // Autotune starts at the budget's reading threads (nothing after the
                // interleave computes on workers) and never exceeds the budget.
                _ => {
                    assert!(interleave.workers <= want, "cpu budget {budget}");
                    assert!(stats.tuned.iter().all(|(_, _, v)| *v <= want as usize));
                }
            }
        }
    }
}

/// A source whose stream panics after `n` elements (a bug in a custom stage).
#[derive(Debug)]
struct PanickingSource(u64);

impl sluice_core::Stage for PanickingSource {
    fn name(&self) -> &'static str {
        "panicking"
    }

    fn build(
        &self,
        _: &[sluice_core::Input],
        _: &sluice_core::BuildContext,
    ) -> sluice_core::Result<sluice_core::BoxStream> {
        let n = self.0;
        Ok(Box::new(sluice_core::IterStream((0..).map(move |i| {
            assert!(i < n, "custom stage bug at {i}");
            Ok(Element::scalar_i64(ElementId::new(0, i), "value", i as i64))
        }))))
    }

    fn params(&self) -> sluice_core::Params {
        sluice_core::Params::new().with("panics_after", self.0)
    }
}

#[test]
fn a_panic_upstream_of_a_threaded_stage_is_an_error_not_a_silent_end() {
    for ds in [
        Dataset::from_stage(PanickingSource(5), vec![])
            .map_with(MapSpec::parallel(2), |e, _| Ok(e)),
        Dataset::from_stage(PanickingSource(5), vec![]).prefetch(BufferSize::Fixed(2)),
    ] {
        let mut it = ds.iter().unwrap();
        let got: Vec<_> = it.by_ref().collect();
        assert_eq!(got.iter().filter(|r| r.is_ok()).count(), 5);
        let err = got.last().unwrap().as_ref().unwrap_err();
        assert!(err.to_string().contains("custom stage bug at 5"), "{err}");
    }
}

#[test]
fn a_cancelled_iteration_yields_cancelled_then_ends() {
    // A slow pipeline behind a prefetch: the consumer waits on the prefetch buffer while
    // another thread cancels.
    let ds = Dataset::range(0, 1_000_000)
        .map(|e| {
            std::thread::sleep(Duration::from_millis(20));
            Ok(e)
        })
        .prefetch(BufferSize::Fixed(2));
    let mut it = ds.iter().unwrap();
    assert!(it.next().unwrap().is_ok());
    let canceller = it.canceller();
    let cancelling = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        canceller.cancel();
    });
    let mut got = 0;
    let err = loop {
        match it.next() {
            Some(Ok(_)) => got += 1,
            Some(Err(e)) => break e,
            None => panic!("ended without saying it was cancelled"),
        }
        assert!(got < 1_000, "never cancelled");
    };
    assert!(matches!(err, Error::Cancelled), "{err}");
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    assert!(it.next().is_none());
    cancelling.join().unwrap();
}
