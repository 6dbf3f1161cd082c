//! Reading a pipeline file's TOML: each table deserialized on its own so that every error
//! keeps the span of the key or value it is about, turned into a line and column, with the
//! closest valid name for a misspelt key, stage kind or op.

use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;
use toml::de::{DeTable, DeValue, ValueDeserializer};

use crate::error::{Error, Result};
use crate::registry::{self, quoted};

use super::source::{COMMON_KEYS, CommonKeys, FormatKeys};
use super::{InputSpec, OptionsSpec, PipelineFile, SourceSpec, StageSpec};
use crate::invalid::Key as Seg;

/// The top-level keys of a pipeline file.
const TOP_KEYS: &[&str] = &[
    "name",
    "description",
    "source",
    "options",
    "stage",
    "inputs",
];

/// Reads and validates a pipeline file's text; `origin` names it in errors.
pub(super) fn parse(text: &str, origin: &str) -> Result<PipelineFile> {
    let loader = Loader { text, origin };
    let root = DeTable::parse(text).map_err(|e| loader.toml_error(&e, ""))?;
    let root_span = root.span();
    let table = root.get_ref();
    for (key, _) in table.iter() {
        let k: &str = key.get_ref();
        if !TOP_KEYS.contains(&k) {
            let mut message = format!(
                "unknown top-level key `{k}`, expected one of {}",
                quoted(TOP_KEYS.iter().copied())
            );
            if let Some(s) = closest(k, TOP_KEYS.iter().copied()) {
                message.push_str(&format!("; did you mean `{s}`?"));
            }
            return Err(loader.error(Some(key.span()), message));
        }
    }
    let text_of = |key: &str| -> Result<Option<String>> {
        table
            .get(key)
            .map(|v| loader.de::<String>(v, &format!("`{key}`: ")))
            .transpose()
    };
    let name = text_of("name")?;
    let description = text_of("description")?;
    let source = match table.get("source") {
        Some(v) => loader.source(v)?,
        None => {
            return Err(loader.error(
                Some(root_span.start..root_span.start),
                "missing the [source] table (which files to read)".to_string(),
            ));
        }
    };
    let options = match table.get("options") {
        Some(v) => loader.de::<OptionsSpec>(v, "[options]: ")?,
        None => OptionsSpec::default(),
    };
    let stages = loader.stages(table.get("stage"), "")?;
    let inputs = match table.get("inputs") {
        None => Default::default(),
        Some(v) => loader.inputs(v)?,
    };
    let file = PipelineFile {
        name,
        description,
        source,
        options,
        stages,
        inputs,
    };
    file.check()
        .map_err(|p| loader.error(span_of(&root, &p.path), p.message))?;
    Ok(file)
}

struct Loader<'a> {
    text: &'a str,
    origin: &'a str,
}

impl Loader<'_> {
    fn error(&self, span: Option<Range<usize>>, message: String) -> Error {
        Error::PipelineFile {
            origin: self.origin.to_string(),
            location: span.map(|s| line_column(self.text, s.start)),
            message,
        }
    }

    /// A toml error as [`Error::PipelineFile`]: its span as a line and column, friendlier
    /// wording for untagged values, and the closest name for an unknown one.
    fn toml_error(&self, e: &toml::de::Error, context: &str) -> Error {
        let mut message = e.message().trim().to_string();
        for (needle, better) in [
            (
                "untagged enum NumParallel",
                "`num_parallel` takes a number of threads or \"auto\"",
            ),
            (
                "untagged enum BufferSize",
                "`buffer_size` takes a number of elements or \"auto\"",
            ),
            (
                "untagged enum PadValue",
                "a padding value is a number or a string",
            ),
        ] {
            if message.contains(needle) {
                message = better.to_string();
            }
        }
        if let Some(s) = suggestion(&message) {
            message.push_str(&format!("; did you mean `{s}`?"));
        }
        self.error(e.span(), format!("{context}{message}"))
    }

    fn de<'i, T: Deserialize<'i>>(&self, value: &Spanned<DeValue<'i>>, context: &str) -> Result<T> {
        T::deserialize(ValueDeserializer::from(value.clone()))
            .map_err(|e| self.toml_error(&e, context))
    }

    /// The `[source]` table: the keys every format has, then the format's own, each
    /// deserialized where it is written (errors keep their spans).
    fn source(&self, value: &Spanned<DeValue<'_>>) -> Result<SourceSpec> {
        let DeValue::Table(table) = value.get_ref() else {
            return self.de::<SourceSpec>(value, "[source]: ");
        };
        let mut common = DeTable::new();
        let mut rest = DeTable::new();
        for (k, v) in table.iter() {
            let part = match COMMON_KEYS.contains(&k.get_ref().as_ref()) {
                true => &mut common,
                false => &mut rest,
            };
            part.insert(k.clone(), v.clone());
        }
        let span = value.span();
        let common: CommonKeys = self.de(
            &Spanned::new(span.clone(), DeValue::Table(common)),
            "[source]: ",
        )?;
        let format = common
            .format_name()
            .map_err(|m| self.error(Some(span.clone()), format!("[source]: {m}")))?
            .to_string();
        // Where a format's error is when toml does not say (some formats' keys are read
        // through a conversion that loses the span: fuzz finding `toml-source-key-no-line`):
        // the unknown key the message names, else the `[source]` table.
        let key_spans: Vec<(String, Range<usize>)> = rest
            .iter()
            .map(|(k, _)| (k.get_ref().to_string(), k.span()))
            .collect();
        let rest = Spanned::new(span.clone(), DeValue::Table(rest));
        let keys = FormatKeys::deserialize(&format, ValueDeserializer::from(rest)).map_err(
            |e: toml::de::Error| {
                let at = e.span().or_else(|| {
                    let named = e.message().split('`').nth(1).unwrap_or_default();
                    key_spans
                        .iter()
                        .find(|(k, _)| k == named)
                        .map(|(_, s)| s.clone())
                        .or_else(|| Some(span.clone()))
                });
                let mut message = FormatKeys::unknown_key_message(&format, e.message().trim());
                if let Some(s) = suggestion(&message) {
                    message.push_str(&format!("; did you mean `{s}`?"));
                }
                self.error(at, format!("[source]: {message}"))
            },
        )?;
        Ok(SourceSpec::assemble(common, keys))
    }

    /// The `stage` array of tables (`context` prefixes messages).
    fn stages(
        &self,
        value: Option<&Spanned<DeValue<'_>>>,
        context: &str,
    ) -> Result<Vec<StageSpec>> {
        match value {
            None => Ok(Vec::new()),
            Some(v) => match v.get_ref() {
                DeValue::Array(items) => items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| self.stage(i, item).map_err(|e| prefixed(e, context)))
                    .collect(),
                _ => Err(self.error(
                    Some(v.span()),
                    format!(
                        "{context}`stage` must be an array of tables: write each stage as a \
                         [[stage]] table"
                    ),
                )),
            },
        }
    }

    /// The `[inputs]` table: each `[inputs.NAME]` a `source` and its `stage`s.
    fn inputs(
        &self,
        value: &Spanned<DeValue<'_>>,
    ) -> Result<std::collections::BTreeMap<String, InputSpec>> {
        let DeValue::Table(table) = value.get_ref() else {
            return Err(self.error(
                Some(value.span()),
                "`inputs` is a table of named pipelines: [inputs.NAME] tables, each with a \
                 `source` and `stage`s"
                    .to_string(),
            ));
        };
        let mut inputs = std::collections::BTreeMap::new();
        for (name, v) in table.iter() {
            let name: &str = name.get_ref();
            let context = format!("inputs.{name}: ");
            let DeValue::Table(input) = v.get_ref() else {
                return Err(self.error(
                    Some(v.span()),
                    format!("{context}an input is a table with a `source` and `stage`s"),
                ));
            };
            for (key, _) in input.iter() {
                let k: &str = key.get_ref();
                if !["source", "stage"].contains(&k) {
                    return Err(self.error(
                        Some(key.span()),
                        format!(
                            "{context}unknown key `{k}`, expected `source` or `stage` (the \
                             file's [options] apply to every input)"
                        ),
                    ));
                }
            }
            let source = match input.get("source") {
                Some(s) => self
                    .source(s)
                    .map_err(|e| prefixed(e, &format!("inputs.{name}.")))?,
                None => {
                    return Err(self.error(
                        Some(v.span()),
                        format!("{context}missing the `source` table (what the input reads)"),
                    ));
                }
            };
            let stages = self.stages(input.get("stage"), &context)?;
            inputs.insert(name.to_string(), InputSpec { source, stages });
        }
        Ok(inputs)
    }

    /// One `[[stage]]` table: its `kind`, then the kind's parameters.
    fn stage(&self, i: usize, item: &Spanned<DeValue<'_>>) -> Result<StageSpec> {
        let DeValue::Table(table) = item.get_ref() else {
            return Err(self.error(
                Some(item.span()),
                format!("stage {}: a stage is a table with a `kind`", i + 1),
            ));
        };
        let Some(kind) = table.get("kind") else {
            return Err(self.error(
                Some(item.span()),
                format!(
                    "stage {}: missing `kind`, one of {}",
                    i + 1,
                    quoted(registry::kinds())
                ),
            ));
        };
        let Some(k) = kind.get_ref().as_str() else {
            return Err(self.error(
                Some(kind.span()),
                format!("stage {}: `kind` must be a string", i + 1),
            ));
        };
        let mut params = table.clone();
        params.remove("kind");
        let params = Spanned::new(item.span(), DeValue::Table(params));
        let context = format!("stage {} ({k}): ", i + 1);
        let Some(registered) = registry::lookup(k) else {
            return Err(self.error(
                Some(kind.span()),
                format!("stage {}: {}", i + 1, registry::unknown_kind(k)),
            ));
        };
        registered
            .from_toml(ValueDeserializer::from(params))
            .map_err(|e| self.toml_error(&e, &context))
    }
}

/// `e` with `context` before its message.
fn prefixed(e: Error, context: &str) -> Error {
    match e {
        Error::PipelineFile {
            origin,
            location,
            message,
        } if !context.is_empty() => Error::PipelineFile {
            origin,
            location,
            message: format!("{context}{message}"),
        },
        e => e,
    }
}

/// The span of the deepest part of `path` present in the file (a default value is not in
/// the file: its table is named instead).
fn span_of(root: &Spanned<DeTable<'_>>, path: &[Seg]) -> Option<Range<usize>> {
    let mut best = root.span();
    let Some((Seg::Name(first), rest)) = path.split_first() else {
        return Some(best);
    };
    let Some(mut current) = root.get_ref().get(first.as_str()) else {
        return Some(best);
    };
    best = current.span();
    for seg in rest {
        let next = match seg {
            Seg::Name(k) => current.get_ref().get(k.as_str()),
            Seg::Index(i) => current.get_ref().get(*i),
        };
        match next {
            Some(v) => {
                current = v;
                best = v.span();
            }
            None => break,
        }
    }
    Some(best)
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
pub(super) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// For serde's "unknown field `x`, expected one of `a`, `b`" and "unknown variant ..."
/// messages: the valid name closest to `x`.
fn suggestion(message: &str) -> Option<&str> {
    let rest = message
        .strip_prefix("unknown field ")
        .or_else(|| message.strip_prefix("unknown variant "))?;
    let quoted: Vec<&str> = rest.split('`').skip(1).step_by(2).collect();
    let (typo, candidates) = quoted.split_first()?;
    closest(typo, candidates.iter().copied())
}

/// The candidate closest to `typo` (Damerau-Levenshtein), if close enough to be what was
/// meant: at most a third of the longer name differs, or one contains the other.
pub(crate) fn closest<'a>(
    typo: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let lower = typo.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (strsim::damerau_levenshtein(&lower, c), c))
        .filter(|(d, c)| {
            let longest = lower.chars().count().max(c.chars().count());
            *d <= (longest / 3).max(1)
                || (lower.len() >= 3 && (c.contains(lower.as_str()) || lower.contains(c)))
        })
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_count_characters() {
        let text = "a = 1\nbé = 2\n";
        assert_eq!(line_column(text, 0), (1, 1));
        assert_eq!(line_column(text, 6), (2, 1));
        assert_eq!(line_column(text, text.find('=').unwrap()), (1, 3));
        assert_eq!(line_column(text, text.rfind('=').unwrap()), (2, 4));
    }

    #[test]
    fn misspellings_find_the_intended_name() {
        let fields = [
            "batch_size",
            "drop_remainder",
            "num_parallel",
            "deterministic",
        ];
        assert_eq!(closest("batchsize", fields), Some("batch_size"));
        assert_eq!(closest("size", fields), Some("batch_size"));
        assert_eq!(closest("Drop_Remainder", fields), Some("drop_remainder"));
        assert_eq!(closest("workers", fields), None);
        assert_eq!(
            suggestion("unknown field `num_paralel`, expected one of `batch_size`, `num_parallel`"),
            Some("num_parallel")
        );
        assert_eq!(
            suggestion("unknown variant `random_crp`, expected `random_crop` or `decode`"),
            Some("random_crop")
        );
        assert_eq!(
            suggestion("invalid type: string \"x\", expected usize"),
            None
        );
    }
}
