//! Pipeline files end to end: every file in `examples/pipelines/` runs on small generated
//! JPEG shards, and bad files or data fail with the right errors.
//!
//! Core cannot load plugins (the hosts are in `sluice-plugins`, which depends on it), so
//! here a `plugin` stage runs a stand-in that passes elements through; the real plugin of
//! `plugin_noise.toml` runs in `plugins/tests/pipeline_file.rs` and `cli/tests/run_plugin.rs`.

use std::fs;
use std::path::{Path, PathBuf};

use sluice_core::pipeline_file::{LoadedPlugin, PipelineFile, PluginLoader, PluginStageSpec};
use sluice_core::proto::TfMessage;
use sluice_core::proto::example::{BytesList, Example, Feature, Features, Int64List, feature};
use sluice_core::proto::tfrecord::{Compression, TfRecordWriter};
use sluice_core::{Dataset, Error, Value};

const SHARDS: usize = 4;
const PER_SHARD: usize = 4;
const RECORDS: usize = SHARDS * PER_SHARD;

/// A smooth RGB image with a little structure, JPEG-encoded.
fn jpeg(size: u32, seed: u32) -> Vec<u8> {
    let mut pixels = Vec::with_capacity((size * size * 3) as usize);
    for y in 0..size {
        for x in 0..size {
            pixels.push(((x * 3 + seed * 17) % 256) as u8);
            pixels.push(((y * 2 + seed * 29) % 256) as u8);
            pixels.push((((x + y) / 2 + seed * 7) % 256) as u8);
        }
    }
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 90)
        .encode(&pixels, size, size, image::ExtendedColorType::Rgb8)
        .expect("encodes");
    out
}

/// An Example with the image and label under the names of tfdata_baseline.py (`image`,
/// `label`) and of `sluice gen` (`image/encoded`, `image/class/label`).
fn example(image: Vec<u8>, label: i64) -> Vec<u8> {
    let mut features = Features::default();
    for name in ["image", "image/encoded"] {
        features.feature.insert(
            name.into(),
            Feature {
                kind: Some(feature::Kind::BytesList(BytesList {
                    value: vec![image.clone().into()],
                })),
            },
        );
    }
    for name in ["label", "image/class/label"] {
        features.feature.insert(
            name.into(),
            Feature {
                kind: Some(feature::Kind::Int64List(Int64List { value: vec![label] })),
            },
        );
    }
    Example {
        features: Some(features),
    }
    .to_bytes()
}

/// `train.tfrecord-0000i-of-00004` shards of 232x232 JPEG Examples (labels 0..16) in `dir`;
/// with `broken`, record 1 of shard 0 holds bytes that are not an image.
fn write_shards(dir: &Path, broken: bool) {
    for s in 0..SHARDS {
        let path = dir.join(format!("train.tfrecord-{s:05}-of-{SHARDS:05}"));
        let mut w = TfRecordWriter::create(&path, Compression::None).expect("creates");
        for k in 0..PER_SHARD {
            let i = s * PER_SHARD + k;
            let img = if broken && i == 1 {
                b"not a jpeg".to_vec()
            } else {
                jpeg(232, i as u32)
            };
            w.write_record(&example(img, i as i64)).expect("writes");
        }
        w.finish().expect("finishes");
    }
}

/// Loads every plugin as a pass-through function named `stand_in`.
struct StandIn;

impl PluginLoader for StandIn {
    fn load(&self, spec: &PluginStageSpec) -> sluice_core::Result<LoadedPlugin> {
        assert!(spec.config_json().is_object());
        Ok(LoadedPlugin {
            name: "stand_in".into(),
            fingerprint: "stand_in".into(),
            chunk_fn: std::sync::Arc::new(|chunk, _| Ok(chunk.into_iter().enumerate().collect())),
            one_to_one: true,
        })
    }
}

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/pipelines")
}

/// Rows of one element: the leading dimension of its first value if `batched`, else 1.
fn rows(element: &sluice_core::Element, batched: bool) -> usize {
    if !batched {
        return 1;
    }
    match element.iter().next().map(|(_, v)| v) {
        Some(Value::Dense(t)) => t.shape()[0],
        Some(Value::Ragged(r)) => r.rows(),
        None => 0,
    }
}

fn run_epoch(dataset: &Dataset, batched: bool) -> (usize, Vec<sluice_core::Element>) {
    let mut n = 0;
    let mut all = Vec::new();
    for e in dataset.iter().expect("starts") {
        let e = e.expect("element");
        n += rows(&e, batched);
        all.push(e);
    }
    (n, all)
}

#[test]
fn every_example_pipeline_runs_on_small_data() {
    let data = tempfile::tempdir().unwrap();
    write_shards(data.path(), false);
    let mut files: Vec<PathBuf> = fs::read_dir(examples_dir())
        .expect("examples/pipelines exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    for required in [
        "augment",
        "augment_batched",
        "cache",
        "gen_augment",
        "parse",
        "plugin_noise",
        "read",
        "wasm_augment",
    ] {
        assert!(
            names.iter().any(|n| n == required),
            "{required}.toml in {names:?}"
        );
    }
    for path in &files {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        // The tutorials' pipelines read CSV and text with statistics files of `sluice
        // adapt`: cli/tests/tutorial_pipelines.rs runs them on data of their own.
        if name.starts_with("petfinder_") || name.starts_with("imdb_") {
            PipelineFile::load(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            continue;
        }
        let pipeline = PipelineFile::load(path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .with_data_dir(data.path());
        let batched = pipeline.output_is_batched();
        let dataset = if pipeline.has_plugins() {
            assert!(matches!(
                pipeline.build().unwrap_err().root(),
                Error::NoPluginLoader
            ));
            pipeline.build_with(&StandIn)
        } else {
            pipeline.build()
        }
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        for epoch in 0..2 {
            let (n, elements) = run_epoch(&dataset, batched);
            assert!(!elements.is_empty(), "{name}: no elements");
            let expected = match name.as_str() {
                "read" => RECORDS * 10,
                "parse" => RECORDS * 5,
                _ => RECORDS,
            };
            assert_eq!(n, expected, "{name} epoch {epoch}");
            let stats = dataset.stats().expect("stats");
            assert_eq!(stats.elements as usize, elements.len(), "{name}");
            let first = &elements[0];
            match name.as_str() {
                "augment" | "gen_augment" | "plugin_noise" | "wasm_augment" => {
                    let img = first.tensor("image").expect("image");
                    assert_eq!(img.shape(), &[RECORDS, 224, 224, 3]);
                    assert_eq!(img.dtype(), sluice_core::DType::F32);
                    let label = if name == "augment" {
                        "label"
                    } else {
                        "image/class/label"
                    };
                    let labels = first.tensor(label).unwrap().as_i64().unwrap();
                    let mut sorted = labels.to_vec();
                    sorted.sort();
                    assert_eq!(sorted, (0..RECORDS as i64).collect::<Vec<_>>());
                }
                "cache" => {
                    let img = first.tensor("image").expect("image");
                    assert_eq!(img.shape(), &[RECORDS, 64, 64, 3]);
                }
                "parse" => {
                    assert_eq!(first.tensor("label").unwrap().shape(), &[RECORDS * 5]);
                    assert_eq!(first.tensor("image").unwrap().shape(), &[RECORDS * 5]);
                }
                "read" => {
                    assert_eq!(first.tensor("record").unwrap().shape(), &[RECORDS * 10]);
                }
                _ => {}
            }
            if name == "plugin_noise" || name == "wasm_augment" {
                let stats = dataset.stats().unwrap();
                assert!(
                    stats.stages.iter().any(|s| s.name == "plugin:stand_in"),
                    "{stats:?}"
                );
            }
        }
    }
}

#[test]
fn the_augment_file_is_reproducible_from_its_seed() {
    let data = tempfile::tempdir().unwrap();
    write_shards(data.path(), false);
    let load = || {
        PipelineFile::load(examples_dir().join("augment.toml"))
            .unwrap()
            .with_data_dir(data.path())
            .build()
            .unwrap()
    };
    let (_, a) = run_epoch(&load(), true);
    let (_, b) = run_epoch(&load(), true);
    assert_eq!(a, b);
    let mut other = PipelineFile::load(examples_dir().join("augment.toml"))
        .unwrap()
        .with_data_dir(data.path());
    other.options.seed = Some(43);
    let (_, c) = run_epoch(&other.build().unwrap(), true);
    assert_ne!(a[0].tensor("image"), c[0].tensor("image"));
}

#[test]
fn the_error_policy_of_a_file_skips_a_broken_image_and_counts_it() {
    let data = tempfile::tempdir().unwrap();
    write_shards(data.path(), true);
    let text = fs::read_to_string(examples_dir().join("augment.toml")).unwrap();
    let strict = PipelineFile::from_toml(&text)
        .unwrap()
        .with_data_dir(data.path());
    let err = strict
        .build()
        .unwrap()
        .iter()
        .unwrap()
        .find_map(|e| e.err())
        .expect("the broken image fails the run");
    assert!(err.to_string().contains("image_ops"), "{err}");
    let text = text.replace("seed = 42", "seed = 42\nerror_policy = \"skip\"");
    let lenient = PipelineFile::from_toml(&text)
        .unwrap()
        .with_data_dir(data.path());
    let dataset = lenient.build().unwrap();
    let (n, _) = run_epoch(&dataset, true);
    assert_eq!(n, RECORDS - 1);
    assert_eq!(dataset.stats().unwrap().skipped, 1);
}

#[test]
fn missing_data_files_name_the_pattern() {
    let empty = tempfile::tempdir().unwrap();
    let pipeline = PipelineFile::load(examples_dir().join("read.toml"))
        .unwrap()
        .with_data_dir(empty.path());
    match pipeline.build().unwrap_err() {
        Error::NoMatch { pattern } => {
            assert!(pattern.ends_with("train.tfrecord-*"), "{pattern}");
            assert!(pattern.starts_with(&empty.path().display().to_string()));
        }
        other => panic!("expected NoMatch, got {other}"),
    }
}

#[test]
fn errors_in_a_file_name_the_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    fs::write(
        &path,
        "[source]\nfiles = ['x']\n\n[[stage]]\nkind = 'shuffle'\nbuffer_size = 10\nreshufle_each_epoch = false\n",
    )
    .unwrap();
    let err = PipelineFile::load(&path).unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with(&format!(
            "{}:7:1: stage 1 (shuffle): unknown field `reshufle_each_epoch`",
            path.display()
        )),
        "{text}"
    );
    assert!(
        text.ends_with("did you mean `reshuffle_each_epoch`?"),
        "{text}"
    );
    let missing = PipelineFile::load(dir.path().join("nope.toml")).unwrap_err();
    assert!(matches!(missing, Error::Io { .. }), "{missing}");
}

#[test]
fn every_toml_block_of_the_reference_parses() {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/pipeline-format.md");
    let text = fs::read_to_string(&doc).expect("docs/pipeline-format.md");
    let mut blocks = 0;
    for (i, block) in text.split("```toml\n").skip(1).enumerate() {
        let block = block.split("```").next().unwrap();
        // Stage snippets are checked inside a minimal file.
        let file = if block.contains("[source]") {
            block.to_string()
        } else {
            format!("[source]\nfiles = [\"x\"]\n\n{block}")
        };
        let p = PipelineFile::from_toml_named(&file, &format!("block {i}"))
            .unwrap_or_else(|e| panic!("{e}\n{file}"));
        assert!(!p.stages.is_empty(), "block {i} has stages");
        blocks += 1;
    }
    assert!(blocks >= 5, "{blocks} blocks");
}
