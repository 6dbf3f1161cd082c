//! `image_folder` against Keras: `tests/fixtures/image_folder/tree/` read with the arguments
//! `image_dataset_from_directory` was given (`generate.py`) must give Keras's class names and
//! file order (for every seed, split and subset recorded), and, where the pixels were
//! recorded, the same images (decoded, resized) and labels, element by element, with an
//! error at the same element where TensorFlow refused an image.

use std::path::{Path, PathBuf};

use serde_json::{Value as Json, json};
use sluice_core::pipeline_file::PipelineFile;
use sluice_core::prelude::*;
use sluice_core::{DType, Element, TensorData};

fn fixtures() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/image_folder"
    ))
}

fn tree() -> PathBuf {
    fixtures().join("tree")
}

fn cases() -> Vec<Json> {
    let text = std::fs::read_to_string(fixtures().join("expected.json")).unwrap();
    let all: Json = serde_json::from_str(&text).unwrap();
    all["cases"].as_array().unwrap().clone()
}

fn case(name: &str) -> Json {
    cases()
        .into_iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no case {name}"))
}

/// The spec for Keras's arguments (`image_size` is the fixtures' [5, 4] unless given as
/// null: Keras's default).
fn spec_of(args: &Json) -> ImageFolderSpec {
    let mut keys = args.as_object().unwrap().clone();
    match keys.get("image_size") {
        Some(Json::Null) => {
            keys.remove("image_size");
        }
        _ => {
            keys.insert("image_size".into(), json!([5, 4]));
        }
    }
    if keys.get("labels") == Some(&Json::Null) {
        keys.insert("labels".into(), json!("none"));
    }
    serde_json::from_value(Json::Object(keys)).unwrap()
}

fn relative(paths: &[PathBuf]) -> Vec<String> {
    paths
        .iter()
        .map(|p| {
            p.strip_prefix(tree())
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

fn strings(v: &Json) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn file_order_class_names_and_splits_are_keras_s() {
    for case in cases() {
        let name = case["name"].as_str().unwrap();
        let spec = spec_of(&case["args"]);
        let subsets = case["subsets"].as_array().unwrap();
        let indexes = if spec.subset == Some(Subset::Both) {
            let (a, b) = spec.split(spec.index(tree()).unwrap());
            vec![a, b]
        } else {
            vec![spec.index(tree()).unwrap()]
        };
        assert_eq!(indexes.len(), subsets.len(), "{name}");
        for (index, want) in indexes.iter().zip(subsets) {
            assert_eq!(
                relative(&index.file_paths),
                strings(&want["file_paths"]),
                "{name}: file_paths"
            );
            let want_classes =
                (!want["class_names"].is_null()).then(|| strings(&want["class_names"]));
            assert_eq!(index.class_names, want_classes, "{name}: class_names");
            // Labels follow the files: the class folder's index.
            if let Some(classes) = &index.class_names
                && spec.label_mode == LabelMode::Int
            {
                for (path, label) in relative(&index.file_paths).iter().zip(&index.labels) {
                    let class = path.split('/').next().unwrap();
                    let i = classes.iter().position(|c| c == class).unwrap();
                    assert_eq!(*label, i as i64, "{name}: {path}");
                }
            }
        }
    }
}

fn flat_f64(t: &Tensor) -> Vec<f64> {
    match t.data() {
        TensorData::U8(v) => v.iter().map(|&x| f64::from(x)).collect(),
        TensorData::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        TensorData::I32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        other => panic!("unexpected {other:?}"),
    }
}

fn dtype_name(t: &Tensor) -> &'static str {
    match t.dtype() {
        DType::U8 => "uint8",
        DType::F32 => "float32",
        DType::I32 => "int32",
        DType::I64 => "int64",
        other => panic!("unexpected {other:?}"),
    }
}

fn is_jpeg(path: &str) -> bool {
    path.ends_with(".jpg") || path.ends_with(".jpeg")
}

/// Reads a pixel case and compares every element with Keras's.
fn check_elements(name: &str) {
    let case = case(name);
    let spec = spec_of(&case["args"]);
    let want = &case["subsets"][0];
    let paths = strings(&want["file_paths"]);
    let dataset = Dataset::image_folder(tree(), spec).unwrap();
    let mut got: Vec<Element> = Vec::new();
    let mut error = None;
    for item in dataset.iter().unwrap() {
        match item {
            Ok(e) => got.push(e),
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    let want_elements = want["elements"].as_array().unwrap();
    assert_eq!(
        got.len(),
        want_elements.len(),
        "{name}: elements before the end or error"
    );
    for ((e, w), path) in got.iter().zip(want_elements).zip(&paths) {
        let image = e.tensor("image").unwrap();
        let shape: Vec<usize> = serde_json::from_value(w["shape"].clone()).unwrap();
        assert_eq!(image.shape(), &shape[..], "{name}: {path}");
        assert_eq!(dtype_name(image), w["dtype"], "{name}: {path}");
        let values = flat_f64(image);
        if let Some(pixels) = w["pixels"].as_array() {
            let pixels: Vec<f64> = pixels.iter().map(|p| p.as_f64().unwrap()).collect();
            assert_eq!(values.len(), pixels.len(), "{name}: {path}");
            if is_jpeg(path) {
                // JPEG decoders differ (sluice-image's decode docs): TensorFlow's libjpeg
                // fast integer IDCT rounds low and its chroma upsampling differs at the
                // edges of an 8x6 image; compare the mean and bound each value.
                let n = values.len() as f64;
                let mean_diff = values.iter().zip(&pixels).map(|(g, p)| g - p).sum::<f64>() / n;
                let max_diff = values
                    .iter()
                    .zip(&pixels)
                    .map(|(g, p)| (g - p).abs())
                    .fold(0.0, f64::max);
                assert!(
                    mean_diff.abs() <= 3.0,
                    "{name}: {path}: mean difference {mean_diff}"
                );
                assert!(
                    max_diff <= 16.0,
                    "{name}: {path}: largest difference {max_diff}"
                );
            } else {
                // PNG, BMP and GIF are lossless: equal up to float32 rounding.
                for (i, (g, p)) in values.iter().zip(&pixels).enumerate() {
                    assert!(
                        (g - p).abs() <= 1e-3,
                        "{name}: {path}: value {i}: {g} vs {p}"
                    );
                }
            }
        }
        if let Some(sum) = w["sum"].as_f64() {
            let got: f64 = values.iter().sum();
            let tolerance = if is_jpeg(path) {
                3.0 * values.len() as f64
            } else {
                1e-6 * sum.abs().max(1.0)
            };
            assert!(
                (got - sum).abs() <= tolerance,
                "{name}: {path}: sum {got} vs {sum}"
            );
        }
        if !w["label"].is_null() {
            let label = e.tensor("label").unwrap();
            assert_eq!(dtype_name(label), w["label_dtype"], "{name}: {path}");
            let want_label: Vec<f64> = match &w["label"] {
                Json::Array(v) => v.iter().map(|x| x.as_f64().unwrap()).collect(),
                x => vec![x.as_f64().unwrap()],
            };
            assert_eq!(flat_f64(label), want_label, "{name}: {path}");
        }
        let provenance = e.provenance().unwrap();
        assert!(provenance.file.ends_with(path.as_str()), "{name}: {path}");
    }
    match (want["error"].as_str(), error) {
        (None, None) => {}
        (Some(message), Some(error)) => {
            let text = error.to_string();
            assert!(
                text.contains(message),
                "{name}: {text:?} should say {message:?}"
            );
            let at = &paths[got.len()];
            assert!(
                text.contains(at.as_str()),
                "{name}: {text:?} should name {at}"
            );
        }
        (want, got) => panic!("{name}: error {got:?}, expected {want:?}"),
    }
}

#[test]
fn rgb_images_and_labels_are_keras_s() {
    check_elements("sorted");
}

#[test]
fn grayscale_and_rgba_fail_where_tensorflow_does() {
    check_elements("sorted_grey");
    check_elements("sorted_rgba");
}

#[test]
fn nearest_keeps_uint8() {
    check_elements("sorted_nearest");
}

#[test]
fn default_size_is_256_square() {
    check_elements("sorted_default_size");
}

#[test]
fn categorical_and_binary_labels() {
    check_elements("categorical");
    check_elements("binary");
}

#[test]
fn shuffled_elements_come_in_keras_s_file_order() {
    let case = case("seed_1337");
    let spec = spec_of(&case["args"]);
    let want = strings(&case["subsets"][0]["file_paths"]);
    let elements = Dataset::image_folder(tree(), spec)
        .unwrap()
        .collect()
        .unwrap();
    let files: Vec<String> = elements
        .iter()
        .map(|e| {
            let file = e.provenance().unwrap().file.to_string();
            Path::new(&file)
                .strip_prefix(tree())
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(files, want);
}

#[test]
fn both_subsets_and_shards() {
    let case = case("both_seed_7");
    let spec = spec_of(&case["args"]);
    let (train, val) = Dataset::image_folder_both(tree(), spec.clone()).unwrap();
    assert_eq!(
        train.collect().unwrap().len(),
        case["subsets"][0]["file_paths"].as_array().unwrap().len()
    );
    assert_eq!(
        val.collect().unwrap().len(),
        case["subsets"][1]["file_paths"].as_array().unwrap().len()
    );
    // Shards of the training part cover it once.
    let train = Dataset::image_folder(
        tree(),
        ImageFolderSpec {
            subset: Some(Subset::Training),
            ..spec.clone()
        },
    )
    .unwrap();
    let all = train.collect().unwrap().len();
    let a = train.shard(2, 0).collect().unwrap().len();
    let b = train.shard(2, 1).collect().unwrap().len();
    assert_eq!(a + b, all);
    // subset = "both" in one dataset is refused.
    let err = Dataset::image_folder(tree(), spec).unwrap_err();
    assert!(err.to_string().contains("image_folder_both"), "{err}");
}

#[test]
fn undecoded_images_are_the_file_bytes() {
    let spec = ImageFolderSpec {
        shuffle: false,
        decode: false,
        ..ImageFolderSpec::default()
    };
    let elements = Dataset::image_folder(tree(), spec)
        .unwrap()
        .collect()
        .unwrap();
    let first = &elements[0];
    let bytes = std::fs::read(tree().join("bird/B2.PNG")).unwrap();
    match first.tensor("image").unwrap().data() {
        TensorData::Bytes(v) => assert_eq!(&v[0][..], &bytes[..]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn keras_s_argument_checks() {
    let bad = [
        (
            ImageFolderSpec {
                validation_split: Some(0.2),
                ..ImageFolderSpec::default()
            },
            "subset",
        ),
        (
            ImageFolderSpec {
                validation_split: Some(0.2),
                subset: Some(Subset::Training),
                ..ImageFolderSpec::default()
            },
            "seed",
        ),
        (
            ImageFolderSpec {
                validation_split: Some(1.5),
                subset: Some(Subset::Training),
                seed: Some(1),
                ..ImageFolderSpec::default()
            },
            "between 0 and 1",
        ),
        (
            ImageFolderSpec {
                class_names: Some(vec!["cow".into()]),
                ..ImageFolderSpec::default()
            },
            "\"cow\"",
        ),
        (
            ImageFolderSpec {
                label_mode: LabelMode::Binary,
                ..ImageFolderSpec::default()
            },
            "exactly 2 classes",
        ),
    ];
    for (spec, says) in bad {
        let err = Dataset::image_folder(tree(), spec).unwrap_err();
        assert!(err.to_string().contains(says), "{err} should say {says}");
    }
    let empty = tempfile::tempdir().unwrap();
    std::fs::create_dir(empty.path().join("a")).unwrap();
    let err = Dataset::image_folder(empty.path(), ImageFolderSpec::default()).unwrap_err();
    assert_eq!(err.kind(), sluice_core::ErrorKind::NotFound, "{err}");
}

#[test]
fn pipeline_file_source() {
    let text = format!(
        r#"
[source]
format = "image_folder"
dir = {:?}
directory = "tree"
image_size = [5, 4]
seed = 7
validation_split = 0.25
subset = "validation"

[[stage]]
kind = "batch"
batch_size = 2
"#,
        fixtures().display().to_string()
    );
    let file = PipelineFile::from_toml(&text).unwrap();
    // Round trip through TOML.
    let again = PipelineFile::from_toml(&toml::to_string(&file).unwrap()).unwrap();
    assert_eq!(file.source, again.source);
    let batches = file.build().unwrap().collect().unwrap();
    let want = case("val_seed_7")["subsets"][0]["file_paths"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(
        batches
            .iter()
            .map(|b| b.tensor("label").unwrap().shape()[0])
            .sum::<usize>(),
        want
    );
    assert_eq!(batches[0].tensor("image").unwrap().shape(), &[2, 5, 4, 3]);

    for (extra, says) in [
        ("files = [\"x\"]", "not `files`"),
        ("subset = \"both\"", "both"),
        ("colour_mode = \"rgb\"", "colour_mode"),
    ] {
        let text = format!(
            "[source]\nformat = \"image_folder\"\ndirectory = \"tree\"\nseed = 1\nvalidation_split = 0.5\n{}\n",
            if extra.starts_with("subset") {
                extra.to_string()
            } else {
                format!("subset = \"training\"\n{extra}")
            }
        );
        let err = match PipelineFile::from_toml(&text) {
            Ok(f) => f.build().unwrap_err().to_string(),
            Err(e) => e.to_string(),
        };
        assert!(err.contains(says), "{err} should say {says}");
    }
}

/// A checkpoint of a seeded image folder (interleaved, batched) resumes where it stopped, in
/// a fresh dataset indexed again.
#[test]
fn a_seeded_image_folder_resumes_from_its_checkpoint() {
    let build = || {
        Dataset::image_folder(
            tree(),
            ImageFolderSpec {
                image_size: [3, 2],
                seed: Some(1337),
                ..ImageFolderSpec::default()
            },
        )
        .unwrap()
        .interleave(InterleaveSpec::new(3))
    };
    let file = |e: &Element| e.provenance().unwrap().file.to_string();
    let all: Vec<String> = build().collect().unwrap().iter().map(file).collect();
    assert_eq!(all.len(), 13);
    let mut it = build().iter().unwrap();
    let head: Vec<String> = it.by_ref().take(5).map(|e| file(&e.unwrap())).collect();
    let checkpoint =
        sluice_core::Checkpoint::from_json(&it.checkpoint().unwrap().to_json()).unwrap();
    drop(it);
    let tail: Vec<String> = build()
        .resume(&checkpoint)
        .unwrap()
        .map(|e| file(&e.unwrap()))
        .collect();
    assert_eq!(head, all[..5]);
    assert_eq!(tail, all[5..]);
}

/// Labels given as a list: one per image of the whole directory in sorted path order (as
/// Keras: the hidden folder too), class names their sorted values as text.
#[test]
fn a_list_of_labels() {
    let files = case("no_labels")["subsets"][0]["file_paths"]
        .as_array()
        .unwrap()
        .len();
    let labels: Vec<i64> = (0..files as i64).map(|i| i % 2 * 5).collect();
    let spec = ImageFolderSpec {
        labels: Labels::List(labels.clone()),
        shuffle: false,
        image_size: [2, 2],
        ..ImageFolderSpec::default()
    };
    let index = spec.index(tree()).unwrap();
    assert_eq!(
        index.class_names,
        Some(vec!["0".to_string(), "5".to_string()])
    );
    assert!(relative(&index.file_paths).contains(&".hidden/h.png".to_string()));
    let got: Vec<i64> = Dataset::image_folder(tree(), spec)
        .unwrap()
        .collect()
        .unwrap()
        .iter()
        .map(|e| match e.tensor("label").unwrap().data() {
            TensorData::I32(v) => i64::from(v[0]),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(got, labels);
    let wrong = ImageFolderSpec {
        labels: Labels::List(vec![0, 1]),
        ..ImageFolderSpec::default()
    };
    let err = Dataset::image_folder(tree(), wrong).unwrap_err();
    assert!(err.to_string().contains("2 labels"), "{err}");
}
