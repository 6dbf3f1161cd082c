//! Why a plugin could not be built or its template written.

use std::path::PathBuf;

/// Why a plugin could not be built or its template written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The project's manifest is missing or invalid.
    #[error("{}: {message}", path.display())]
    Manifest {
        /// The manifest (`sluice-plugin.toml`).
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A language the templates and builds do not know.
    #[error("unknown plugin language `{0}`: expected one of rust, c, python, js, zig")]
    UnknownLanguage(String),
    /// A toolchain program is not installed (nothing is installed silently).
    #[error(
        "{what} not found (looked in ${env}, then PATH{also}): install it with {install}, or \
         set {env} to its path"
    )]
    MissingTool {
        /// What was looked for (`componentize-py`, ...).
        what: String,
        /// The environment variable that names it.
        env: &'static str,
        /// Other places looked in, as text (`, then ./node_modules/.bin`).
        also: String,
        /// How to install it (commands in backticks).
        install: String,
    },
    /// A toolchain program failed.
    #[error("`{command}` failed ({status}):\n{output}")]
    ToolFailed {
        /// The command, as a line to paste.
        command: String,
        /// Its exit status.
        status: String,
        /// The end of its output.
        output: String,
    },
    /// The WIT files could not be read, or bindings not generated.
    #[error("the WIT package in {}: {message}", dir.display())]
    Wit {
        /// The WIT directory.
        dir: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The core module could not be made a component.
    #[error("making {} a component failed: {message}", module.display())]
    Component {
        /// The core module.
        module: PathBuf,
        /// What wit-component said (and what it means).
        message: String,
    },
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// `plugin new` would overwrite something, or got a bad name.
    #[error("{0}")]
    Template(String),
}

/// A closure making [`Error::Io`] for `path`.
pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.into();
    move |source| Error::Io { path, source }
}
