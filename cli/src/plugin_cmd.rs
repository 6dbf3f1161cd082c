//! `sluice plugin check PLUGIN`: property checks of a native or WASM plugin against its own
//! declared contract (see `sluice_plugin_check`). `sluice plugin new --lang LANG NAME` and
//! `sluice plugin build DIR`: a template project in any of the plugin languages, built with
//! that language's own toolchain (see `sluice_plugin_build`).

use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use sluice_plugin_check::{CheckOptions, Outcome, check, render};

/// Plugin tools.
#[derive(Debug, Args)]
pub(crate) struct PluginArgs {
    #[command(subcommand)]
    command: PluginCommand,
}

#[derive(Debug, Subcommand)]
enum PluginCommand {
    Check(CheckArgs),
    New(NewArgs),
    Build(BuildArgs),
}

/// Write a template plugin project in NAME/ (a working transform, its WIT files, a
/// manifest, a README and a test in the language's own test tool).
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  sluice plugin new --lang python myplug && sluice plugin build myplug
  sluice plugin new --lang c myplug --dir plugins/myplug

Languages: rust (cargo, wit-bindgen), c (clang, wasi-libc), python (componentize-py),
js (componentize-js), zig (zig from PyPI's ziglang). See sdk/LANGUAGES.md.")]
struct NewArgs {
    /// The language: rust, c, python, js or zig.
    #[arg(long)]
    lang: String,
    /// The plugin's name (letters, digits, `_`, `-`); the project's directory unless --dir.
    name: String,
    /// Where to write the project (default: ./NAME).
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// Build a plugin project with its language's own toolchain; prints the built
/// component's path on the last line.
#[derive(Debug, Args)]
#[command(after_help = "\
Toolchains are looked up in $SLUICE_CLANG, $SLUICE_ZIG, $SLUICE_COMPONENTIZE_PY,
$SLUICE_COMPONENTIZE_JS, $SLUICE_NODE, $SLUICE_CARGO (a path) first, then on PATH (zig
also as python-zig), then in a JavaScript project's node_modules/.bin. Nothing is
installed: a missing toolchain is an error naming the package to install.")]
struct BuildArgs {
    /// The project's directory (with its sluice-plugin.toml).
    dir: PathBuf,
    /// Where the component goes (default: DIR/build).
    #[arg(long)]
    out_dir: Option<PathBuf>,
    /// Build even when the component is newer than every source.
    #[arg(long)]
    force: bool,
}

/// Check a plugin (native library or WASM module) against its declared contract.
#[derive(Debug, Args)]
#[command(
    long_about = "\
Checks a plugin against its own declared contract with generated elements (proptest, fixed \
seed): it accepts every call that meets its declared inputs; it is deterministic (same \
elements and seeds, same bits, also on a fresh instance); an element's output does not \
depend on its neighbours (except for `batch` plugins); its outputs carry the declared \
features; no call exceeds the time limit (WASM: also the memory cap); damaged batch buffers \
get an error status, never a success or a crash (for native plugins this runs in a child \
process, so a crash is reported, not suffered); with --other, the other build (native vs \
WASM) gives the same bits.

Prints one line per check and exits 1 when one fails, with the minimal failing case (shrunk) \
as Rust code to paste into a test.",
    after_help = "\
Examples:
  sluice plugin check target/release/libsluice_example_noise.so --config noise.json
  sluice plugin check target/wasm-guests/wasm32-unknown-unknown/release/sluice_example_noise.wasm \\
      --other target/release/libsluice_example_noise.so --cases 200"
)]
struct CheckArgs {
    /// The plugin: .so / .dylib / .dll (native) or .wasm / .wat.
    plugin: PathBuf,
    /// The plugin's configuration: a JSON file holding an object (default `{}`).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Generated cases per check.
    #[arg(long, value_name = "N", default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    cases: u32,
    /// Seed of the generator (the same seed checks the same cases).
    #[arg(long, value_name = "S", default_value_t = 0)]
    seed: u64,
    /// The other build of the same plugin (native vs WASM), compared bit for bit.
    #[arg(long, value_name = "PLUGIN")]
    other: Option<PathBuf>,
    /// Most milliseconds one call may take.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    time_ms: u64,
    /// WASM memory cap per instance, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = sluice_plugins::wasm::DEFAULT_MEMORY_BYTES)]
    memory: u64,
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    json: bool,
    /// Internal: run only the malformed-input check (the child process of a native check).
    #[arg(long, hide = true)]
    malformed_only: bool,
}

/// Runs `sluice plugin ...`.
fn run_new(a: &NewArgs) -> Result<ExitCode> {
    let language: sluice_plugin_build::Language = a.lang.parse()?;
    let dir = a.dir.clone().unwrap_or_else(|| PathBuf::from(&a.name));
    sluice_plugin_build::new_project(language, &a.name, &dir)?;
    println!(
        "wrote a {language} plugin project in {0}: build it with `sluice plugin build {0}`",
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn run_build(a: &BuildArgs) -> Result<ExitCode> {
    let project = sluice_plugin_build::Project::open(&a.dir)?;
    let options = sluice_plugin_build::BuildOptions {
        out_dir: a.out_dir.clone(),
        force: a.force,
    };
    eprintln!(
        "building {} ({}, {})",
        project.name(),
        project.language(),
        project.manifest.plugin.world
    );
    let built = sluice_plugin_build::build(&project, &options)?;
    if !built.rebuilt {
        eprintln!("up to date (--force rebuilds)");
    }
    println!("{}", built.path.display());
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn run(args: &PluginArgs) -> Result<ExitCode> {
    match &args.command {
        PluginCommand::Check(a) => run_check(a),
        PluginCommand::New(a) => run_new(a),
        PluginCommand::Build(a) => run_build(a),
    }
}

fn run_check(a: &CheckArgs) -> Result<ExitCode> {
    let config = match &a.config {
        None => serde_json::json!({}),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?
        }
    };
    let native = !a
        .plugin
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("wasm") || e.eq_ignore_ascii_case("wat"));
    let mut options = CheckOptions {
        config,
        cases: a.cases,
        seed: a.seed,
        time_limit: Duration::from_millis(a.time_ms),
        memory_bytes: a.memory,
        other: a.other.clone(),
        // A native plugin that crashes on garbage would take this process with it.
        malformed: !native || a.malformed_only,
    };
    if a.malformed_only {
        options.cases = 1;
    }
    let mut report = check(&a.plugin, &options)?;
    if a.malformed_only {
        let malformed = report
            .checks
            .iter()
            .find(|c| c.check == "malformed_input")
            .map(|c| c.outcome.clone())
            .expect("the malformed-input check ran");
        println!("{}", serde_json::to_string(&malformed)?);
        return Ok(ExitCode::SUCCESS);
    }
    if native {
        let outcome = malformed_in_child(a)?;
        if let Some(slot) = report
            .checks
            .iter_mut()
            .find(|c| c.check == "malformed_input")
        {
            slot.outcome = outcome;
        }
    }
    if a.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The malformed-input check of a native plugin, in a child process: a crash there is a
/// failed check.
fn malformed_in_child(a: &CheckArgs) -> Result<Outcome> {
    let exe = std::env::current_exe().context("cannot find the sluice executable")?;
    let mut cmd = Command::new(exe);
    cmd.args(["plugin", "check"])
        .arg(&a.plugin)
        .arg("--malformed-only");
    if let Some(config) = &a.config {
        cmd.arg("--config").arg(config);
    }
    let out = cmd.output().context("cannot run the child check")?;
    if !out.status.success() {
        return Ok(Outcome::Fail {
            message: format!(
                "the plugin crashed the process on malformed input ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            minimal_case: None,
        });
    }
    let line = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(line.trim()).context("the child check's answer")
}
