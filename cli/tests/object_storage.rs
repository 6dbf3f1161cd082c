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
