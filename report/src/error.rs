//! [`Error`]: why a run's JSON could not be read, naming the file and the field.

/// Why a run's JSON could not be read. Each names the file (when it came from one) and
/// what in it was wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read.
    #[error("{file}: {source}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The text is not JSON.
    #[error("{}not JSON at line {line}, column {column}: {message}", in_file(file))]
    Syntax {
        /// The file, if known.
        file: Option<String>,
        /// Where (1-based).
        line: usize,
        /// See `line`.
        column: usize,
        /// serde_json's message.
        message: String,
    },
    /// JSON, but not what `sluice run --json` prints.
    #[error("{}not the JSON of `sluice run --json`: {why}", in_file(file))]
    NotARun {
        /// The file, if known.
        file: Option<String>,
        /// What is missing.
        why: String,
    },
    /// A field has the wrong type or shape.
    #[error("{}field `{field}`: {message}", in_file(file))]
    Field {
        /// The file, if known.
        file: Option<String>,
        /// Its path: `stages[2]`, `timeline.samples[7]`, `seconds`.
        field: String,
        /// serde's message.
        message: String,
    },
}

fn in_file(file: &Option<String>) -> String {
    file.as_ref().map_or_else(String::new, |f| format!("{f}: "))
}

impl Error {
    /// This error, said of the file `name`.
    pub fn in_file(mut self, name: &str) -> Error {
        match &mut self {
            Error::Read { .. } => {}
            Error::Syntax { file, .. }
            | Error::NotARun { file, .. }
            | Error::Field { file, .. } => *file = Some(name.to_string()),
        }
        self
    }

    /// A field error with `outer.` before its field's path.
    pub(crate) fn prefixed(mut self, outer: &str) -> Error {
        if let Error::Field { field, .. } = &mut self {
            *field = format!("{outer}.{field}");
        }
        self
    }
}
