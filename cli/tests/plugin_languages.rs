//! `sluice plugin new --lang LANG NAME`, then `sluice plugin build NAME`, then `sluice plugin
//! check` on what it printed last, then a pipeline with the plugin (`sluice run`), for
//! every plugin language: what proves a plugin author can start from nothing. Each
//! template's own test (in its language's test tool) runs too.
//!
//! The toolchains are installed by `.ci/run` (cargo's wasm32 target; clang, lld, wasi-libc
//! from Debian; componentize-py and ziglang from PyPI; componentize-js from npm, named by
//! SLUICE_COMPONENTIZE_JS); a missing one fails the test naming the package to install.

use std::path::{Path, PathBuf};
use std::process::Command as Std;

use assert_cmd::Command;
use serde_json::Value;

fn sluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
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

/// Runs the template's own test command in `dir`; it must pass.
fn own_test(dir: &Path, program: &str, args: &[&str]) {
    let out = Std::new(program)
        .args(args)
        .current_dir(dir)
        // The outer cargo's target directory and flags are not the template's.
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} (install it): {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} in {}:\n{}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The output shards of a pipeline through the plugin `built` (`p`: its probability) on
/// `data`, written as `tag`, and what `sluice run` printed on stderr.
fn pipeline_output(
    lang: &str,
    work: &Path,
    data: &Path,
    built: &Path,
    p: f64,
    tag: &str,
) -> (Vec<Vec<u8>>, String) {
    let text = format!(
        r#"name = "template_{lang}"
[source]
dir = "{}"
files = ["train.tfrecord-*"]
[options]
seed = 7
[[stage]]
kind = "parse_example"
features."image/encoded" = {{ dtype = "string" }}
[[stage]]
kind = "image_ops"
input = "image/encoded"
output = "image"
ops = [{{ op = "decode", channels = 3 }}]
[[stage]]
kind = "plugin"
path = "{}"
config = {{ threshold = 100, p = {p} }}
chunk_size = 4
[[stage]]
kind = "batch"
batch_size = 3
"#,
        data.display(),
        built.display()
    );
    let file = work.join(format!("{lang}-{tag}.toml"));
    std::fs::write(&file, text).unwrap();
    let out = work.join(format!("out-{lang}-{tag}"));
    let (code, stdout, stderr) = run(sluice()
        .env_remove("SLUICE_LOG")
        .arg("run")
        .arg(&file)
        .arg("--output")
        .arg(&out)
        .args(["--shards", "1", "--json"]));
    assert_eq!(code, 0, "sluice run with the {lang} template:\n{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["elements"], 6, "{stdout}");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let shards = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    (shards, stderr)
}

/// new, build, check and run a pipeline with the template of `lang`; returns its dir.
fn new_build_check_run(lang: &str, work: &Path) -> PathBuf {
    let dir = new_template(lang, work);
    build_check_run(lang, work, &dir);
    dir
}

/// `sluice plugin new` of the template of `lang` in `work`; returns its dir.
fn new_template(lang: &str, work: &Path) -> PathBuf {
    let name = format!("my-{lang}-plug");
    let (code, stdout, stderr) = run(sluice()
        .current_dir(work)
        .args(["plugin", "new", "--lang", lang, &name]));
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(&format!("sluice plugin build {name}")),
        "{stdout}"
    );
    let dir = work.join(&name);
    assert!(dir.join("sluice-plugin.toml").is_file());
    dir
}

/// build and check the project `dir` of `lang`, and run pipelines with it; returns the
/// stderr of the first `sluice run`.
fn build_check_run(lang: &str, work: &Path, dir: &Path) -> String {
    let name = dir.file_name().unwrap().to_str().unwrap();
    let (code, stdout, stderr) = run(sluice().current_dir(work).args(["plugin", "build", name]));
    assert_eq!(code, 0, "sluice plugin build {name}:\n{stderr}");
    let built = PathBuf::from(stdout.lines().last().expect("a last line").trim());
    let built = if built.is_absolute() {
        built
    } else {
        work.join(built)
    };
    assert!(built.is_file(), "{}", built.display());
    assert_eq!(built.extension().unwrap(), "wasm");

    let (code, stdout, stderr) = run(sluice().args(["plugin", "check"]).arg(&built));
    assert_eq!(
        code,
        0,
        "sluice plugin check {}:\n{stdout}\n{stderr}",
        built.display()
    );

    // A pipeline: `sluice gen` images, decoded to u8, through the plugin, batched; twice,
    // the same bytes; the plugin changes them (against p = 0).
    let data = work.join(format!("data-{lang}"));
    let (code, _, stderr) = run(sluice().args(["gen", "--out"]).arg(&data).args([
        "--images", "6", "--size", "32", "--shards", "1", "--seed", "0",
    ]));
    assert_eq!(code, 0, "{stderr}");
    let (a, stderr) = pipeline_output(lang, work, &data, &built, 0.5, "a");
    assert_eq!(
        a,
        pipeline_output(lang, work, &data, &built, 0.5, "b").0,
        "the same seed, the same bytes"
    );
    assert_ne!(
        a,
        pipeline_output(lang, work, &data, &built, 0.0, "plain").0,
        "the plugin changes the images"
    );
    stderr
}

#[test]
fn a_rust_template_builds_checks_and_runs() {
    let work = tempfile::tempdir().unwrap();
    // Inside another Cargo workspace (as in this repository): the template is its own.
    std::fs::write(
        work.path().join("Cargo.toml"),
        "[workspace]\nmembers = []\n",
    )
    .unwrap();
    let dir = new_build_check_run("rust", work.path());
    own_test(&dir, "cargo", &["test", "--quiet"]);
}

#[test]
fn a_c_template_builds_checks_and_runs() {
    let work = tempfile::tempdir().unwrap();
    let dir = new_build_check_run("c", work.path());
    own_test(
        &dir,
        "cc",
        &[
            "-O2",
            "-o",
            "test_transform",
            "test_transform.c",
            "transform.c",
        ],
    );
    own_test(&dir, "./test_transform", &[]);
}

#[test]
fn a_python_template_builds_checks_and_runs() {
    let work = tempfile::tempdir().unwrap();
    let dir = new_template("python", work.path());
    // What the plugin prints reaches `sluice run`'s stderr (the CLI's log, SLUICE_LOG unset).
    let file = dir.join("map_element.py");
    let text = std::fs::read_to_string(&file).unwrap();
    let create = "        try:\n            return cls(*parse_config(config))";
    assert!(text.contains(create), "{text}");
    let text = text.replace(
        create,
        &format!("        print(\"hello from create\")\n{create}"),
    );
    std::fs::write(&file, text).unwrap();
    let stderr = build_check_run("python", work.path(), &dir);
    assert!(
        stderr.contains("sluice::plugin: hello from create"),
        "{stderr}"
    );
    own_test(&dir, "python3", &["-m", "unittest", "-q"]);
}

#[test]
fn a_js_template_builds_checks_and_runs() {
    let work = tempfile::tempdir().unwrap();
    let dir = new_build_check_run("js", work.path());
    own_test(&dir, "node", &["--test"]);
}

#[test]
fn a_zig_template_builds_checks_and_runs() {
    let work = tempfile::tempdir().unwrap();
    let dir = new_build_check_run("zig", work.path());
    own_test(&dir, &zig(), &["test", "transform.zig"]);
}

/// The zig the build uses: $SLUICE_ZIG, else `zig`, else PyPI's `python-zig` on PATH.
fn zig() -> String {
    if let Some(zig) = std::env::var_os("SLUICE_ZIG") {
        return zig.to_string_lossy().into_owned();
    }
    let on_path = |name: &str| {
        std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
            .unwrap_or(false)
    };
    if on_path("zig") { "zig" } else { "python-zig" }.to_string()
}

#[test]
fn a_missing_toolchain_names_the_package_to_install_and_bad_input_is_refused() {
    let work = tempfile::tempdir().unwrap();
    let (code, _, stderr) = run(sluice()
        .current_dir(work.path())
        .args(["plugin", "new", "--lang", "cobol", "x"]));
    assert_ne!(code, 0);
    assert!(
        stderr.contains("unknown plugin language `cobol`"),
        "{stderr}"
    );
    let (code, _, _) = run(sluice()
        .current_dir(work.path())
        .args(["plugin", "new", "--lang", "python", "nopy"]));
    assert_eq!(code, 0);
    let (code, _, stderr) = run(sluice()
        .current_dir(work.path())
        .env("SLUICE_COMPONENTIZE_PY", work.path().join("nowhere"))
        .args(["plugin", "build", "nopy"]));
    assert_ne!(code, 0);
    assert!(stderr.contains("pip install componentize-py"), "{stderr}");
    let (code, _, _) = run(sluice()
        .current_dir(work.path())
        .args(["plugin", "new", "--lang", "js", "nojs"]));
    assert_eq!(code, 0);
    let (code, _, stderr) = run(sluice()
        .current_dir(work.path())
        .env("SLUICE_COMPONENTIZE_JS", work.path().join("nowhere"))
        .args(["plugin", "build", "nojs"]));
    assert_ne!(code, 0);
    assert!(
        stderr.contains("npm install --save-dev @bytecodealliance/componentize-js@0.23.0"),
        "{stderr}"
    );
    assert!(stderr.contains("set SLUICE_COMPONENTIZE_JS"), "{stderr}");
    let (code, _, stderr) = run(sluice()
        .current_dir(work.path())
        .args(["plugin", "build", "missing"]));
    assert_ne!(code, 0);
    assert!(stderr.contains("not a plugin project"), "{stderr}");
}
