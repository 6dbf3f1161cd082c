//! Every TensorFlow-written fixture in `tests/fixtures/tfrecord/`, read with Sluice and
//! compared with what TensorFlow read back (`MANIFEST.json` and the `.json` expectations).

use anyhow::{Context, Result, bail};
use serde_json::Value;
use sluice_proto::tfrecord::{Compression, CorruptionPolicy, ReaderOptions, TfRecordReader};
use sluice_proto::{Error, Example, SequenceExample, TfMessage};
use sluice_tests::{fixture, manifest, sha256_hex};

fn read_all(name: &str, options: ReaderOptions) -> (Vec<bytes::Bytes>, Option<Error>) {
    let mut records = Vec::new();
    let reader = TfRecordReader::open(fixture(name), options).expect("fixture opens");
    for r in reader {
        match r {
            Ok(r) => records.push(r.data),
            Err(e) => return (records, Some(e)),
        }
    }
    (records, None)
}

/// Compares two canonical-JSON values: same keys, same values, floats compared as f32.
fn assert_json_eq(got: &Value, want: &Value, path: &str) -> Result<()> {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => {
            let gk: Vec<_> = g.keys().collect();
            let mut wk: Vec<_> = w.keys().collect();
            wk.sort();
            let mut gk_sorted = gk.clone();
            gk_sorted.sort();
            if gk_sorted != wk {
                bail!("{path}: keys differ: got {gk_sorted:?}, want {wk:?}");
            }
            for (k, wv) in w {
                assert_json_eq(&g[k], wv, &format!("{path}.{k}"))?;
            }
        }
        (Value::Array(g), Value::Array(w)) => {
            if g.len() != w.len() {
                bail!("{path}: {} values, want {}", g.len(), w.len());
            }
            for (i, (gv, wv)) in g.iter().zip(w).enumerate() {
                assert_json_eq(gv, wv, &format!("{path}[{i}]"))?;
            }
        }
        (Value::Number(g), Value::Number(w)) => {
            let (g, w) = (g.as_f64().unwrap() as f32, w.as_f64().unwrap() as f32);
            if g.to_bits() != w.to_bits() {
                bail!("{path}: {g} != {w} as f32");
            }
        }
        (g, w) if g == w => {}
        (g, w) => bail!("{path}: got {g}, want {w}"),
    }
    Ok(())
}

fn expected(name: &str) -> Result<Vec<Value>> {
    let text = std::fs::read_to_string(fixture(name))?;
    Ok(serde_json::from_str(&text)?)
}

#[test]
fn manifest_record_counts_and_errors_match_tensorflow() -> Result<()> {
    let manifest = manifest()?;
    let files = manifest["files"].as_object().context("files")?;
    assert!(files.len() >= 13, "the manifest lists every fixture");
    for (name, spec) in files {
        let compression: Compression = spec["compression"].as_str().unwrap().parse()?;
        for c in [compression, Compression::Auto] {
            let (records, err) = read_all(name, ReaderOptions::default().with_compression(c));
            if let Some(n) = spec.get("records") {
                assert!(err.is_none(), "{name}: unexpected error {err:?}");
                assert_eq!(records.len() as u64, n.as_u64().unwrap(), "{name} ({c})");
            } else {
                let before = spec["records_before_error"].as_u64().unwrap();
                let tf = spec["tensorflow_error"].as_str().unwrap();
                let tf_message = tf
                    .strip_prefix("DataLossError: ")
                    .context("DataLossError")?;
                let err = err.with_context(|| format!("{name}: expected an error"))?;
                assert_eq!(
                    records.len() as u64,
                    before,
                    "{name}: records before the error"
                );
                assert_eq!(
                    err.tensorflow_message().as_deref(),
                    Some(tf_message),
                    "{name}"
                );
                assert_eq!(
                    err.to_string(),
                    format!("{}: {tf_message}", fixture(name).display()),
                    "the error names the file, then TensorFlow's message"
                );
            }
        }
    }
    Ok(())
}

#[test]
fn examples_match_tensorflow_json_in_all_three_compressions() -> Result<()> {
    let want = expected("examples.json")?;
    assert_eq!(want.len(), 64);
    for name in [
        "examples.tfrecord",
        "examples.tfrecord.gz",
        "examples.tfrecord.zlib",
    ] {
        let (records, err) = read_all(name, ReaderOptions::default());
        assert!(err.is_none(), "{name}: {err:?}");
        assert_eq!(records.len(), want.len(), "{name}");
        for (i, (rec, want)) in records.iter().zip(&want).enumerate() {
            let got = Example::from_bytes(rec)?.to_json_value();
            assert_json_eq(&got, want, &format!("{name}[{i}]"))?;
            // And back: TensorFlow's JSON parses to the same message.
            let parsed = Example::from_json_value(want.clone())?;
            assert_eq!(parsed, Example::from_bytes(rec)?, "{name}[{i}] from JSON");
        }
    }
    Ok(())
}

#[test]
fn sequence_examples_match_tensorflow_json() -> Result<()> {
    let want = expected("sequence_examples.json")?;
    let (records, err) = read_all("sequence_examples.tfrecord", ReaderOptions::default());
    assert!(err.is_none());
    assert_eq!(records.len(), want.len());
    for (i, (rec, want)) in records.iter().zip(&want).enumerate() {
        let msg = SequenceExample::from_bytes(rec)?;
        assert_json_eq(&msg.to_json_value(), want, &format!("seq[{i}]"))?;
        assert_eq!(SequenceExample::from_json_value(want.clone())?, msg);
    }
    Ok(())
}

#[test]
fn raw_records_including_zero_length_ones_match() -> Result<()> {
    let want = expected("raw_records.json")?;
    let (records, err) = read_all("raw_records.tfrecord", ReaderOptions::default());
    assert!(err.is_none());
    assert_eq!(records.len(), want.len());
    for (rec, want) in records.iter().zip(&want) {
        assert_eq!(rec.len() as u64, want["len"].as_u64().unwrap());
        assert_eq!(sha256_hex(rec), want["sha256"].as_str().unwrap());
    }
    Ok(())
}

#[test]
fn empty_file_has_zero_records() {
    for c in [Compression::Auto, Compression::None] {
        let (records, err) = read_all(
            "empty.tfrecord",
            ReaderOptions::default().with_compression(c),
        );
        assert!(records.is_empty() && err.is_none());
    }
}

#[test]
fn image_shards_hold_the_labels_tensorflow_reads() -> Result<()> {
    let want = expected("images.json")?;
    for item in &want {
        let file = item["file"].as_str().unwrap();
        let index = item["index"].as_u64().unwrap() as usize;
        let (records, err) = read_all(file, ReaderOptions::default());
        assert!(err.is_none());
        let ex = Example::from_bytes(&records[index])?.to_json_value();
        let label = &ex["features"]["feature"]["label"]["int64List"]["value"][0];
        assert_eq!(
            label.as_str().unwrap(),
            item["label"].as_i64().unwrap().to_string()
        );
    }
    Ok(())
}

#[test]
fn skip_policy_skips_a_bad_data_crc_and_counts_it() -> Result<()> {
    let opts = ReaderOptions::default().with_corruption_policy(CorruptionPolicy::SkipBadData);
    let mut reader = TfRecordReader::open(fixture("corrupt_data_crc.tfrecord"), opts)?;
    let records: Vec<_> = reader.by_ref().collect::<Result<_, _>>()?;
    // 64 records, one damaged: 63 come back, the damaged one is counted and located.
    assert_eq!(records.len(), 63);
    assert_eq!(reader.skipped(), 1);
    let skipped = reader.skipped_records()[0];
    assert_eq!((skipped.index, skipped.offset), (1, 256));
    // The good records are exactly those of the intact file, minus record 1.
    let (intact, _) = read_all("examples.tfrecord", ReaderOptions::default());
    let mut expected = intact.clone();
    expected.remove(1);
    let got: Vec<_> = records.into_iter().map(|r| r.data).collect();
    assert_eq!(got, expected);
    Ok(())
}

#[test]
fn skip_policy_still_stops_at_a_bad_length_crc() {
    let opts = ReaderOptions::default().with_corruption_policy(CorruptionPolicy::SkipBadData);
    let (records, err) = read_all("corrupt_length_crc.tfrecord", opts);
    assert_eq!(records.len(), 2);
    let err = err.expect("a bad length CRC is reported, not skipped");
    assert_eq!(err.tensorflow_message().unwrap(), "corrupted record at 480");
}
