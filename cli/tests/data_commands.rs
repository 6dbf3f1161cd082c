//! `sluice gen` and `sluice convert`: the datasets they write, read back with the TFRecord
//! reader, `sluice verify` and `sluice cat`.

use std::collections::BTreeMap;
use std::fs;
use std::io::Cursor;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use image::{DynamicImage, GrayImage, ImageFormat, RgbImage};
use sluice_proto::example::{Feature, feature::Kind};
use sluice_proto::tfrecord::{ReaderOptions, TfRecordReader};
use sluice_proto::{Example, TfMessage};

fn sluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
}

/// Runs `sluice` and returns (exit code, stdout, stderr).
fn run(args: &[&str]) -> (i32, String, String) {
    let output = sluice().args(args).output().expect("sluice runs");
    let stdout = String::from_utf8(output.stdout).expect("UTF-8 stdout");
    let stderr = String::from_utf8(output.stderr).expect("UTF-8 stderr");
    assert!(!stderr.contains("panicked"), "{stderr}");
    (output.status.code().expect("exit code"), stdout, stderr)
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("UTF-8 temp path")
}

/// The features of each record of a TFRecord file, in order.
fn read_examples(path: &Path) -> Vec<BTreeMap<String, Feature>> {
    let name = path.display().to_string();
    TfRecordReader::open(path, ReaderOptions::default())
        .expect("shard opens")
        .map(|record| {
            let record = record.expect("record reads");
            let example = Example::from_record(name.as_str(), &record).expect("an Example");
            example.features.expect("features").feature
        })
        .collect()
}

fn bytes_value(features: &BTreeMap<String, Feature>, key: &str) -> Vec<u8> {
    match &features[key].kind {
        Some(Kind::BytesList(list)) => {
            assert_eq!(list.value.len(), 1, "{key}");
            list.value[0].to_vec()
        }
        other => panic!("{key}: not bytes: {other:?}"),
    }
}

fn text_value(features: &BTreeMap<String, Feature>, key: &str) -> String {
    String::from_utf8(bytes_value(features, key)).expect("UTF-8 feature")
}

fn int_value(features: &BTreeMap<String, Feature>, key: &str) -> i64 {
    match &features[key].kind {
        Some(Kind::Int64List(list)) => {
            assert_eq!(list.value.len(), 1, "{key}");
            list.value[0]
        }
        other => panic!("{key}: not int64: {other:?}"),
    }
}

/// The names of the files in `dir`, sorted.
fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("output folder exists")
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

const FEATURES: [&str; 7] = [
    "image/class/label",
    "image/class/text",
    "image/encoded",
    "image/filename",
    "image/format",
    "image/height",
    "image/width",
];

#[test]
fn gen_writes_shards_of_labelled_jpegs_that_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("data");
    let (code, stdout, stderr) = run(&[
        "gen",
        "--out",
        path_str(&out),
        "--images",
        "10",
        "--size",
        "40",
        "--shards",
        "3",
        "--classes",
        "4",
        "--seed",
        "5",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");

    let shards = [
        "train.tfrecord-00000-of-00003",
        "train.tfrecord-00001-of-00003",
        "train.tfrecord-00002-of-00003",
    ];
    let mut expected_files = vec!["labels.txt".to_string()];
    expected_files.extend(shards.map(String::from));
    assert_eq!(file_names(&out), expected_files);
    let labels = fs::read_to_string(out.join("labels.txt")).unwrap();
    assert_eq!(labels, "class_0\nclass_1\nclass_2\nclass_3\n");
    let classes: Vec<&str> = labels.lines().collect();

    // The summary line: files, records, bytes.
    let total_bytes: u64 = shards
        .iter()
        .map(|s| fs::metadata(out.join(s)).unwrap().len())
        .sum();
    assert!(
        stdout.contains(&format!("3 files, 10 records, {total_bytes} bytes")),
        "{stdout}"
    );
    assert_eq!(stdout.lines().count(), 1, "{stdout}");

    // Round-robin: image i is in shard i % 3, at position i / 3.
    let per_shard: Vec<_> = shards.iter().map(|s| read_examples(&out.join(s))).collect();
    assert_eq!(
        per_shard.iter().map(Vec::len).collect::<Vec<_>>(),
        [4, 3, 3]
    );
    let mut labels_seen = Vec::new();
    for index in 0..10 {
        let features = &per_shard[index % 3][index / 3];
        assert_eq!(
            features.keys().map(String::as_str).collect::<Vec<_>>(),
            FEATURES
        );
        let label = int_value(features, "image/class/label");
        assert!((0..4).contains(&label), "{label}");
        labels_seen.push(label);
        let class = classes[label as usize];
        assert_eq!(text_value(features, "image/class/text"), class);
        assert_eq!(text_value(features, "image/format"), "jpeg");
        assert_eq!(
            text_value(features, "image/filename"),
            format!("{class}/{index:05}.jpg")
        );
        assert_eq!(int_value(features, "image/height"), 40);
        assert_eq!(int_value(features, "image/width"), 40);
        let jpeg = bytes_value(features, "image/encoded");
        assert_eq!(image::guess_format(&jpeg).unwrap(), ImageFormat::Jpeg);
        let decoded = image::load_from_memory(&jpeg).expect("the JPEG decodes");
        assert_eq!((decoded.width(), decoded.height()), (40, 40));
        assert_eq!(decoded.color().channel_count(), 3);
        // Not a flat image: the pixels vary.
        let rgb = decoded.to_rgb8();
        let first = rgb.get_pixel(0, 0);
        assert!(rgb.pixels().any(|p| p != first));
    }
    // Labels are drawn, not all alike.
    labels_seen.dedup();
    assert!(labels_seen.len() > 1, "{labels_seen:?}");

    // `sluice verify` and `sluice cat` read the shards.
    let pattern = out.join("train.tfrecord-*");
    let (code, stdout, stderr) = run(&["verify", path_str(&pattern)]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("3 files, 0 damaged, 10 records"),
        "{stdout}"
    );
    let (code, stdout, stderr) = run(&["cat", path_str(&out.join(shards[1]))]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.lines().count(), 3);
    assert!(stdout.contains(r#""image/height":{"int64List":{"value":["40"]}}"#));
}

/// Generates a small dataset into `dir` with `seed`; the bytes of each file, by name.
fn gen_files(dir: &Path, seed: &str) -> BTreeMap<String, Vec<u8>> {
    let (code, _, stderr) = run(&[
        "gen",
        "--out",
        path_str(dir),
        "--images",
        "12",
        "--size",
        "32",
        "--shards",
        "2",
        "--seed",
        seed,
        "--name",
        "val",
    ]);
    assert_eq!(code, 0, "{stderr}");
    file_names(dir)
        .into_iter()
        .map(|name| {
            let data = fs::read(dir.join(&name)).unwrap();
            (name, data)
        })
        .collect()
}

#[test]
fn gen_is_deterministic_per_seed() {
    let dir = tempfile::tempdir().unwrap();
    let first = gen_files(&dir.path().join("a"), "7");
    let again = gen_files(&dir.path().join("b"), "7");
    let other = gen_files(&dir.path().join("c"), "8");
    let names: Vec<&str> = first.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "labels.txt",
            "val.tfrecord-00000-of-00002",
            "val.tfrecord-00001-of-00002"
        ]
    );
    assert!(first.values().all(|data| !data.is_empty()));
    assert_eq!(first, again, "same seed, same bytes");
    for name in ["val.tfrecord-00000-of-00002", "val.tfrecord-00001-of-00002"] {
        assert_ne!(
            first[name], other[name],
            "{name}: another seed, other images"
        );
    }
    // The same seed with one worker thread gives the same bytes as with several.
    let single = dir.path().join("d");
    let output = sluice()
        .env("RAYON_NUM_THREADS", "1")
        .args(["gen", "--out", path_str(&single), "--images", "12"])
        .args([
            "--size", "32", "--shards", "2", "--seed", "7", "--name", "val",
        ])
        .output()
        .unwrap();
    assert!(output.status.success());
    for (name, data) in &first {
        assert_eq!(&fs::read(single.join(name)).unwrap(), data, "{name}");
    }
}

#[test]
fn gen_refuses_bad_options() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x");
    for (args, message) in [
        (&["--shards", "0"][..], "--shards"),
        (&["--images", "0"][..], "--images"),
        (&["--size", "4"][..], "--size"),
        (&["--classes", "0"][..], "--classes"),
    ] {
        let (code, _, stderr) = run(&[&["gen", "--out", path_str(&out)][..], args].concat());
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
    let (code, _, stderr) = run(&["gen", "--out", path_str(&out), "--name", "a/b"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("--name \"a/b\""), "{stderr}");
    assert!(!out.exists(), "nothing written");
}

fn png(image: DynamicImage) -> Vec<u8> {
    let mut data = Vec::new();
    image
        .write_to(&mut Cursor::new(&mut data), ImageFormat::Png)
        .unwrap();
    data
}

fn jpeg(image: RgbImage) -> Vec<u8> {
    let mut data = Vec::new();
    DynamicImage::ImageRgb8(image)
        .write_to(&mut Cursor::new(&mut data), ImageFormat::Jpeg)
        .unwrap();
    data
}

fn gradient(width: u32, height: u32) -> RgbImage {
    RgbImage::from_fn(width, height, |x, y| {
        image::Rgb([(x * 7) as u8, (y * 5) as u8, ((x + y) * 3) as u8])
    })
}

/// An image folder with three classes, five good images (JPEG, PNG, grey PNG, a PNG named
/// `.jpg`, one in a nested folder), a truncated JPEG, a text file and hidden entries.
/// Returns the good images as (relative path, label, class, height, width, format).
fn image_folder(root: &Path) -> Vec<(&'static str, i64, &'static str, i64, i64, &'static str)> {
    let write = |relative: &str, data: &[u8]| {
        let path = root.join(relative);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, data).unwrap();
    };
    write("cat/a.png", &png(DynamicImage::ImageRgb8(gradient(20, 10))));
    write("cat/b.jpg", &jpeg(gradient(16, 24)));
    write(
        "cat/sub/c.png",
        &png(DynamicImage::ImageRgb8(gradient(9, 7))),
    );
    // Headers intact, the scan data cut short.
    let full = jpeg(gradient(32, 32));
    write("dog/broken.jpg", &full[..full.len() - 40]);
    write(
        "dog/disguised.jpg",
        &png(DynamicImage::ImageRgb8(gradient(5, 6))),
    );
    write("dog/notes.txt", b"not an image\n");
    write("dog/x.jpeg", &jpeg(gradient(30, 20)));
    let grey = GrayImage::from_fn(11, 13, |x, y| image::Luma([(x * y) as u8]));
    write("zebra/y.PNG", &png(DynamicImage::ImageLuma8(grey)));
    write(
        ".cache/ignored.png",
        &png(DynamicImage::ImageRgb8(gradient(4, 4))),
    );
    write("zebra/.DS_Store", b"\0\0\0\x01Bud1");
    vec![
        ("cat/a.png", 0, "cat", 10, 20, "png"),
        ("cat/b.jpg", 0, "cat", 24, 16, "jpeg"),
        ("cat/sub/c.png", 0, "cat", 7, 9, "png"),
        ("dog/disguised.jpg", 1, "dog", 6, 5, "png"),
        ("dog/x.jpeg", 1, "dog", 20, 30, "jpeg"),
        ("zebra/y.PNG", 2, "zebra", 13, 11, "png"),
    ]
}

#[test]
fn convert_writes_labelled_examples_with_the_original_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let images = dir.path().join("images");
    let good = image_folder(&images);
    let out = dir.path().join("out");
    let (code, stdout, stderr) = run(&[
        "convert",
        path_str(&images),
        "--out",
        path_str(&out),
        "--shards",
        "2",
    ]);
    assert_eq!(code, 0, "{stderr}");

    // The two bad files are reported with their paths and reasons, and counted.
    let broken = images.join("dog/broken.jpg");
    let notes = images.join("dog/notes.txt");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 3, "{stderr}");
    assert!(
        lines[0].starts_with(&format!(
            "sluice convert: skipped {}: does not decode:",
            broken.display()
        )),
        "{stderr}"
    );
    assert_eq!(
        lines[1],
        format!(
            "sluice convert: skipped {}: not a .jpg, .jpeg or .png file",
            notes.display()
        )
    );
    assert_eq!(lines[2], "sluice convert: skipped 2 unreadable images");

    let shards = [
        "train.tfrecord-00000-of-00002",
        "train.tfrecord-00001-of-00002",
    ];
    assert_eq!(
        file_names(&out),
        ["labels.txt", shards[0], shards[1]].map(String::from)
    );
    assert_eq!(
        fs::read_to_string(out.join("labels.txt")).unwrap(),
        "cat\ndog\nzebra\n"
    );
    let total_bytes: u64 = shards
        .iter()
        .map(|s| fs::metadata(out.join(s)).unwrap().len())
        .sum();
    assert!(
        stdout.contains(&format!("2 files, 6 records, {total_bytes} bytes")),
        "{stdout}"
    );

    // Round-robin in order: classes sorted, files sorted.
    let per_shard: Vec<_> = shards.iter().map(|s| read_examples(&out.join(s))).collect();
    assert_eq!(per_shard[0].len(), 3);
    assert_eq!(per_shard[1].len(), 3);
    for (i, (relative, label, class, height, width, format)) in good.into_iter().enumerate() {
        let features = &per_shard[i % 2][i / 2];
        assert_eq!(
            features.keys().map(String::as_str).collect::<Vec<_>>(),
            FEATURES
        );
        assert_eq!(text_value(features, "image/filename"), relative);
        assert_eq!(
            int_value(features, "image/class/label"),
            label,
            "{relative}"
        );
        assert_eq!(
            text_value(features, "image/class/text"),
            class,
            "{relative}"
        );
        assert_eq!(int_value(features, "image/height"), height, "{relative}");
        assert_eq!(int_value(features, "image/width"), width, "{relative}");
        assert_eq!(text_value(features, "image/format"), format, "{relative}");
        assert_eq!(
            bytes_value(features, "image/encoded"),
            fs::read(images.join(relative)).unwrap(),
            "{relative}: the file's bytes, not re-encoded"
        );
    }
}

#[test]
fn convert_strict_fails_on_a_skipped_file_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let images = dir.path().join("images");
    image_folder(&images);
    let out = dir.path().join("out");
    let (code, stdout, stderr) = run(&[
        "convert",
        path_str(&images),
        "--out",
        path_str(&out),
        "--strict",
    ]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains(&images.join("dog/broken.jpg").display().to_string()),
        "{stderr}"
    );
    assert!(
        stderr.contains(&images.join("dog/notes.txt").display().to_string()),
        "{stderr}"
    );
    assert!(
        stderr.contains("--strict: 2 files skipped (listed above); nothing written"),
        "{stderr}"
    );
    assert_eq!(file_names(&out), Vec::<String>::new());

    // Without the bad files, --strict succeeds.
    fs::remove_file(images.join("dog/broken.jpg")).unwrap();
    fs::remove_file(images.join("dog/notes.txt")).unwrap();
    let (code, stdout, stderr) = run(&[
        "convert",
        path_str(&images),
        "--out",
        path_str(&out),
        "--strict",
        "--shards",
        "1",
        "--name",
        "val",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
    assert!(stdout.contains("1 file, 6 records"), "{stdout}");
    let examples = read_examples(&out.join("val.tfrecord-00000-of-00001"));
    assert_eq!(examples.len(), 6);
}

#[test]
fn convert_refuses_missing_empty_and_imageless_folders() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let out_arg = path_str(&out).to_string();

    let missing = dir.path().join("missing");
    let (code, _, stderr) = run(&["convert", path_str(&missing), "--out", &out_arg]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains(&format!(
            "cannot read the image folder {}",
            missing.display()
        )),
        "{stderr}"
    );

    let empty = dir.path().join("empty");
    fs::create_dir(&empty).unwrap();
    let (code, _, stderr) = run(&["convert", path_str(&empty), "--out", &out_arg]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains(&format!("{}: no class folders", empty.display())),
        "{stderr}"
    );

    // Files but no class folders.
    let flat = dir.path().join("flat");
    fs::create_dir(&flat).unwrap();
    fs::write(
        flat.join("a.png"),
        png(DynamicImage::ImageRgb8(gradient(4, 4))),
    )
    .unwrap();
    let (code, _, stderr) = run(&["convert", path_str(&flat), "--out", &out_arg]);
    assert_eq!(code, 1);
    assert!(stderr.contains("no class folders"), "{stderr}");

    // Class folders holding nothing readable.
    let bad = dir.path().join("bad");
    fs::create_dir_all(bad.join("only")).unwrap();
    fs::write(bad.join("only/zero.jpg"), b"").unwrap();
    let (code, _, stderr) = run(&["convert", path_str(&bad), "--out", &out_arg]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains(&format!(
            "skipped {}: empty file, not an image",
            bad.join("only/zero.jpg").display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("{}: no readable images", bad.display())),
        "{stderr}"
    );
    assert!(!out.exists(), "nothing written");
}

#[test]
fn gen_and_convert_write_the_same_features() {
    let dir = tempfile::tempdir().unwrap();
    let generated = dir.path().join("gen");
    gen_files(&generated, "1");
    let images = dir.path().join("images");
    image_folder(&images);
    let converted: PathBuf = dir.path().join("convert");
    let (code, _, stderr) = run(&[
        "convert",
        path_str(&images),
        "--out",
        path_str(&converted),
        "--shards",
        "1",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let a = read_examples(&generated.join("val.tfrecord-00000-of-00002"));
    let b = read_examples(&converted.join("train.tfrecord-00000-of-00001"));
    for features in a.iter().chain(&b) {
        assert_eq!(
            features.keys().map(String::as_str).collect::<Vec<_>>(),
            FEATURES
        );
    }
}

/// `sluice cat --format`: CSV, text lines and fixed-length records as JSON lines, options
/// as `-o KEY=VALUE`; a bad row ends the output with an error naming the file and line.
#[test]
fn cat_prints_any_source_format_as_json_lines() {
    let formats =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/formats");
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "cat",
            "--format",
            "csv",
            "-o",
            "header=true",
            "-o",
            "na_value=NA",
        ])
        .args(["-o", "record_defaults=[0, 0.0, \"?\", 0]"])
        .arg(formats.join("basic.csv"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5);
    assert_eq!(
        lines[0],
        serde_json::json!({"id": 1, "score": 0.5, "name": "Smith, John", "count": 7})
    );
    assert_eq!(lines[3]["name"], "?");

    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["cat", "--format", "text_lines", "--limit", "2"])
        .arg(formats.join("lines.txt"))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "{\"line\":\"first line\"}\n{\"line\":\"second\"}\n"
    );

    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "cat",
            "--format",
            "csv",
            "-o",
            "record_defaults=[\"int64\", 0.0]",
        ])
        .arg(formats.join("badtype.csv"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 1);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("badtype.csv") && err.contains("line 2, column 0"),
        "{err}"
    );
}

#[test]
fn tfds_list_info_and_cat_read_a_tfds_data_dir() {
    let data_dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tfds/DATA_DIR");
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(args)
            .output()
            .unwrap()
    };
    let dir = data_dir.to_str().unwrap();
    let out = run(&["tfds", "list", dir]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "toy  1.0.0 1.1.0\n");

    let out = run(&["tfds", "info", "toy:1.0.*", "--data-dir", dir]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("toy 1.0.0\n"), "{text}");
    assert!(text.contains("train: 50 examples in 2 shard(s)"), "{text}");
    assert!(
        text.contains("label: ClassLabel int64 [] names: cat, dog, bird"),
        "{text}"
    );
    assert!(text.contains("supervised keys: (image, label)"), "{text}");
    let out = run(&["tfds", "info", "toy", "--data-dir", dir, "--json"]);
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(info["version"], "1.1.0");
    assert_eq!(
        info["splits"][1]["shard_lengths"],
        serde_json::json!([6, 6])
    );

    let out = run(&["tfds", "info", "toy:9.*.*", "--data-dir", dir]);
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("9.*.*") && err.contains("1.0.0, 1.1.0"),
        "{err}"
    );

    let data_dir_opt = format!("data_dir={dir:?}");
    let out = run(&[
        "cat",
        "--format",
        "tfds",
        "-o",
        "name=toy",
        "-o",
        "split=test[-2:]",
        "-o",
        &data_dir_opt,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    let keys: Vec<&String> = lines[0].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
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
    assert_eq!(lines[0]["image"][0][0].as_array().unwrap().len(), 3);

    let out = run(&[
        "cat",
        "--format",
        "tfds",
        "-o",
        "name=toy",
        "-o",
        "split=dev",
        "-o",
        &data_dir_opt,
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("\"dev\"") && err.contains("train, test"),
        "{err}"
    );
    let out = run(&["cat"]);
    assert_eq!(out.status.code(), Some(2));
}

/// `sluice cat --format numpy | parquet | arrow`: the rows as JSON lines; columns projected
/// with `-o columns=[...]`; a null is an error naming the file, row and column unless
/// `-o null_value=...` is given.
#[test]
fn cat_prints_numpy_parquet_and_arrow_rows() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/columnar");
    let cat = |args: &[&str], file: &str| {
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("cat")
            .args(args)
            .arg(dir.join(file))
            .output()
            .unwrap()
    };
    let lines = |out: &std::process::Output| -> Vec<serde_json::Value> {
        String::from_utf8(out.stdout.clone())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let out = cat(&["--format", "numpy"], "fortran_i64_3d.npy");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = lines(&out);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1]["value"][2], serde_json::json!([20, 21, 22, 23]));

    let out = cat(
        &[
            "--format",
            "parquet",
            "-o",
            "columns=[\"id\", \"tokens\"]",
            "--limit",
            "3",
        ],
        "table_snappy.parquet",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        lines(&out)[2],
        serde_json::json!({"id": 2, "tokens": [0, 1]})
    );

    let out = cat(
        &["--format", "arrow", "-o", "columns=[\"label\"]"],
        "table.stream.arrow",
    );
    assert!(!out.status.success());
    assert_eq!(lines(&out).len(), 4);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("table.stream.arrow") && err.contains("row 4") && err.contains("`label`"),
        "{err}"
    );
    let out = cat(
        &[
            "--format",
            "arrow",
            "-o",
            "columns=[\"label\"]",
            "-o",
            "null_value=-1",
        ],
        "table.stream.arrow",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(lines(&out)[4], serde_json::json!({"label": -1}));
}

#[test]
fn cat_reads_an_image_folder() {
    let tree = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/image_folder/tree");
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "cat",
            "--format",
            "image_folder",
            "-o",
            "image_size=[2,3]",
            "-o",
            "shuffle=false",
        ])
        .args([
            "-o",
            "label_mode=categorical",
            "-o",
            "class_names=[\"dog\", \"cat\"]",
            "--limit",
            "6",
        ])
        .arg(&tree)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 6);
    // dog/d1..d5 first (class_names' order), then cat/c1.
    assert_eq!(lines[0]["label"], serde_json::json!([1.0, 0.0]));
    assert_eq!(lines[5]["label"], serde_json::json!([0.0, 1.0]));
    let image = lines[0]["image"].as_array().unwrap();
    assert_eq!((image.len(), image[0].as_array().unwrap().len()), (2, 3));

    // Two directories: refused.
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["cat", "--format", "image_folder"])
        .arg(&tree)
        .arg(&tree)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("one directory"));
}

#[test]
fn cat_reads_a_sql_query() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shop.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE items (id INTEGER, price REAL, name TEXT);
         INSERT INTO items VALUES (1, 9.5, 'tea'), (2, NULL, 'cup'), (3, 1.25, 'pot');",
    )
    .unwrap();
    drop(conn);
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "cat",
            "--format",
            "sql",
            "-o",
            "query=\"SELECT * FROM items ORDER BY id\"",
        ])
        .args(["-o", "null_defaults={price = 0.0}"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "{\"id\":1,\"name\":\"tea\",\"price\":9.5}\n{\"id\":2,\"name\":\"cup\",\"price\":0.0}\n\
         {\"id\":3,\"name\":\"pot\",\"price\":1.25}\n"
    );
    // Without the default: the NULL's row and column.
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "cat",
            "--format",
            "sql",
            "-o",
            "query=\"SELECT * FROM items ORDER BY id\"",
        ])
        .arg(&db)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("row 1, column \"price\""), "{err}");
}
