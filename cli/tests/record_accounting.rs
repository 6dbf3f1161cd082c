//! `sluice run` accounts for every record (issue 26): `--json`'s `records` and the report's
//! `records:` line, on data with damaged records under the skip policy, a filter and a
//! batch that drops its remainder.

use std::fs;
use std::process::Command;

use serde_json::Value;
use sluice_proto::TfMessage;
use sluice_proto::example::{BytesList, Example, Feature, Features, Int64List, feature::Kind};
use sluice_proto::tfrecord::{Compression, TfRecordWriter};

/// 40 records with `id` 0..40; ids 7 and 23 are strings (`parse_example` fails on them).
fn data(dir: &std::path::Path) {
    let mut w = TfRecordWriter::create(dir.join("data.tfrecord"), Compression::None).unwrap();
    for i in 0..40i64 {
        let kind = if i == 7 || i == 23 {
            Kind::BytesList(BytesList {
                value: vec![b"x".to_vec().into()],
            })
        } else {
            Kind::Int64List(Int64List { value: vec![i] })
        };
        let mut features = Features::default();
        features
            .feature
            .insert("id".into(), Feature { kind: Some(kind) });
        w.write_record(
            &Example {
                features: Some(features),
            }
            .to_bytes(),
        )
        .unwrap();
    }
    w.finish().unwrap();
}

fn pipeline(dir: &std::path::Path, stages: &str) -> std::path::PathBuf {
    let path = dir.join("p.toml");
    fs::write(
        &path,
        format!(
            "[source]\ndir = {:?}\nfiles = [\"data.tfrecord\"]\n\n[options]\nseed = 1\n\
             error_policy = \"skip\"\n\n[[stage]]\nkind = \"parse_example\"\n\
             features.id = {{ dtype = \"int64\" }}\n\n{stages}",
            dir.display().to_string()
        ),
    )
    .unwrap();
    path
}

fn sluice(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

const STAGES: &str = "[[stage]]\nkind = \"filter\"\nfeature = \"id\"\nnot_in = [0, 10, 20, 30]\n\n\
[[stage]]\nkind = \"shuffle\"\nbuffer_size = 8\n\n\
[[stage]]\nkind = \"batch\"\nbatch_size = 5\ndrop_remainder = true\n";

#[test]
fn run_json_and_report_account_for_every_record() {
    let dir = tempfile::tempdir().unwrap();
    data(dir.path());
    let p = pipeline(dir.path(), STAGES);
    // 40 read: 2 skipped, 4 filtered, 34 left: 6 batches of 5, 4 dropped.
    let (code, stdout, stderr) = sluice(&[
        "run".as_ref(),
        p.as_os_str(),
        "--epochs".as_ref(),
        "2".as_ref(),
        "--json".as_ref(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let r = &v["records"];
    assert_eq!(r["read"], 80, "{r}");
    assert_eq!(r["delivered"], 60, "{r}");
    assert_eq!(r["skipped"], 4, "{r}");
    assert_eq!(r["filtered"], 8, "{r}");
    assert_eq!(r["dropped"], 8, "{r}");
    assert_eq!(r["unfinished"], 0, "{r}");
    assert_eq!(v["elements"], 60);

    let (code, stdout, stderr) = sluice(&["run".as_ref(), p.as_os_str()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("records: 40 read = 30 delivered + 2 skipped + 4 filtered + 4 dropped\n"),
        "{stdout}"
    );
}

#[test]
fn a_run_stopped_early_shows_its_unfinished_records_and_take_none() {
    let dir = tempfile::tempdir().unwrap();
    data(dir.path());
    let p = pipeline(dir.path(), STAGES);
    let (code, stdout, stderr) = sluice(&[
        "run".as_ref(),
        p.as_os_str(),
        "--take".as_ref(),
        "2".as_ref(),
        "--json".as_ref(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let r = &v["records"];
    assert_eq!(r["delivered"], 10, "{r}");
    let sum: u64 = ["delivered", "skipped", "filtered", "dropped", "unfinished"]
        .iter()
        .map(|k| r[k].as_u64().unwrap())
        .sum();
    assert_eq!(r["read"].as_u64().unwrap(), sum, "{r}");
    assert!(r["unfinished"].as_u64().unwrap() > 0, "{r}");

    // A `take` stage: records are not followed, and the report says nothing of them.
    let p = pipeline(dir.path(), "[[stage]]\nkind = \"take\"\ncount = 5\n");
    let (code, stdout, stderr) = sluice(&["run".as_ref(), p.as_os_str(), "--json".as_ref()]);
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["records"], Value::Null);
    assert_eq!(v["elements"], 5);
}
