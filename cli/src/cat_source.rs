//! `sluice cat --format F`: the elements of any source format, as JSON lines.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use base64::Engine;
use serde_json::{Value as Json, json};
use sluice_core::pipeline_file::{PipelineFile, SourceSpec};
use sluice_core::{Element, ErrorPolicy, Options, Tensor, TensorData};

/// Prints the elements of `files` read as `format` with `options` (`KEY=VALUE`, TOML
/// values); at most `limit`; `skip`: bad records are skipped (and counted) instead of
/// ending the output.
pub(crate) fn run(
    files: &[PathBuf],
    format: &str,
    options: &[String],
    limit: Option<u64>,
    skip: bool,
) -> Result<ExitCode> {
    let mut table = toml::Table::new();
    if files.is_empty() && format != "tfds" {
        bail!("sluice cat --format {format}: no FILE given");
    }
    if format == "tfds" && !files.is_empty() {
        bail!(
            "sluice cat --format tfds: a TFDS dataset is named with -o name=NAME (and -o \
             split=..., -o data_dir=...), not with files"
        );
    }
    if format == "tfds" {
        // Named by its options.
    } else if format == "image_folder" {
        // The one argument is the folder of class folders.
        let [directory] = files else {
            bail!("sluice cat --format image_folder: give one directory (of class folders)");
        };
        table.insert(
            "directory".into(),
            toml::Value::String(directory.display().to_string()),
        );
    } else if format == "sql" {
        // The one argument is the database: a PostgreSQL URL or a SQLite file.
        let [database] = files else {
            bail!("sluice cat --format sql: give one database (a SQLite file or a PostgreSQL URL)");
        };
        let database = database.display().to_string();
        let key = if database.contains("://") {
            "url"
        } else {
            "path"
        };
        table.insert(key.into(), toml::Value::String(database));
    } else {
        table.insert(
            "files".into(),
            toml::Value::Array(
                files
                    .iter()
                    .map(|f| toml::Value::String(f.display().to_string()))
                    .collect(),
            ),
        );
    }
    table.insert("format".into(), toml::Value::String(format.to_string()));
    for option in options {
        let Some((key, value)) = option.split_once('=') else {
            bail!("--option {option:?}: expected KEY=VALUE");
        };
        let key = key.trim();
        if ["files", "format", "directory", "url", "path"].contains(&key) {
            bail!(
                "--option {key}: give the files (the directory, the database) as arguments and \
                 the format with --format"
            );
        }
        table.insert(key.to_string(), toml_value(value));
    }
    let spec: SourceSpec = toml::Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| anyhow::anyhow!("{}", e.message()))
        .context(format!("sluice cat --format {format}"))?;
    let file = PipelineFile::new(spec);
    let dataset = file.build()?.with_options(Options {
        error_policy: if skip {
            ErrorPolicy::Skip
        } else {
            ErrorPolicy::Fail
        },
        ..Options::default()
    });
    let mut out = BufWriter::with_capacity(64 << 10, io::stdout().lock());
    let mut remaining = limit.unwrap_or(u64::MAX);
    let mut iter = dataset.iter()?;
    let mut code = ExitCode::SUCCESS;
    while remaining > 0 {
        match iter.next() {
            Some(Ok(e)) => {
                serde_json::to_writer(&mut out, &element_json(&e))?;
                out.write_all(b"\n")?;
                remaining -= 1;
            }
            Some(Err(e)) => {
                out.flush()?;
                eprintln!("sluice cat: {e}");
                code = ExitCode::FAILURE;
                break;
            }
            None => break,
        }
    }
    out.flush()?;
    if skip {
        let skipped = iter.stats().skipped;
        if skipped > 0 {
            eprintln!("sluice cat: skipped {skipped} bad record(s)");
        }
    }
    Ok(code)
}

/// A value as TOML reads it, or the text as a string when it is not TOML (a bare word).
fn toml_value(text: &str) -> toml::Value {
    let text = text.trim();
    toml::from_str::<toml::Table>(&format!("v = {text}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(text.to_string()))
}

/// An element as a JSON object: feature -> value (scalars as themselves, tensors as
/// nested lists; byte strings as text when UTF-8, else `{"b64": ...}`).
pub(crate) fn element_json(e: &Element) -> Json {
    let mut m = serde_json::Map::new();
    for (name, value) in e.iter() {
        let v = match value.as_dense() {
            Some(t) => tensor_json(t),
            None => json!(format!("{value:?}")),
        };
        m.insert(name.to_string(), v);
    }
    Json::Object(m)
}

fn tensor_json(t: &Tensor) -> Json {
    let flat: Vec<Json> = match t.data() {
        TensorData::U8(v) => v.iter().map(|x| json!(x)).collect(),
        TensorData::I32(v) => v.iter().map(|x| json!(x)).collect(),
        TensorData::I64(v) => v.iter().map(|x| json!(x)).collect(),
        TensorData::F32(v) => v.iter().map(|x| json!(x)).collect(),
        TensorData::F64(v) => v.iter().map(|x| json!(x)).collect(),
        TensorData::Bytes(v) => v
            .iter()
            .map(|b| match std::str::from_utf8(b) {
                Ok(s) => json!(s),
                Err(_) => json!({"b64": base64::engine::general_purpose::STANDARD.encode(b)}),
            })
            .collect(),
    };
    nest(&flat, t.shape())
}

fn nest(flat: &[Json], shape: &[usize]) -> Json {
    match shape.split_first() {
        None => flat.first().cloned().unwrap_or(Json::Null),
        Some((&n, rest)) => {
            let inner: usize = rest.iter().product();
            Json::Array(
                (0..n)
                    .map(|i| nest(&flat[i * inner..(i + 1) * inner], rest))
                    .collect(),
            )
        }
    }
}
