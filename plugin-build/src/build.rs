//! `sluice plugin build`: a plugin project built into a component with its language's own
//! toolchain.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use crate::bindings::{c_bindings, componentize};
use crate::error::{Error, io};
use crate::manifest::{Language, MANIFEST, Project};
use crate::toolchain::{self, CARGO, CLANG, COMPONENTIZE_JS, COMPONENTIZE_PY, NODE, ZIG, run};

/// How to build.
#[derive(Debug, Clone, Default)]
pub struct BuildOptions {
    /// Where the component and the build's intermediate files go (default: the project's
    /// `build/`).
    pub out_dir: Option<PathBuf>,
    /// Build even when the component is newer than every source.
    pub force: bool,
}

/// A built plugin.
#[derive(Debug, Clone)]
pub struct Built {
    /// The component.
    pub path: PathBuf,
    /// Whether it was built now (false: it was newer than every source).
    pub rebuilt: bool,
}

/// Directories of a project that hold no sources (outputs, caches, installed packages).
const SKIP: [&str; 9] = [
    "build",
    "target",
    "node_modules",
    "__pycache__",
    ".zig-cache",
    "zig-cache",
    "zig-out",
    ".venv",
    ".git",
];

/// JavaScript plugins are built without these WASI features of StarlingMonkey: no
/// randomness or clocks (nothing to make outputs depend on but the seed), no HTTP. Its
/// stdio (`console.log`) stays: the host's sandboxed WASI logs it.
pub const JS_DISABLED: [&str; 4] = ["random", "clocks", "http", "fetch-event"];

/// Builds `project` into `<out_dir>/<name>.wasm`, a component of its world. One build at a
/// time per output directory (a lock file); skipped when the component is newer than every
/// source and WIT file (unless [`BuildOptions::force`]).
pub fn build(project: &Project, options: &BuildOptions) -> Result<Built, Error> {
    let out_dir = options
        .out_dir
        .clone()
        .unwrap_or_else(|| project.dir.join("build"));
    std::fs::create_dir_all(&out_dir).map_err(io(&out_dir))?;
    let lock_path = out_dir.join(".lock");
    let lock = std::fs::File::create(&lock_path).map_err(io(&lock_path))?;
    lock.lock().map_err(io(&lock_path))?;
    let out = out_dir.join(format!("{}.wasm", project.name()));
    if !options.force && is_fresh(&out, project, &out_dir) {
        return Ok(Built {
            path: out,
            rebuilt: false,
        });
    }
    match project.language() {
        Language::Python => python(project, &out)?,
        Language::Js => js(project, &out)?,
        Language::C => c(project, &out_dir, &out)?,
        Language::Zig => zig(project, &out_dir, &out)?,
        Language::Rust => rust(project, &out)?,
    }
    drop(lock);
    Ok(Built {
        path: out,
        rebuilt: true,
    })
}

/// Whether `out` is newer than every source of `project` (and its WIT files).
fn is_fresh(out: &Path, project: &Project, out_dir: &Path) -> bool {
    let Ok(built) = std::fs::metadata(out).and_then(|m| m.modified()) else {
        return false;
    };
    let mut newest = SystemTime::UNIX_EPOCH;
    newest_in(&project.dir, out_dir, &mut newest);
    newest_in(&project.wit_dir(), out_dir, &mut newest);
    newest <= built
}

fn newest_in(dir: &Path, out_dir: &Path, newest: &mut SystemTime) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() {
            let name = entry.file_name();
            if SKIP.iter().any(|s| name == *s) || path == out_dir {
                continue;
            }
            newest_in(&path, out_dir, newest);
        } else if let Ok(modified) = meta.modified() {
            *newest = (*newest).max(modified);
        }
    }
}

fn python(project: &Project, out: &Path) -> Result<(), Error> {
    let tool = toolchain::find(&COMPONENTIZE_PY, &[])?;
    let module = project.manifest.build.module.as_deref().unwrap_or("app");
    let tmp = out.with_extension("wasm.partial");
    run(Command::new(tool)
        .current_dir(&project.dir)
        .arg("-d")
        .arg(project.wit_dir())
        .arg("-w")
        .arg(&project.manifest.plugin.world)
        .arg("componentize")
        .arg(module)
        .arg("-p")
        .arg(&project.dir)
        .arg("-o")
        .arg(&tmp))?;
    std::fs::rename(&tmp, out).map_err(io(out))
}

fn js(project: &Project, out: &Path) -> Result<(), Error> {
    let node = toolchain::find(&NODE, &[])?;
    let tool = toolchain::find(
        &COMPONENTIZE_JS,
        &[project.dir.join("node_modules").join(".bin")],
    )?;
    let entry = project
        .manifest
        .build
        .entry
        .as_deref()
        .unwrap_or("plugin.js");
    let tmp = out.with_extension("partial.wasm");
    run(Command::new(node)
        .current_dir(&project.dir)
        .arg(tool)
        .arg(entry)
        .arg("-w")
        .arg(project.wit_dir())
        .arg("-n")
        .arg(&project.manifest.plugin.world)
        .arg("-d")
        .args(JS_DISABLED)
        .arg("-o")
        .arg(&tmp))?;
    std::fs::rename(&tmp, out).map_err(io(out))
}

/// The C sources of a C project: the manifest's, else every `*.c` but `test*.c`.
fn c_sources(project: &Project) -> Result<Vec<PathBuf>, Error> {
    let listed = &project.manifest.build.sources;
    if !listed.is_empty() {
        return Ok(listed.iter().map(|s| project.dir.join(s)).collect());
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(&project.dir)
        .map_err(io(&project.dir))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "c")
                && !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("test"))
        })
        .collect();
    found.sort();
    if found.is_empty() {
        return Err(Error::Manifest {
            path: project.dir.join(MANIFEST),
            message: "no C sources: list them in `build.sources`".to_string(),
        });
    }
    Ok(found)
}

fn c(project: &Project, out_dir: &Path, out: &Path) -> Result<(), Error> {
    let clang = toolchain::find(&CLANG, &[])?;
    let bindings = c_bindings(
        &project.wit_dir(),
        &project.manifest.plugin.world,
        &out_dir.join("bindings"),
    )?;
    let core = out_dir.join(format!("{}.core.wasm", project.name()));
    let mut command = Command::new(clang);
    command
        .current_dir(&project.dir)
        // wasi-libc for malloc, memcpy and math; a reactor (no `main`); no FMA contraction,
        // so float results are the same bits as the other builds.
        .args(["--target=wasm32-wasi", "-mexec-model=reactor", "-O2"])
        .args(["-ffp-contract=off", "-fno-builtin-rint", "-Wall"])
        .arg("-I")
        .arg(bindings.header.parent().unwrap_or(out_dir))
        .arg("-o")
        .arg(&core)
        .args(c_sources(project)?)
        .arg(&bindings.source)
        .arg(&bindings.object);
    run(&mut command).map_err(|e| wasi_libc_hint(e, "clang"))?;
    componentize(&core, out)
}

/// A failed clang whose output says the sysroot or builtins are missing: the packages.
fn wasi_libc_hint(e: Error, what: &str) -> Error {
    match e {
        Error::ToolFailed {
            command,
            status,
            output,
        } if output.contains("stdlib.h")
            || output.contains("libclang_rt.builtins")
            || output.contains("wasm-ld") =>
        {
            Error::ToolFailed {
                command,
                status,
                output: format!(
                    "{output}\n({what} needs wasi-libc, lld and the wasm32 builtins: `apt-get \
                     install clang lld wasi-libc libclang-rt-14-dev-wasm32`)"
                ),
            }
        }
        e => e,
    }
}

fn zig(project: &Project, out_dir: &Path, out: &Path) -> Result<(), Error> {
    let zig = toolchain::find(&ZIG, &[])?;
    let bindings = c_bindings(
        &project.wit_dir(),
        &project.manifest.plugin.world,
        &out_dir.join("bindings"),
    )?;
    let dir = bindings.header.parent().unwrap_or(out_dir).to_path_buf();
    let cache = out_dir.join("zig-cache");
    // The bindings and the C library as a Zig module `c` (`zig translate-c`: Zig 0.16 and
    // later have no `@cImport`).
    let header = bindings
        .header
        .file_name()
        .unwrap_or_default()
        .to_string_lossy();
    let wrapper = dir.join("c.h");
    let text = format!("#include <stdlib.h>\n#include <string.h>\n#include \"{header}\"\n");
    if std::fs::read_to_string(&wrapper).ok().as_deref() != Some(text.as_str()) {
        crate::bindings::write_atomic(&wrapper, text.as_bytes())?;
    }
    let translated = run(Command::new(&zig)
        .current_dir(&project.dir)
        .args(["translate-c", "-target", "wasm32-wasi", "-lc"])
        .arg("-I")
        .arg(&dir)
        .arg("--cache-dir")
        .arg(&cache)
        .arg(&wrapper))?;
    let module = dir.join("c.zig");
    if std::fs::read_to_string(&module).ok().as_deref() != Some(translated.as_str()) {
        crate::bindings::write_atomic(&module, translated.as_bytes())?;
    }
    let root = project
        .manifest
        .build
        .entry
        .as_deref()
        .unwrap_or("plugin.zig");
    let core = out_dir.join(format!("{}.core.wasm", project.name()));
    let mut command = Command::new(zig);
    command
        .current_dir(&project.dir)
        .arg("build-exe")
        // A reactor (no `main`), wasi-libc for malloc; stripped; no fast-math (Zig's
        // default), so float results are the same bits as the other builds.
        .args([
            "-target",
            "wasm32-wasi",
            "-fno-entry",
            "-mexec-model=reactor",
        ])
        .args(["-fstrip", "-O", "ReleaseFast", "-lc"])
        .arg("-I")
        .arg(&dir)
        .args(project.manifest.build.sources.iter())
        .arg(&bindings.source)
        .arg(&bindings.object)
        .args(["--dep", "c"])
        .arg(format!("-Mroot={root}"))
        .arg(format!("-Mc={}", module.display()))
        .arg("--cache-dir")
        .arg(&cache)
        .arg(format!("-femit-bin={}", core.display()));
    run(&mut command)?;
    componentize(&core, out)
}

/// Environment variables of an outer cargo (a test or build script running this) that
/// must not reach the plugin's own build.
const OUTER_CARGO_ENV: [&str; 6] = [
    "RUSTFLAGS",
    "CARGO_ENCODED_RUSTFLAGS",
    "CARGO_BUILD_RUSTFLAGS",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET",
    "RUSTC_WORKSPACE_WRAPPER",
];

fn rust(project: &Project, out: &Path) -> Result<(), Error> {
    let cargo = toolchain::find(&CARGO, &[])?;
    let target_dir = project.dir.join("target");
    let mut command = Command::new(cargo);
    command
        .current_dir(&project.dir)
        .args(["build", "--release", "--target", "wasm32-unknown-unknown"])
        .arg("--target-dir")
        .arg(&target_dir);
    for name in OUTER_CARGO_ENV {
        command.env_remove(name);
    }
    run(&mut command).map_err(|e| match e {
        Error::ToolFailed { output, .. } if output.contains("may not be installed") => {
            Error::MissingTool {
                what: "the wasm32-unknown-unknown target of Rust".to_string(),
                env: CARGO.env,
                also: String::new(),
                install: "`rustup target add wasm32-unknown-unknown`".to_string(),
            }
        }
        e => e,
    })?;
    let core = target_dir
        .join("wasm32-unknown-unknown")
        .join("release")
        .join(format!("{}.wasm", project.name().replace('-', "_")));
    componentize(&core, out)
}
