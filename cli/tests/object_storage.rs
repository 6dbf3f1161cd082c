//! `sluice cat`, `verify` and `run` on `s3://` URLs give what they give on the local files:
//! the fixtures uploaded to a real S3-compatible server (moto on 127.0.0.1, see
//! `sluice_storage::testing`), reached the way users reach S3-compatible stores
//! (`AWS_ENDPOINT_URL` and credentials in the environment).

use assert_cmd::Command;
use sluice_storage::testing::s3_server;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tfrecord");

fn sluice() -> Command {
    let mut cmd = Command::cargo_bin("sluice").unwrap();
    for (k, v) in s3_server().env() {
        cmd.env(k, v);
    }
    cmd
}

fn bucket(name: &str) {
    s3_server().upload_dir(name, std::path::Path::new(FIXTURES), "data");
}

fn stdout(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn cat_of_a_url_equals_cat_of_the_file() {
    bucket("cli-cat");
    for name in [
        "examples.tfrecord",
        "examples.tfrecord.gz",
        "examples.tfrecord.zlib",
    ] {
        let remote = stdout(sluice().args(["cat", &format!("s3://cli-cat/data/{name}")]));
        let local = stdout(sluice().args(["cat", &format!("{FIXTURES}/{name}")]));
        assert_eq!(remote.lines().count(), 64, "{name}");
        assert_eq!(remote, local, "{name}");
    }
}

#[test]
fn verify_of_a_url_pattern_counts_every_record() {
    bucket("cli-verify");
    let out = stdout(sluice().args(["verify", "--json", "s3://cli-verify/data/images.tfrecord-*"]));
    let report: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    let text = report.to_string();
    assert!(text.contains("\"records\":32"), "{text}");
    for i in 0..4 {
        assert!(
            text.contains(&format!(
                "s3://cli-verify/data/images.tfrecord-0000{i}-of-00004"
            )),
            "{text}"
        );
    }
    // What was asked of the store is reported: every byte of the four objects, once.
    let store = &report["storage"]["s3://cli-verify"];
    assert_eq!(store["bytes_read"], report["bytes"], "{text}");
    assert!(
        store["requests"].as_u64().unwrap() >= 5,
        "a listing and 4 reads: {text}"
    );
    assert_eq!(store["retries"], 0, "{text}");
    // A damaged object is reported as the file would be, by URL and offset.
    let out = sluice()
        .args(["verify", "s3://cli-verify/data/corrupt_data_crc.tfrecord"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let all =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        all.contains("s3://cli-verify/data/corrupt_data_crc.tfrecord"),
        "{all}"
    );
    assert!(all.contains("268"), "{all}");
    // A pattern matching nothing is an error naming it.
    let out = sluice()
        .args(["verify", "s3://cli-verify/none-*"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("s3://cli-verify/none-*: no file matches")
    );
}

#[test]
fn run_with_data_at_a_url_gives_the_local_digests() {
    bucket("cli-run");
    let dir = tempfile::tempdir().unwrap();
    let pipeline = dir.path().join("p.toml");
    std::fs::write(
        &pipeline,
        r#"
[source]
files = ["images.tfrecord-*"]

[options]
seed = 5

[[stage]]
kind = "interleave"
cycle_length = 2

[[stage]]
kind = "parse_example"
features.image = { dtype = "string" }
features.label = { dtype = "int64" }

[[stage]]
kind = "image_ops"
ops = [{ op = "decode", channels = 3 }, { op = "resize", height = 16, width = 16 }]

[[stage]]
kind = "batch"
batch_size = 4
"#,
    )
    .unwrap();
    let digests = |data: &str, out: &str| {
        let out = dir.path().join(out);
        stdout(sluice().args([
            "run",
            pipeline.to_str().unwrap(),
            "--data",
            data,
            "--digests",
            out.to_str().unwrap(),
        ]));
        std::fs::read_to_string(out).unwrap()
    };
    let local = digests(FIXTURES, "local.txt");
    let remote = digests("s3://cli-run/data", "remote.txt");
    assert_eq!(local.lines().count(), 8);
    assert_eq!(remote, local);
}

/// The objects under `prefix` (a URL ending in `/`) and their bytes.
fn objects(prefix: &str) -> Vec<(String, Vec<u8>)> {
    let options = s3_server().options();
    match sluice_storage::expand(&format!("{prefix}*"), &options) {
        Ok(found) => found
            .iter()
            .map(|at| {
                let mut bytes = Vec::new();
                std::io::Read::read_to_end(
                    &mut sluice_storage::open(at, &options).unwrap(),
                    &mut bytes,
                )
                .unwrap();
                (at.display().rsplit('/').next().unwrap().to_string(), bytes)
            })
            .collect(),
        Err(sluice_storage::Error::NoMatch { .. }) => Vec::new(),
        Err(e) => panic!("{e}"),
    }
}

/// The files of a local folder and their bytes, sorted.
fn files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&path).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn gen_convert_and_run_write_to_urls_what_they_write_to_folders() {
    s3_server().create_bucket("cli-write");
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("gen");
    let gen_args = [
        "--images", "40", "--size", "32", "--shards", "3", "--seed", "7",
    ];
    stdout(
        sluice()
            .args(["gen", "--out", local.to_str().unwrap()])
            .args(gen_args),
    );
    let out = stdout(
        sluice()
            .args(["gen", "--out", "s3://cli-write/gen/"])
            .args(gen_args),
    );
    assert!(
        out.contains("s3://cli-write/gen/train.tfrecord-*-of-00003"),
        "{out}"
    );
    let written = objects("s3://cli-write/gen/");
    assert_eq!(written.len(), 4, "3 shards and labels.txt");
    assert_eq!(written, files(&local));

    // convert: an image folder to shards under a URL.
    let images = dir.path().join("images");
    for (class, n) in [("cat", 3u32), ("dog", 2)] {
        std::fs::create_dir_all(images.join(class)).unwrap();
        for i in 0..n {
            let image =
                image::RgbImage::from_fn(8 + i, 6, |x, y| image::Rgb([x as u8, y as u8, 9]));
            image
                .save(images.join(class).join(format!("{i}.png")))
                .unwrap();
        }
    }
    let converted = dir.path().join("converted");
    let images_arg = images.to_str().unwrap();
    stdout(sluice().args([
        "convert",
        images_arg,
        "--shards",
        "2",
        "--out",
        converted.to_str().unwrap(),
    ]));
    stdout(sluice().args([
        "convert",
        images_arg,
        "--shards",
        "2",
        "--out",
        "s3://cli-write/converted",
    ]));
    assert_eq!(objects("s3://cli-write/converted/"), files(&converted));

    // run --output: the pipeline's output as shards under a URL.
    let pipeline = dir.path().join("p.toml");
    std::fs::write(
        &pipeline,
        "[source]\nfiles = [\"examples.tfrecord\"]\n\n[[stage]]\nkind = \"take\"\ncount = 20\n",
    )
    .unwrap();
    let run_to = |output: &str| {
        stdout(sluice().args([
            "run",
            pipeline.to_str().unwrap(),
            "--data",
            FIXTURES,
            "--output",
            output,
            "--shards",
            "2",
        ]))
    };
    let local_out = dir.path().join("out");
    run_to(local_out.to_str().unwrap());
    run_to("s3://cli-write/out/");
    let remote = objects("s3://cli-write/out/");
    assert_eq!(remote.len(), 2);
    assert_eq!(remote, files(&local_out));
}

/// Starts `sluice gen` writing a large data set to `out`, and kills it while it writes.
fn gen_killed_midway(out: &str) {
    // Large enough to still be writing when killed.
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("sluice"))
        .args(["gen", "--out", out, "--images", "200000", "--size", "64"])
        .envs(s3_server().env())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(
        child.try_wait().unwrap().is_none(),
        "still writing when killed"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn a_killed_writer_leaves_no_object_under_a_final_name() {
    // Small parts are buffered, big ones uploaded in parts, none visible before the shard
    // is finished.
    s3_server().create_bucket("cli-kill");
    gen_killed_midway("s3://cli-kill/gen/");
    assert_eq!(objects("s3://cli-kill/gen/"), Vec::new());

    // The same for a local folder: no file under a shard's name.
    let dir = tempfile::tempdir().unwrap();
    gen_killed_midway(dir.path().to_str().unwrap());
    let names: Vec<String> = files(dir.path()).into_iter().map(|(n, _)| n).collect();
    assert!(names.iter().all(|n| n.starts_with('.')), "{names:?}");
}

#[test]
fn faults_between_sluice_and_the_store_change_nothing_but_the_retry_count() {
    bucket("cli-faults");
    let proxy = sluice_storage::testing::FaultProxy::start(&s3_server().endpoint);
    let through_proxy = || {
        let mut cmd = sluice();
        cmd.env("AWS_ENDPOINT_URL", proxy.endpoint());
        cmd
    };
    let pattern = "s3://cli-faults/data/images.tfrecord-*";
    let clean = stdout(sluice().args(["cat", pattern]));
    // Throttling, a server error, a body cut midway and a reset, with latency: `cat` gives
    // the same records, and `verify` counts the retries.
    proxy.latency(std::time::Duration::from_millis(5));
    proxy.fail_next(2, 503);
    proxy.reset_next(1);
    proxy.cut_next(1, 500);
    assert_eq!(stdout(through_proxy().args(["cat", pattern])), clean);
    assert_eq!(proxy.faults_injected(), 4);
    proxy.fail_next(3, 500);
    let out = stdout(through_proxy().args(["verify", "--json", pattern]));
    let report: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(report["records"], 32, "{report}");
    assert_eq!(
        report["storage"]["s3://cli-faults"]["retries"], 3,
        "{report}"
    );
    // A fault that outlasts the retries (2, set in the pipeline file): an error naming the
    // URL and offset, not fewer records.
    proxy.fail_always(503);
    let dir = tempfile::tempdir().unwrap();
    let pipeline = dir.path().join("p.toml");
    std::fs::write(
        &pipeline,
        format!("[source]\nfiles = [\"{pattern}\"]\n\n[source.storage]\nmax_retries = 2\n"),
    )
    .unwrap();
    let out = through_proxy()
        .args(["run", pipeline.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("s3://cli-faults/data/images.tfrecord-00000-of-00004"),
        "{stderr}"
    );
    assert!(stderr.contains("at byte 0"), "{stderr}");
    assert!(stderr.contains("after 3 attempt(s)"), "{stderr}");
}
