//! The TensorFlow tutorials' pipelines (`examples/pipelines/petfinder_*.toml`,
//! `imdb_*.toml`) give the tutorials' exact tensors: `tests/fixtures/tutorials/` holds
//! data of the tutorials' shapes and what the tutorials' own Keras code (Keras 3,
//! TensorFlow 2.21; `generate.py` there) made of it, batch by batch, bit for bit. Also
//! `regex_replace` against `tf.strings.regex_replace`.

use std::path::{Path, PathBuf};

use serde_json::{Value as Json, json};
use sluice_core::adapt::{AdaptSpec, adapt};
use sluice_core::pipeline_file::PipelineFile;
use sluice_core::prelude::*;
use sluice_core::{Shared, TensorData};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn fixture() -> Json {
    let path = root().join("tests/fixtures/tutorials/tutorials.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The example pipeline `name`, reading the fixtures, with its statistics file at `stats`.
fn example(name: &str, stats_name: &str, stats: &Path) -> PipelineFile {
    let text = std::fs::read_to_string(root().join("examples/pipelines").join(name)).unwrap();
    let text = text.replace(
        &format!("\"{stats_name}\""),
        &format!("{:?}", stats.display().to_string()),
    );
    PipelineFile::from_toml(&text)
        .unwrap()
        .with_data_dir(root().join("tests/fixtures/tutorials"))
}

fn learn(analyze: &str, spec: Json, out: &Path) {
    let spec: AdaptSpec = serde_json::from_value(json!({ "features": spec })).unwrap();
    let dataset = example(analyze, "", out).build().unwrap();
    adapt(&dataset, &spec).unwrap().save(out).unwrap();
}

fn f32s(t: &Tensor) -> Vec<f32> {
    match t.data() {
        TensorData::F32(v) => v.to_vec(),
        TensorData::I64(v) => v.iter().map(|x| *x as f32).collect(),
        other => panic!("not numbers: {:?}", other.dtype()),
    }
}

#[test]
fn petfinder_structured_data_gives_the_tutorials_tensors() {
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("petfinder_stats.json");
    // The command in petfinder_analyze.toml's header.
    let mut spec = json!({
        "PhotoAmt": { "analyzer": "batch_mean_variance", "batch_size": 256 },
        "Fee": { "analyzer": "batch_mean_variance", "batch_size": 256 },
        "Age": { "analyzer": "vocabulary", "max_tokens": 5 },
    });
    for c in [
        "Type",
        "Breed1",
        "Color1",
        "Color2",
        "Gender",
        "MaturitySize",
        "FurLength",
        "Vaccinated",
        "Sterilized",
        "Health",
    ] {
        spec[c] = json!({ "analyzer": "vocabulary", "max_tokens": 5 });
    }
    learn("petfinder_analyze.toml", spec, &stats);
    let mut p = example("petfinder_tabular.toml", "petfinder_stats.json", &stats);
    // The tutorial shuffles; the fixture's batches are in file order.
    p.stages.retain(|s| s.kind() != "shuffle");
    let got = p.build().unwrap().collect().unwrap();
    let want = f["petfinder"]["batches"].as_array().unwrap();
    assert_eq!(got.len(), want.len());
    let mut compared = 0;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        for (name, w) in w.as_object().unwrap() {
            let t = g.tensor(name).unwrap();
            if name == "AdoptionSpeed" {
                let want: Vec<i64> = serde_json::from_value(w.clone()).unwrap();
                assert_eq!(t.as_i64().unwrap(), want.as_slice());
                continue;
            }
            let shape: Vec<usize> = serde_json::from_value(w["shape"].clone()).unwrap();
            let values: Vec<f32> = w["values"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap() as f32)
                .collect();
            // Keras reads each column as shape [batch, 1]; a CSV column here is [batch]:
            // the same values, without the trailing 1.
            let mut want_shape = shape.clone();
            if want_shape.last() == Some(&1) {
                want_shape.pop();
            }
            assert_eq!(t.shape(), want_shape.as_slice(), "batch {i} {name}");
            let got = f32s(t);
            assert_eq!(got.len(), values.len(), "batch {i} {name}");
            for (k, (g, w)) in got.iter().zip(&values).enumerate() {
                assert_eq!(
                    g.to_bits(),
                    w.to_bits(),
                    "batch {i} {name}[{k}]: {g} where TF gave {w}"
                );
            }
            compared += got.len();
        }
    }
    assert!(compared > 700 * 40, "{compared}");
}

#[test]
fn imdb_text_gives_the_tutorials_token_indices() {
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("imdb_vocab.json");
    // The command in imdb_analyze.toml's header.
    learn(
        "imdb_analyze.toml",
        json!({ "line": { "analyzer": "text_vocabulary", "max_tokens": 10000 } }),
        &stats,
    );
    let p = example("imdb_text.toml", "imdb_vocab.json", &stats);
    let got = p.build().unwrap().collect().unwrap();
    let want = f["imdb"]["batches"].as_array().unwrap();
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let w: Vec<Vec<i64>> = serde_json::from_value(w.clone()).unwrap();
        let t = g.tensor("line").unwrap();
        assert_eq!(t.shape(), [w.len(), 250], "batch {i}");
        assert_eq!(t.as_i64().unwrap(), w.concat().as_slice(), "batch {i}");
    }
}

#[test]
fn regex_replace_matches_tf_strings_regex_replace() {
    let f = fixture();
    let inputs: Vec<String> = serde_json::from_value(f["regex_replace"]["inputs"].clone()).unwrap();
    let tensor = Tensor::new(
        &[inputs.len()],
        TensorData::Bytes(Shared::new(
            inputs
                .iter()
                .map(|s| bytes::Bytes::from(s.clone().into_bytes()))
                .collect(),
        )),
    )
    .unwrap();
    let cases = f["regex_replace"]["cases"].as_array().unwrap();
    assert!(cases.len() >= 10);
    for case in cases {
        let spec = RegexReplaceSpec {
            input: "s".to_string(),
            output: None,
            pattern: case["pattern"].as_str().unwrap().to_string(),
            rewrite: case["rewrite"].as_str().unwrap().to_string(),
            replace_global: case["replace_global"].as_bool().unwrap(),
        };
        let element = Element::new(ElementId::new(0, 0)).with("s", tensor.clone());
        let out = Dataset::from_elements(vec![element])
            .preprocess(spec)
            .collect()
            .unwrap();
        let got: Vec<String> = out[0]
            .tensor("s")
            .unwrap()
            .as_bytes_list()
            .unwrap()
            .iter()
            .map(|b| String::from_utf8(b.to_vec()).unwrap())
            .collect();
        let want: Vec<String> = serde_json::from_value(case["outputs"].clone()).unwrap();
        assert_eq!(got, want, "{case}");
    }
}
