//! TFDS data directories against TensorFlow Datasets: `tests/fixtures/tfds/DATA_DIR` was
//! prepared by TFDS from a small local builder, and `expected.json` holds what
//! `tfds.load(name, split=..., as_supervised=...)` returned for several split strings
//! (`generate.py` wrote both). Every element must equal TFDS's, in order, feature by
//! feature: images as decoded `uint8` shape and SHA-256, tensors as dtype, shape and
//! values, text as its bytes.

use std::path::PathBuf;

use serde_json::{Value as Json, json};
use sha2::{Digest, Sha256};
use sluice_core::prelude::*;
use sluice_core::tfds::{TfdsInfo, list_prepared};
use sluice_core::{Element, TensorData};

fn fixtures() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/tfds"
    ))
}

fn data_dir() -> PathBuf {
    fixtures().join("DATA_DIR")
}

fn expected() -> Json {
    let text = std::fs::read_to_string(fixtures().join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn flat(v: &Json, out: &mut Vec<Json>) {
    match v {
        Json::Array(items) => items.iter().for_each(|i| flat(i, out)),
        other => out.push(other.clone()),
    }
}

/// A value as `generate.py` writes it.
fn json_of(name: &str, t: &Tensor) -> Json {
    let shape = t.shape().to_vec();
    match t.data() {
        TensorData::U8(v) if t.rank() == 3 => json!({
            "shape": shape,
            "sha256": format!("{:x}", Sha256::digest(v)),
        }),
        TensorData::Bytes(v) => {
            assert!(shape.is_empty(), "{name}: bytes of shape {shape:?}");
            json!({"bytes": String::from_utf8(v[0].to_vec()).unwrap()})
        }
        data => {
            let (dtype, values): (&str, Vec<Json>) = match data {
                TensorData::I64(v) => ("int64", v.iter().map(|x| json!(x)).collect()),
                TensorData::I32(v) => ("int32", v.iter().map(|x| json!(x)).collect()),
                TensorData::F32(v) => ("float32", v.iter().map(|x| json!(f64::from(*x))).collect()),
                TensorData::F64(v) => ("float64", v.iter().map(|x| json!(x)).collect()),
                TensorData::U8(v) => ("uint8", v.iter().map(|x| json!(x)).collect()),
                TensorData::Bytes(_) => unreachable!(),
            };
            json!({"dtype": dtype, "shape": shape, "value": values})
        }
    }
}

fn normalize(want: &Json) -> Json {
    match want.get("value") {
        Some(v) => {
            let mut values = Vec::new();
            flat(v, &mut values);
            let values: Vec<Json> = values
                .into_iter()
                .map(|x| match (want["dtype"].as_str(), x.as_f64()) {
                    (Some("float32" | "float64"), Some(f)) => json!(f),
                    _ => x,
                })
                .collect();
            json!({"dtype": want["dtype"], "shape": want["shape"], "value": values})
        }
        None => want.clone(),
    }
}

fn element_json(e: &Element) -> serde_json::Map<String, Json> {
    e.iter()
        .map(|(name, v)| (name.to_string(), json_of(name, v.as_dense().unwrap())))
        .collect()
}

#[test]
fn every_split_string_reads_what_tfds_load_reads() {
    let want = expected();
    let cases = want["cases"].as_array().unwrap();
    assert!(cases.len() >= 10);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let split = case["split"].as_str().unwrap();
        let supervised = case["as_supervised"].as_bool().unwrap();
        let spec = TfdsSpec::new(name, split)
            .data_dir(data_dir())
            .as_supervised(supervised);
        let got: Vec<Element> = Dataset::tfds(spec)
            .unwrap_or_else(|e| panic!("{name} {split}: {e}"))
            .collect()
            .unwrap_or_else(|e| panic!("{name} {split}: {e}"));
        let want_elements = case["elements"].as_array().unwrap();
        assert_eq!(
            got.len(),
            want_elements.len(),
            "{name} {split} (as_supervised={supervised}): element count"
        );
        for (i, (g, w)) in got.iter().zip(want_elements).enumerate() {
            let g = element_json(g);
            let w = w.as_object().unwrap();
            assert_eq!(
                g.keys().collect::<Vec<_>>(),
                w.keys().collect::<Vec<_>>(),
                "{name} {split}: element {i}: feature names"
            );
            for (k, wv) in w {
                assert_eq!(
                    g[k],
                    normalize(wv),
                    "{name} {split} (as_supervised={supervised}): element {i}, feature {k}"
                );
            }
        }
    }
}

#[test]
fn versions_resolve_to_the_newest_prepared_match() {
    let dir = data_dir();
    assert_eq!(TfdsInfo::find(&dir, "toy").unwrap().version, "1.1.0");
    assert_eq!(TfdsInfo::find(&dir, "toy:1.*.*").unwrap().version, "1.1.0");
    assert_eq!(TfdsInfo::find(&dir, "toy:1.0.*").unwrap().version, "1.0.0");
    assert_eq!(TfdsInfo::find(&dir, "toy:1.0.0").unwrap().version, "1.0.0");
    let err = TfdsInfo::find(&dir, "toy:2.*.*").unwrap_err().to_string();
    assert!(
        err.contains("2.*.*") && err.contains("1.0.0, 1.1.0"),
        "{err}"
    );
    let err = TfdsInfo::find(&dir, "mnist").unwrap_err().to_string();
    assert!(err.contains("\"mnist\"") && err.contains("toy"), "{err}");
    let err = TfdsInfo::find(&dir, "toy:1.x").unwrap_err().to_string();
    assert!(err.contains("bad version"), "{err}");
}

#[test]
fn info_reads_splits_features_and_supervised_keys() {
    let info = TfdsInfo::find(&data_dir(), "toy").unwrap();
    assert_eq!(info.file_format, "tfrecord");
    let splits: Vec<(&str, u64, usize)> = info
        .splits
        .iter()
        .map(|s| (s.name.as_str(), s.num_examples(), s.shard_lengths.len()))
        .collect();
    assert_eq!(splits, [("train", 50, 2), ("test", 12, 2)]);
    assert_eq!(
        info.supervised_keys,
        Some(("image".to_string(), "label".to_string()))
    );
    let names: Vec<&str> = info.features.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "image",
            "label",
            "meta/grid",
            "meta/id",
            "text",
            "tokens",
            "vector"
        ]
    );
    let label = &info.features[1];
    assert_eq!(
        label.names.as_deref(),
        Some(&["cat".to_string(), "dog".into(), "bird".into()][..])
    );
    assert_eq!(label.num_classes, Some(3));
    assert_eq!(info.features[5].shape, [None]);
    assert_eq!(info.features[0].shape, [None, None, Some(3)]);
    let listed = list_prepared(&data_dir()).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name, "toy");
    assert_eq!(listed[0].versions, ["1.0.0", "1.1.0"]);
}

#[test]
fn slicing_rounds_as_tfds_and_spans_shards() {
    let info = TfdsInfo::find(&data_dir(), "toy").unwrap();
    // 33% of 50 is 16.5: Python rounds half to even (16); 67% is 33.5 (34).
    assert_eq!(
        info.absolute_instructions("train[33%:67%]").unwrap(),
        [("train".to_string(), 16, 34)]
    );
    let fi = info.file_instructions("train[20:30]").unwrap();
    assert_eq!(fi.len(), 2);
    assert_eq!((fi[0].skip, fi[0].take), (20, None));
    assert_eq!((fi[1].skip, fi[1].take), (0, Some(5)));
    assert!(fi[0].path.ends_with("toy-train.tfrecord-00000-of-00002"));
    assert_eq!(
        info.absolute_instructions("train[1shard:]+test[-2:]")
            .unwrap(),
        [("train".to_string(), 25, 50), ("test".to_string(), 10, 12)]
    );
    assert_eq!(
        info.absolute_instructions("all").unwrap(),
        [("train".to_string(), 0, 50), ("test".to_string(), 0, 12)]
    );
}

#[test]
fn errors_name_the_missing_split_or_shard_and_what_exists() {
    let err = Dataset::tfds(TfdsSpec::new("toy", "validation").data_dir(data_dir()))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("\"validation\"") && err.contains("train, test"),
        "{err}"
    );
    for bad in [
        "train[:101%]",
        "train[:60]",
        "train[",
        "train+",
        "train[5]",
        "train[a:b]",
    ] {
        let err = Dataset::tfds(TfdsSpec::new("toy", bad).data_dir(data_dir()))
            .err()
            .unwrap_or_else(|| panic!("{bad} was accepted"))
            .to_string();
        assert!(err.contains("tfds"), "{bad}: {err}");
    }
    // A data dir with a shard missing.
    let tmp = tempfile::tempdir().unwrap();
    let version = tmp.path().join("toy/1.1.0");
    std::fs::create_dir_all(&version).unwrap();
    for entry in std::fs::read_dir(data_dir().join("toy/1.1.0")).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        if name != "toy-train.tfrecord-00001-of-00002" {
            std::fs::copy(entry.path(), version.join(&name)).unwrap();
        }
    }
    let err = Dataset::tfds(TfdsSpec::new("toy", "train[30:]").data_dir(tmp.path()))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("toy-train.tfrecord-00001-of-00002")
            && err.contains("toy-train.tfrecord-00000-of-00002"),
        "{err}"
    );
    // The first shard alone still reads.
    let n = Dataset::tfds(TfdsSpec::new("toy", "train[:25]").data_dir(tmp.path()))
        .unwrap()
        .collect()
        .unwrap()
        .len();
    assert_eq!(n, 25);
    // A damaged dataset_info.json: an error naming the file and place, no panic.
    std::fs::write(
        version.join("dataset_info.json"),
        "{\"name\": \"toy\", \"splits\": [",
    )
    .unwrap();
    let err = Dataset::tfds(TfdsSpec::new("toy", "train").data_dir(tmp.path()))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("dataset_info.json") && err.contains("line 1"),
        "{err}"
    );
}

#[test]
fn shuffle_files_reads_every_element_once_in_another_order() {
    let spec = TfdsSpec::new("toy", "train+test").data_dir(data_dir());
    let ids = |spec: TfdsSpec, seed: u64| -> Vec<i64> {
        Dataset::tfds(spec)
            .unwrap()
            .with_options(Options {
                seed: Some(seed),
                ..Options::default()
            })
            .collect()
            .unwrap()
            .iter()
            .map(|e| e.tensor("meta/id").unwrap().as_i64().unwrap()[0])
            .collect()
    };
    let plain = ids(spec.clone(), 1);
    let orders: Vec<Vec<i64>> = (0..4)
        .map(|s| ids(spec.clone().shuffle_files(true), s))
        .collect();
    assert!(orders.iter().any(|o| o != &plain));
    for order in orders {
        let mut a = order.clone();
        let mut b = plain.clone();
        a.sort();
        b.sort();
        assert_eq!(a, b);
    }
}

#[test]
fn composes_with_batch_and_skip_decoding() {
    let spec = TfdsSpec::new("toy", "test[:4]")
        .data_dir(data_dir())
        .as_supervised(true);
    let batches = Dataset::tfds(spec.clone())
        .unwrap()
        .map(|mut e| {
            // Images differ in size: keep the label only, to batch.
            e.remove("image");
            Ok(e)
        })
        .batch(2)
        .collect()
        .unwrap();
    assert_eq!(batches.len(), 2);
    assert_eq!(batches[0].tensor("label").unwrap().shape(), [2]);
    let mut raw = spec;
    raw.decode_images = false;
    let e = &Dataset::tfds(raw).unwrap().take(1).collect().unwrap()[0];
    let png = e.tensor("image").unwrap().as_bytes_list().unwrap()[0].clone();
    assert!(png.starts_with(b"\x89PNG"));
}

#[test]
fn a_pipeline_file_reads_a_tfds_source() {
    use sluice_core::pipeline_file::{PipelineFile, SourceFormat};
    let toml = format!(
        "[source]\nformat = \"tfds\"\nname = \"toy:1.*.*\"\nsplit = \"train[:50%]+test[-3:]\"\n\
         data_dir = {:?}\n\n[[stage]]\nkind = \"take\"\ncount = 27\n",
        data_dir().display().to_string()
    );
    let file = PipelineFile::from_toml(&toml).unwrap();
    assert!(matches!(file.source.format, SourceFormat::Tfds(_)));
    let got = file.build().unwrap().collect().unwrap();
    let want = &expected()["cases"][8];
    assert_eq!(want["split"], "train[:50%]+test[-3:]");
    assert_eq!(got.len(), 27);
    for (g, w) in got.iter().zip(want["elements"].as_array().unwrap()) {
        assert_eq!(
            json_of("meta/id", g.tensor("meta/id").unwrap()),
            normalize(&w["meta/id"])
        );
    }
    // The spec round-trips through TOML, without `files`.
    let text = toml::to_string(&file).unwrap();
    assert!(!text.contains("files"), "{text}");
    assert_eq!(PipelineFile::from_toml(&text).unwrap(), file);
    // `dir` is the data dir when `data_dir` is not set; `shuffle_files` applies.
    let toml = format!(
        "[source]\nformat = \"tfds\"\nname = \"toy\"\nsplit = \"test\"\ndir = {:?}\n\
         shuffle_files = true\nas_supervised = true\n",
        data_dir().display().to_string()
    );
    let file = PipelineFile::from_toml(&toml).unwrap();
    let got = file.build().unwrap().collect().unwrap();
    assert_eq!(got.len(), 12);
    assert_eq!(
        got[0].iter().map(|(n, _)| n).collect::<Vec<_>>(),
        ["image", "label"]
    );
    // `files` does not apply; an unknown key is named; interleave is refused.
    for (toml, needle) in [
        (
            "[source]\nformat = 'tfds'\nname = 'toy'\nfiles = ['x']\n",
            "`files` does not apply",
        ),
        (
            "[source]\nformat = 'tfds'\nname = 'toy'\nspilt = 'train'\n",
            "spilt",
        ),
        (
            "[source]\nformat = 'tfds'\nname = 'toy'\n[[stage]]\nkind = 'interleave'\ncycle_length = 2\n",
            "already interleaves",
        ),
    ] {
        let err = PipelineFile::from_toml(toml).unwrap_err().to_string();
        assert!(err.contains(needle), "{err}");
    }
}

/// A checkpoint of a TFDS pipeline (sliced split across shards, shuffled shards, a shuffle
/// buffer, shard 0 of 2) resumes where it stopped, in a fresh dataset.
#[test]
fn a_tfds_pipeline_resumes_from_its_checkpoint() {
    let build = || {
        Dataset::tfds(
            TfdsSpec::new("toy", "train[10%:90%]+test[-5:]")
                .data_dir(data_dir())
                .shuffle_files(true),
        )
        .unwrap()
        .shard(2, 0)
        .shuffle(8)
        .with_options(Options {
            seed: Some(5),
            ..Options::default()
        })
    };
    let id = |e: &Element| e.tensor("meta/id").unwrap().as_i64().unwrap()[0];
    let all: Vec<i64> = build().collect().unwrap().iter().map(id).collect();
    assert_eq!(all.len(), 23); // (40 + 5) / 2, rounded up for shard 0
    let mut it = build().iter().unwrap();
    let head: Vec<i64> = it.by_ref().take(9).map(|e| id(&e.unwrap())).collect();
    let checkpoint =
        sluice_core::Checkpoint::from_json(&it.checkpoint().unwrap().to_json()).unwrap();
    drop(it);
    let tail: Vec<i64> = build()
        .resume(&checkpoint)
        .unwrap()
        .map(|e| id(&e.unwrap()))
        .collect();
    assert_eq!(head, all[..9]);
    assert_eq!(tail, all[9..]);
}
