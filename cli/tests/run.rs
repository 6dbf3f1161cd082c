//! `sluice run` on small generated JPEG shards: the report, `--json`, `--take`, `--output`
//! read back, and bad pipeline files and data.

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;
use sluice_proto::TfMessage;
use sluice_proto::example::{BytesList, Example, Feature, Features, Int64List, feature::Kind};
use sluice_proto::tfrecord::{Compression, TfRecordWriter};

const SHARDS: usize = 4;
const PER_SHARD: usize = 4;
const RECORDS: usize = SHARDS * PER_SHARD;

fn sluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
}

fn example_file(name: &str) -> String {
    format!(
        "{}/../examples/pipelines/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn jpeg(size: u32, seed: u32) -> Vec<u8> {
    let mut pixels = Vec::with_capacity((size * size * 3) as usize);
    for y in 0..size {
        for x in 0..size {
            pixels.extend([
                ((x * 3 + seed * 17) % 256) as u8,
                ((y * 2 + seed * 29) % 256) as u8,
                (((x + y) / 2 + seed * 7) % 256) as u8,
            ]);
        }
    }
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 90)
        .encode(&pixels, size, size, image::ExtendedColorType::Rgb8)
        .expect("encodes");
    out
}

/// `train.tfrecord-0000s-of-00004` shards of Examples with `image` (a 232x232 JPEG) and
/// `label` (0..16) in a new temporary directory; with `broken`, record 5 is not an image.
fn data(broken: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for s in 0..SHARDS {
        let path = dir
            .path()
            .join(format!("train.tfrecord-{s:05}-of-{SHARDS:05}"));
        let mut w = TfRecordWriter::create(&path, Compression::None).unwrap();
        for k in 0..PER_SHARD {
            let i = s * PER_SHARD + k;
            let image = if broken && i == 5 {
                b"garbage".to_vec()
            } else {
                jpeg(232, i as u32)
            };
            let mut features = Features::default();
            features.feature.insert(
                "image".into(),
                Feature {
                    kind: Some(Kind::BytesList(BytesList {
                        value: vec![image.into()],
                    })),
                },
            );
            features.feature.insert(
                "label".into(),
                Feature {
                    kind: Some(Kind::Int64List(Int64List {
                        value: vec![i as i64],
                    })),
                },
            );
            let ex = Example {
                features: Some(features),
            };
            w.write_record(&ex.to_bytes()).unwrap();
        }
        w.finish().unwrap();
    }
    dir
}

/// Writes a pipeline file reading `train.tfrecord-*` under `data` and returns its path.
fn pipeline(dir: &Path, name: &str, data: &Path, stages: &str) -> PathBuf {
    let path = dir.join(name);
    let text = format!(
        "[source]\ndir = {:?}\nfiles = [\"train.tfrecord-*\"]\n\n[options]\nseed = 1\n\n{stages}",
        data.display().to_string()
    );
    fs::write(&path, text).unwrap();
    path
}

const PARSE: &str = "[[stage]]\nkind = \"parse_example\"\nfeatures.image = { dtype = \"string\" }\nfeatures.label = { dtype = \"int64\" }\n";

/// (exit code, stdout, stderr)
fn run(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).expect("UTF-8"),
        String::from_utf8(out.stderr).expect("UTF-8"),
    )
}

#[test]
fn the_augment_example_runs_and_reports_stages_and_the_bottleneck() {
    let data = data(false);
    let (code, stdout, stderr) = run(sluice()
        .arg("run")
        .arg(example_file("augment.toml"))
        .arg("--data")
        .arg(data.path()));
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.starts_with("pipeline augment ("),
        "first line names the pipeline: {stdout}"
    );
    for stage in [
        "files",
        "interleave",
        "parse_example",
        "image_ops",
        "batch",
        "prefetch",
    ] {
        assert!(stdout.contains(stage), "{stage} in the table: {stdout}");
    }
    assert!(stdout.contains("busy%"), "{stdout}");
    assert!(stdout.contains("wait up"), "{stdout}");
    assert!(stdout.contains("\nbottleneck: #"), "{stdout}");
    assert!(
        stdout.contains(&format!("total: {RECORDS} elements in 1 batch,")),
        "{stdout}"
    );
    // Not a terminal: no progress bar.
    assert_eq!(stderr, "");
}

#[test]
fn json_prints_exactly_one_object_with_the_counts_and_stages() {
    let data = data(false);
    let (code, stdout, stderr) = run(sluice()
        .arg("run")
        .arg(example_file("read.toml"))
        .args(["--json", "--epochs", "2", "--data"])
        .arg(data.path()));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    // read.toml: repeat 10, batch 256: one batch of 160 rows per epoch.
    assert_eq!(v["elements"], (RECORDS * 10 * 2) as u64);
    assert_eq!(v["batches"], 2);
    assert_eq!(v["epochs"], 2);
    assert_eq!(v["skipped"], 0);
    assert_eq!(v["pipeline"], "read");
    let seconds = v["seconds"].as_f64().unwrap();
    assert!(seconds > 0.0);
    let rate = v["elements_per_s"].as_f64().unwrap();
    assert!((rate - 320.0 / seconds).abs() < 1e-6 * rate, "{v}");
    let stages = v["stages"].as_array().unwrap();
    let names: Vec<&str> = stages.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["files", "interleave", "repeat", "batch"]);
    let batch = &stages[3];
    assert_eq!(batch["elements_in"], 320);
    assert_eq!(batch["elements_out"], 2);
    for key in [
        "busy_fraction",
        "wait_upstream_seconds",
        "wait_downstream_seconds",
    ] {
        assert!(batch[key].is_number(), "{key}: {batch}");
    }
    assert!(v["bottleneck"].is_string() || v["bottleneck"].is_null());
    assert!(v["output"].is_null());
}

#[test]
fn explain_prints_both_plans_and_the_rules_without_running() {
    let data = data(false);
    let (code, stdout, stderr) = run(sluice()
        .arg("run")
        .arg(example_file("augment.toml"))
        .arg("--explain")
        .arg("--data")
        .arg(data.path()));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("plan as written:\n"), "{stdout}");
    for rule in [
        "files_to_interleave (at interleave)",
        "map_and_batch_fusion (at batch)",
    ] {
        assert!(stdout.contains(rule), "{rule}: {stdout}");
    }
    // The plan that runs numbers its stages as stats and errors name them.
    let runs = &stdout[stdout.find("plan that runs").unwrap()..];
    assert!(runs.contains("#1 interleave"), "{runs}");
    assert!(runs.contains("#0 files"), "{runs}");
    // Nothing ran: no report.
    assert!(!stdout.contains("bottleneck"), "{stdout}");
}

#[test]
fn take_stops_after_n_elements() {
    let data = data(false);
    let work = tempfile::tempdir().unwrap();
    let file = pipeline(work.path(), "p.toml", data.path(), PARSE);
    let (code, stdout, stderr) = run(sluice()
        .arg("run")
        .arg(&file)
        .args(["--take", "5", "--json"]));
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["elements"], 5);
    assert_eq!(v["batches"], 0, "not batched");
}

#[test]
fn output_writes_shards_of_examples_that_read_back() {
    let data = data(false);
    let work = tempfile::tempdir().unwrap();
    let stages = format!(
        "{PARSE}\n[[stage]]\nkind = \"image_ops\"\nops = [{{ op = \"decode\", channels = 3 }}, {{ op = \"resize\", height = 4, width = 2, method = \"nearest\" }}]\n\n[[stage]]\nkind = \"batch\"\nbatch_size = 5\n"
    );
    let file = pipeline(work.path(), "prep.toml", data.path(), &stages);
    let out = work.path().join("prepared");
    let (code, stdout, stderr) = run(sluice()
        .arg("run")
        .arg(&file)
        .arg("--output")
        .arg(&out)
        .args(["--shards", "3"]));
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(&format!(
            "wrote {RECORDS} records to {} in 3 shards",
            out.display()
        )),
        "{stdout}"
    );
    let mut names: Vec<String> = fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "part.tfrecord-00000-of-00003",
            "part.tfrecord-00001-of-00003",
            "part.tfrecord-00002-of-00003"
        ]
    );

    // `sluice cat` reads every shard back as Examples: the batches were split into rows.
    let shards: Vec<PathBuf> = names.iter().map(|n| out.join(n)).collect();
    let (code, stdout, stderr) = run(sluice().arg("cat").args(&shards));
    assert_eq!(code, 0, "{stderr}");
    let rows: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), RECORDS);
    let mut labels: Vec<i64> = rows
        .iter()
        .map(|r| {
            let f = &r["features"]["feature"];
            // u8 pixels (nearest resize keeps the dtype) as a flat int64 list of 4*2*3 values.
            assert_eq!(
                f["image"]["int64List"]["value"].as_array().unwrap().len(),
                24
            );
            f["label"]["int64List"]["value"][0]
                .as_str()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    labels.sort();
    assert_eq!(labels, (0..RECORDS as i64).collect::<Vec<_>>());

    // And a pipeline reads them with the shape restored by a fixed_len feature.
    let back = work.path().join("back.toml");
    fs::write(
        &back,
        format!(
            "[source]\ndir = {:?}\nfiles = \"part.tfrecord-*\"\n\n[[stage]]\nkind = \"parse_example\"\nfeatures.image = {{ dtype = \"int64\", shape = [4, 2, 3] }}\nfeatures.label = {{ dtype = \"int64\" }}\n\n[[stage]]\nkind = \"batch\"\nbatch_size = 100\n",
            out.display().to_string()
        ),
    )
    .unwrap();
    let (code, stdout, stderr) = run(sluice().arg("run").arg(&back).arg("--json"));
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["elements"], RECORDS as u64);
}

#[test]
fn output_compresses_shards_as_tfrecord_writer_does() {
    let data = data(false);
    let work = tempfile::tempdir().unwrap();
    let file = pipeline(work.path(), "prep.toml", data.path(), PARSE);
    for (compression, magic) in [("gzip", &[0x1f, 0x8b][..]), ("zlib", &[0x78][..])] {
        let out = work.path().join(compression);
        let (code, stdout, stderr) = run(sluice()
            .arg("run")
            .arg(&file)
            .arg("--output")
            .arg(&out)
            .args(["--shards", "2", "--compression", compression, "--json"]));
        assert_eq!(code, 0, "{stderr}");
        let v: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(v["output"]["compression"], compression);
        assert_eq!(v["output"]["records"], RECORDS as u64);
        let shards: Vec<PathBuf> = (0..2)
            .map(|i| out.join(format!("part.tfrecord-{i:05}-of-00002")))
            .collect();
        for shard in &shards {
            let bytes = fs::read(shard).unwrap();
            assert!(
                bytes.starts_with(magic),
                "{compression}: {:x?}",
                &bytes[..4]
            );
        }
        // Read back, compression detected: every record, each label once.
        let (code, stdout, stderr) = run(sluice().arg("cat").args(&shards));
        assert_eq!(code, 0, "{stderr}");
        let mut labels: Vec<i64> = stdout
            .lines()
            .map(|l| {
                let r: Value = serde_json::from_str(l).unwrap();
                r["features"]["feature"]["label"]["int64List"]["value"][0]
                    .as_str()
                    .unwrap()
                    .parse()
                    .unwrap()
            })
            .collect();
        labels.sort();
        assert_eq!(labels, (0..RECORDS as i64).collect::<Vec<_>>());
    }
    let (code, _, stderr) = run(sluice()
        .arg("run")
        .arg(&file)
        .arg("--output")
        .arg(work.path().join("x"))
        .args(["--compression", "auto"]));
    assert_eq!(code, 2);
    assert!(stderr.contains("expected none, gzip or zlib"), "{stderr}");
}

#[test]
fn malformed_toml_is_reported_with_line_and_column() {
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("bad.toml");
    fs::write(&file, "[source]\nfiles = [\"a\", \n[[stage]]\n").unwrap();
    let (code, stdout, stderr) = run(sluice().arg("run").arg(&file));
    assert_eq!(code, 1);
    assert_eq!(stdout, "");
    let prefix = format!("sluice: {}:3:", file.display());
    assert!(stderr.starts_with(&prefix), "{stderr}");
}

#[test]
fn a_misspelt_key_gets_its_line_and_the_closest_key() {
    let data = data(false);
    let work = tempfile::tempdir().unwrap();
    let file = pipeline(
        work.path(),
        "typo.toml",
        data.path(),
        "[[stage]]\nkind = \"batch\"\nbatchsize = 64\n",
    );
    let (code, _, stderr) = run(sluice().arg("run").arg(&file));
    assert_eq!(code, 1);
    let expected = format!(
        "sluice: {}:10:1: stage 1 (batch): unknown field `batchsize`, expected one of `batch_size`, `drop_remainder`, `num_parallel`, `deterministic`; did you mean `batch_size`?\n",
        file.display()
    );
    assert_eq!(stderr, expected);
}

#[test]
fn an_impossible_value_is_rejected_before_running() {
    let data = data(false);
    let work = tempfile::tempdir().unwrap();
    let file = pipeline(
        work.path(),
        "p.toml",
        data.path(),
        &format!(
            "{PARSE}[[stage]]\nkind = \"image_ops\"\nops = [{{ op = \"decode\" }}, {{ op = \"random_flip_left_right\", p = 2.0 }}]\n"
        ),
    );
    let (code, stdout, stderr) = run(sluice().arg("run").arg(&file).arg("--json"));
    assert_eq!(code, 1);
    assert_eq!(stdout, "");
    assert!(
        stderr.contains(&format!("{}:14:64: ", file.display())),
        "{stderr}"
    );
    assert!(stderr.contains("within [0, 1], got 2"), "{stderr}");
}

#[test]
fn missing_data_files_and_a_missing_pipeline_file_fail() {
    let empty = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = run(sluice()
        .arg("run")
        .arg(example_file("augment.toml"))
        .arg("--data")
        .arg(empty.path()));
    assert_eq!(code, 1);
    assert_eq!(stdout, "");
    assert!(stderr.contains("no file matches the pattern"), "{stderr}");
    assert!(stderr.contains("train.tfrecord-*"), "{stderr}");

    let (code, _, stderr) = run(sluice().arg("run").arg(empty.path().join("none.toml")));
    assert_eq!(code, 1);
    assert!(stderr.contains("none.toml"), "{stderr}");
}

#[test]
fn a_failing_element_names_its_stage_and_file_unless_skipped() {
    let data = data(true);
    let work = tempfile::tempdir().unwrap();
    let stages = format!(
        "{PARSE}\n[[stage]]\nkind = \"image_ops\"\nops = [{{ op = \"decode\", channels = 3 }}]\n"
    );
    let file = pipeline(work.path(), "p.toml", data.path(), &stages);
    let (code, stdout, stderr) = run(sluice().arg("run").arg(&file).arg("--json"));
    assert_eq!(code, 1);
    assert_eq!(stdout, "");
    assert!(stderr.contains("image_ops#"), "{stderr}");
    assert!(stderr.contains("train.tfrecord-00001-of-00004"), "{stderr}");

    let text = fs::read_to_string(&file)
        .unwrap()
        .replace("seed = 1", "seed = 1\nerror_policy = \"skip\"");
    fs::write(&file, text).unwrap();
    let (code, stdout, stderr) = run(sluice().arg("run").arg(&file).arg("--json"));
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["elements"], (RECORDS - 1) as u64);
    assert_eq!(v["skipped"], 1);
}

#[test]
fn shards_without_output_is_a_usage_error() {
    let (code, _, stderr) = run(sluice().args(["run", "p.toml", "--shards", "2"]));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--output"), "{stderr}");
}

/// A shuffling, augmenting, batching pipeline with `threads` image workers.
fn augmenting(threads: &str) -> String {
    format!(
        "{PARSE}
[[stage]]
kind = \"shuffle\"
buffer_size = 7

[[stage]]
kind = \"image_ops\"
num_parallel = {threads}
ops = [
  {{ op = \"decode\", channels = 3 }},
  {{ op = \"random_crop\", height = 64, width = 64 }},
  {{ op = \"random_flip_left_right\", p = 0.5 }},
  {{ op = \"random_brightness\", max_delta = 0.1 }},
]

[[stage]]
kind = \"batch\"
batch_size = 3

[[stage]]
kind = \"prefetch\"
buffer_size = \"auto\"
"
    )
}

#[test]
fn a_run_stopped_with_a_checkpoint_resumes_with_exactly_the_rest() {
    let data = data(false);
    let work = tempfile::tempdir().unwrap();
    let one = pipeline(work.path(), "one.toml", data.path(), &augmenting("1"));
    // Other thread counts do not change the elements: the checkpoint fits both files.
    let two = pipeline(work.path(), "two.toml", data.path(), &augmenting("2"));
    let all = work.path().join("all.txt");
    let (code, _, stderr) = run(sluice()
        .arg("run")
        .arg(&one)
        .args(["--epochs", "3", "--digests"])
        .arg(&all));
    assert_eq!(code, 0, "{stderr}");
    let expected = fs::read_to_string(&all).unwrap();
    // 16 records in batches of 3: 6 batches per epoch.
    assert_eq!(expected.lines().count(), 18);

    let ckpt = work.path().join("run.ckpt");
    let part = work.path().join("part.txt");
    // Stop in the second epoch, mid-shuffle.
    let (code, _, stderr) = run(sluice()
        .arg("run")
        .arg(&one)
        .args(["--epochs", "3", "--stop-after", "8", "--checkpoint"])
        .arg(&ckpt)
        .arg("--digests")
        .arg(&part));
    assert_eq!(code, 130, "{stderr}");
    assert!(stderr.contains("--resume"), "{stderr}");
    let saved: Value = serde_json::from_str(&fs::read_to_string(&ckpt).unwrap()).unwrap();
    assert_eq!(saved["epoch_index"], 1);
    assert_eq!(saved["taken"], 8);
    assert_eq!(saved["checkpoint"]["position"], 2);
    assert_eq!(fs::read_to_string(&part).unwrap().lines().count(), 8);

    let (code, stdout, stderr) = run(sluice()
        .arg("run")
        .arg(&two)
        .args(["--epochs", "3", "--json", "--resume"])
        .arg(&ckpt)
        .arg("--digests")
        .arg(&part));
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["batches"], 18, "the whole run's batches");
    assert_eq!(fs::read_to_string(&part).unwrap(), expected);
}

#[test]
fn a_checkpoint_of_another_pipeline_is_refused() {
    let data = data(false);
    let work = tempfile::tempdir().unwrap();
    let file = pipeline(work.path(), "p.toml", data.path(), &augmenting("1"));
    let ckpt = work.path().join("run.ckpt");
    let (code, _, stderr) = run(sluice()
        .arg("run")
        .arg(&file)
        .args(["--stop-after", "1", "--checkpoint"])
        .arg(&ckpt));
    assert_eq!(code, 130, "{stderr}");
    let other = pipeline(work.path(), "q.toml", data.path(), PARSE);
    let (code, _, stderr) = run(sluice().arg("run").arg(&other).arg("--resume").arg(&ckpt));
    assert_eq!(code, 1);
    assert!(stderr.contains("another pipeline"), "{stderr}");
    // And checkpoints do not mix with --output (shards cannot be appended to).
    let (code, _, stderr) = run(sluice()
        .arg("run")
        .arg(&file)
        .arg("--resume")
        .arg(&ckpt)
        .arg("--output")
        .arg(work.path()));
    assert_eq!(code, 2, "{stderr}");
}

#[cfg(unix)]
#[test]
fn ctrl_c_writes_a_checkpoint_and_stops() {
    let data = data(false);
    let work = tempfile::tempdir().unwrap();
    let file = pipeline(work.path(), "p.toml", data.path(), &augmenting("1"));
    let ckpt = work.path().join("run.ckpt");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("run")
        .arg(&file)
        .args(["--epochs", "1000000", "--checkpoint"])
        .arg(&ckpt)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Let it run past an epoch or two, then interrupt it as a terminal would.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !ckpt.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("checkpoint written to"), "{stderr}");
    let saved: Value = serde_json::from_str(&fs::read_to_string(&ckpt).unwrap()).unwrap();
    assert!(saved["taken"].as_u64().unwrap() >= 6, "{saved}");
}
