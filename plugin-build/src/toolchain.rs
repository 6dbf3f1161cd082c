//! Where each language's toolchain is looked up, and how it is run.
//!
//! Each program is looked up in this order: the environment variable that names it
//! (`SLUICE_CLANG`, `SLUICE_ZIG`, `SLUICE_COMPONENTIZE_PY`, `SLUICE_COMPONENTIZE_JS`,
//! `SLUICE_CARGO`: a path), then `PATH` (under each of its names: Zig's PyPI package
//! installs `python-zig`), then places of the project's own (a JavaScript project's
//! `node_modules/.bin`). Nothing is installed: a program not found is
//! [`Error::MissingTool`], naming the package to install.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::Error;

/// A program of a language's toolchain.
#[derive(Debug, Clone, Copy)]
pub struct Tool {
    /// What it is called in messages.
    pub what: &'static str,
    /// Its names on `PATH`, in order.
    pub names: &'static [&'static str],
    /// The environment variable that names it.
    pub env: &'static str,
    /// How to install it, as the rest of "install it with ...", commands in backticks.
    pub install: &'static str,
}

/// clang, with wasi-libc and the wasm32 builtins (C plugins).
pub const CLANG: Tool = Tool {
    what: "clang",
    names: &["clang"],
    env: "SLUICE_CLANG",
    install: "`apt-get install clang lld wasi-libc libclang-rt-14-dev-wasm32`",
};

/// Zig (the compiler and its bundled wasi-libc), from PyPI's `ziglang`.
pub const ZIG: Tool = Tool {
    what: "zig",
    names: &["zig", "python-zig"],
    env: "SLUICE_ZIG",
    install: "`pip install ziglang==0.17.*`",
};

/// componentize-py (Python plugins).
pub const COMPONENTIZE_PY: Tool = Tool {
    what: "componentize-py",
    names: &["componentize-py"],
    env: "SLUICE_COMPONENTIZE_PY",
    install: "`pip install componentize-py==0.25.*`",
};

/// componentize-js (JavaScript plugins), run with node; also found in the project's
/// `node_modules/.bin` (the JavaScript template and example name it as a devDependency).
pub const COMPONENTIZE_JS: Tool = Tool {
    what: "componentize-js",
    names: &["componentize-js"],
    env: "SLUICE_COMPONENTIZE_JS",
    install: "`npm install --save-dev @bytecodealliance/componentize-js@0.23.0` in the \
              project (the build then finds it in the project's node_modules/.bin)",
};

/// node, which runs componentize-js.
pub const NODE: Tool = Tool {
    what: "node",
    names: &["node"],
    env: "SLUICE_NODE",
    install: "`apt-get install nodejs` (Node.js 18 or later)",
};

/// cargo (Rust plugins), with the `wasm32-unknown-unknown` target.
pub const CARGO: Tool = Tool {
    what: "cargo",
    names: &["cargo"],
    env: "SLUICE_CARGO",
    install: "rustup (https://rustup.rs), then `rustup target add wasm32-unknown-unknown`",
};

/// Finds `tool`: its environment variable, then `PATH`, then `also` (directories).
pub fn find(tool: &Tool, also: &[PathBuf]) -> Result<PathBuf, Error> {
    if let Some(path) = std::env::var_os(tool.env).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        if let Some(found) = executable(&path).or_else(|| in_path(&path.to_string_lossy())) {
            return Ok(found);
        }
        return Err(Error::MissingTool {
            what: format!("{} (at {}={})", tool.what, tool.env, path.display()),
            env: tool.env,
            also: String::new(),
            install: tool.install.to_string(),
        });
    }
    for name in tool.names {
        if let Some(found) = in_path(name) {
            return Ok(found);
        }
    }
    for dir in also {
        for name in tool.names {
            if let Some(found) = executable(&dir.join(name)) {
                return Ok(found);
            }
        }
    }
    Err(Error::MissingTool {
        what: tool.what.to_string(),
        env: tool.env,
        also: also
            .iter()
            .map(|d| format!(", then {}", d.display()))
            .collect(),
        install: tool.install.to_string(),
    })
}

fn executable(path: &Path) -> Option<PathBuf> {
    path.is_file().then(|| path.to_path_buf())
}

fn in_path(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return None;
    }
    let path: OsString = std::env::var_os("PATH")?;
    std::env::split_paths(&path).find_map(|dir| executable(&dir.join(name)))
}

/// Runs `command`; its output on failure is [`Error::ToolFailed`] (the last 40 lines).
/// Returns what it printed on stdout.
pub(crate) fn run(command: &mut Command) -> Result<String, Error> {
    let line = format!(
        "{} {}",
        command.get_program().to_string_lossy(),
        command
            .get_args()
            .map(|a| {
                let a = a.to_string_lossy();
                if a.contains(' ') {
                    format!("'{a}'")
                } else {
                    a.into_owned()
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    );
    let out = command.output().map_err(|e| Error::ToolFailed {
        command: line.clone(),
        status: "could not start".to_string(),
        output: e.to_string(),
    })?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        let text = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(40)..].join("\n");
        return Err(Error::ToolFailed {
            command: line,
            status: out.status.to_string(),
            output: tail,
        });
    }
    Ok(stdout)
}
