//! `sluice run` with plugin stages: `examples/pipelines/plugin_noise.toml` on `sluice gen`
//! data with the example `gaussian_noise` plugin, a config the plugin refuses, and a
//! missing plugin file.
//!
//! The plugin is the cdylib cargo builds for this test's dev-dependency
//! `sluice-example-noise`, in this test binary's directory (`target/debug/deps`);
//! `--plugin-dir` points the example file's `target/release/...` path there.

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

const IMAGES: usize = 8;

fn sluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
}

fn example_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/pipelines")
        .join(name)
}

/// Where cargo put the example plugin's library: this test binary's directory.
fn plugin_dir() -> PathBuf {
    let dir = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let file = format!(
        "{}sluice_example_noise{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    assert!(
        dir.join(&file).exists(),
        "{file} is missing from {}: cargo builds it as a dev-dependency of sluice-cli",
        dir.display()
    );
    dir
}

/// (exit code, stdout, stderr)
fn run(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).expect("UTF-8"),
        String::from_utf8(out.stderr).expect("UTF-8"),
    )
}

/// A `sluice gen` dataset of 8 images of 224x224 in a new temporary directory.
fn gen_data() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, stderr) = run(sluice()
        .args(["gen", "--out"])
        .arg(dir.path())
        .args(["--images", &IMAGES.to_string()])
        .args([
            "--size",
            "224",
            "--shards",
            "2",
            "--classes",
            "2",
            "--seed",
            "0",
        ]));
    assert_eq!(code, 0, "{stderr}");
    dir
}

/// The bytes of every output shard of `sluice run PIPELINE --output DIR`.
fn output_of(pipeline: &Path, data: &Path, out: &Path) -> Vec<Vec<u8>> {
    let (code, _, stderr) = run(sluice()
        .arg("run")
        .arg(pipeline)
        .arg("--data")
        .arg(data)
        .arg("--plugin-dir")
        .arg(plugin_dir())
        .arg("--output")
        .arg(out)
        .args(["--shards", "1"]));
    assert_eq!(code, 0, "{stderr}");
    let mut names: Vec<PathBuf> = fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    names.iter().map(|p| fs::read(p).unwrap()).collect()
}

#[test]
fn the_plugin_example_runs_with_the_noise_plugin() {
    let data = gen_data();
    let (code, stdout, stderr) = run(sluice()
        .arg("run")
        .arg(example_file("plugin_noise.toml"))
        .arg("--data")
        .arg(data.path())
        .arg("--plugin-dir")
        .arg(plugin_dir())
        .arg("--json"));
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["pipeline"], "plugin_noise");
    assert_eq!(v["elements"], IMAGES as u64);
    assert_eq!(v["batches"], 1);
    let names: Vec<&str> = v["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"plugin:gaussian_noise"), "{names:?}");

    // The noise is reproducible from the seed, and it is there: the same pipeline without
    // the plugin (gen_augment.toml, the same stages and seed) writes other values.
    let work = tempfile::tempdir().unwrap();
    let plugin = example_file("plugin_noise.toml");
    let a = output_of(&plugin, data.path(), &work.path().join("a"));
    let b = output_of(&plugin, data.path(), &work.path().join("b"));
    assert_eq!(a, b, "same seed, same output");
    let plain = output_of(
        &example_file("gen_augment.toml"),
        data.path(),
        &work.path().join("plain"),
    );
    assert_eq!(plain.len(), a.len());
    assert_ne!(plain, a, "the plugin changed nothing");
}

#[test]
fn a_config_the_plugin_refuses_fails_before_running() {
    let data = gen_data();
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("bad_config.toml");
    let text = fs::read_to_string(example_file("plugin_noise.toml")).unwrap();
    assert!(text.contains("config = { sigma = 0.2, p = 0.8 }"));
    fs::write(
        &file,
        text.replace(
            "config = { sigma = 0.2, p = 0.8 }",
            "config = { sigma = 0.2, strength = 3 }",
        ),
    )
    .unwrap();
    let (code, stdout, stderr) = run(sluice()
        .arg("run")
        .arg(&file)
        .arg("--data")
        .arg(data.path())
        .arg("--plugin-dir")
        .arg(plugin_dir())
        .arg("--json"));
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(stdout, "");
    assert!(stderr.starts_with("sluice: stage 4 (plugin "), "{stderr}");
    assert!(
        stderr.contains("plugin gaussian_noise: init failed"),
        "{stderr}"
    );
    assert!(stderr.contains("unknown key \"strength\""), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn a_missing_plugin_file_is_named() {
    let data = gen_data();
    let empty = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = run(sluice()
        .arg("run")
        .arg(example_file("plugin_noise.toml"))
        .arg("--data")
        .arg(data.path())
        .arg("--plugin-dir")
        .arg(empty.path()));
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(stdout, "");
    let expected = empty.path().join(format!(
        "{}sluice_example_noise{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    assert!(
        stderr.contains(&format!(
            "{}: cannot load the plugin: no such file",
            expected.display()
        )),
        "{stderr}"
    );
}
