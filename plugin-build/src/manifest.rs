//! `sluice-plugin.toml`: what a plugin project is (its name, language, world, WIT files)
//! and how to build it.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{Error, io};

/// The manifest's file name.
pub const MANIFEST: &str = "sluice-plugin.toml";

/// The languages a plugin can be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Language {
    /// Rust, with `wit-bindgen` (crates.io) and cargo.
    Rust,
    /// C, with bindings from wit-bindgen's C generator and clang with wasi-libc.
    C,
    /// Python, with componentize-py (PyPI).
    Python,
    /// JavaScript, with componentize-js (npm).
    Js,
    /// Zig: the C bindings translated into a Zig module (`zig translate-c`) and compiled
    /// with the plugin by `zig build-exe`.
    Zig,
}

impl Language {
    /// Every language, in the order the docs list them.
    pub const ALL: [Language; 5] = [
        Language::Rust,
        Language::C,
        Language::Python,
        Language::Js,
        Language::Zig,
    ];

    /// The name a manifest and `--lang` use.
    pub fn name(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::C => "c",
            Language::Python => "python",
            Language::Js => "js",
            Language::Zig => "zig",
        }
    }
}

impl std::fmt::Display for Language {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Language {
    type Err = Error;

    fn from_str(s: &str) -> Result<Language, Error> {
        match s.to_ascii_lowercase().as_str() {
            "rust" | "rs" => Ok(Language::Rust),
            "c" => Ok(Language::C),
            "python" | "py" => Ok(Language::Python),
            "js" | "javascript" => Ok(Language::Js),
            "zig" => Ok(Language::Zig),
            _ => Err(Error::UnknownLanguage(s.to_string())),
        }
    }
}

impl<'de> Deserialize<'de> for Language {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Language, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The worlds of `sdk/wit/sluice.wit` a plugin may implement.
pub const WORLDS: [&str; 3] = ["map-transform", "filter-transform", "batch-transform"];

/// A parsed `sluice-plugin.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// What the plugin is.
    pub plugin: PluginSection,
    /// How to build it (each language reads its own keys).
    #[serde(default)]
    pub build: BuildSection,
}

/// The `[plugin]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginSection {
    /// The plugin's name: the built component is `<name>.wasm`.
    pub name: String,
    /// Its language.
    pub language: Language,
    /// The world it implements (default `map-transform`).
    #[serde(default = "default_world")]
    pub world: String,
    /// The directory of the WIT package, relative to the project (default `wit`).
    #[serde(default = "default_wit")]
    pub wit: PathBuf,
}

fn default_world() -> String {
    "map-transform".to_string()
}

fn default_wit() -> PathBuf {
    PathBuf::from("wit")
}

/// The `[build]` table: each language reads its keys, with these defaults.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildSection {
    /// Python: the module of the world's functions (default `app`).
    pub module: Option<String>,
    /// JavaScript: the ES module (default `plugin.js`); Zig: the root source file
    /// (default `plugin.zig`).
    pub entry: Option<String>,
    /// C: the sources to compile (default every `*.c` in the project's directory except
    /// test files `test*.c`); Zig: C sources compiled beside the root.
    #[serde(default)]
    pub sources: Vec<String>,
}

/// A plugin project: its directory and manifest.
#[derive(Debug, Clone)]
pub struct Project {
    /// The project's directory.
    pub dir: PathBuf,
    /// Its manifest.
    pub manifest: Manifest,
}

impl Project {
    /// Reads the project in `dir` (its `sluice-plugin.toml`).
    pub fn open(dir: &Path) -> Result<Project, Error> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&path).map_err(|e| Error::Manifest {
            path: path.clone(),
            message: if e.kind() == std::io::ErrorKind::NotFound {
                format!(
                    "not found: {} is not a plugin project (`sluice plugin new --lang LANG NAME` \
                     writes one)",
                    dir.display()
                )
            } else {
                e.to_string()
            },
        })?;
        let manifest: Manifest = toml::from_str(&text).map_err(|e| Error::Manifest {
            path: path.clone(),
            message: e.to_string(),
        })?;
        let bad = |message: String| Error::Manifest {
            path: path.clone(),
            message,
        };
        if !WORLDS.contains(&manifest.plugin.world.as_str()) {
            return Err(bad(format!(
                "`plugin.world` must be one of {WORLDS:?}, got `{}`",
                manifest.plugin.world
            )));
        }
        check_name(&manifest.plugin.name).map_err(bad)?;
        let dir = std::fs::canonicalize(dir).map_err(io(dir))?;
        Ok(Project { dir, manifest })
    }

    /// The project's WIT directory.
    pub fn wit_dir(&self) -> PathBuf {
        self.dir.join(&self.manifest.plugin.wit)
    }

    /// Its language.
    pub fn language(&self) -> Language {
        self.manifest.plugin.language
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.manifest.plugin.name
    }
}

/// A plugin's name: letters, digits, `_` and `-`, starting with a letter.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    let ok = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid plugin name `{name}`: use letters, digits, `_` and `-`, starting with a letter"
        ))
    }
}
