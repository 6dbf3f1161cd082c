//! The reference of the stage kinds, generated from the registry: what
//! `docs/pipeline-format.md` holds between its `BEGIN GENERATED` and `END GENERATED`
//! markers (a test keeps it current).

use std::fmt::Write as _;

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

use super::STAGES;

/// The reference of every registered stage kind, in Markdown: a section per kind with its
/// description and a table of its keys (type, default, meaning), from the specs' JSON
/// schemas (their doc comments, types and defaults).
pub fn reference_markdown() -> String {
    let mut out = String::new();
    let _ = writeln!(out, "| Kind | What it does |\n|---|---|");
    for kind in STAGES {
        let _ = writeln!(out, "| [`{0}`](#{0}) | {1} |", kind.kind, kind.summary);
    }
    for kind in STAGES {
        let mut generator = SchemaSettings::draft2020_12().into_generator();
        let schema = kind.schema(&mut generator);
        let defs = generator.definitions().clone();
        let schema = schema.as_value();
        let _ = writeln!(out, "\n### `{}`\n", kind.kind);
        if let Some(d) = schema.get("description").and_then(Value::as_str) {
            let _ = writeln!(out, "{}\n", paragraphs(d));
        }
        let table = keys_table(schema, &defs);
        if table.is_empty() {
            let _ = writeln!(out, "No keys.");
        } else {
            out.push_str(&table);
        }
        out.push_str(&variants_tables(schema, &defs));
    }
    out
}

/// A doc comment's text as Markdown for the reference: lines of a paragraph joined, blank
/// lines and code blocks kept, rustdoc links (``[`X`](path)``, ``[`X`]``) as plain code.
fn paragraphs(text: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut in_code = false;
    let mut paragraph: Vec<&str> = Vec::new();
    let flush = |paragraph: &mut Vec<&str>, out: &mut Vec<String>| {
        if !paragraph.is_empty() {
            out.push(unlink(&paragraph.join(" ")));
            paragraph.clear();
        }
    };
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            flush(&mut paragraph, &mut out);
            in_code = !in_code;
            out.push(line.to_string());
            continue;
        }
        if in_code {
            out.push(line.to_string());
        } else if line.trim().is_empty() {
            flush(&mut paragraph, &mut out);
            out.push(String::new());
        } else {
            paragraph.push(line.trim());
        }
    }
    flush(&mut paragraph, &mut out);
    out.join("\n")
}

/// Rustdoc links as plain text: ``[`X`](path)`` and ``[`X`]`` become `` `X` ``.
fn unlink(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("[`") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let Some(end) = after.find("`]") else {
            out.push_str(&rest[start..]);
            return out;
        };
        out.push_str(&after[..end + 1]);
        rest = &after[end + 2..];
        if rest.starts_with('(')
            && let Some(close) = rest.find(')')
        {
            rest = &rest[close + 1..];
        }
    }
    out.push_str(rest);
    out
}

/// `| Key | Type | Default | Meaning |` for the properties of an object schema.
fn keys_table(schema: &Value, defs: &Map<String, Value>) -> String {
    let schema = resolve(schema, defs);
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return String::new();
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out = String::from("| Key | Type | Default | Meaning |\n|---|---|---|---|\n");
    for (name, prop) in props {
        let default = if required.contains(&name.as_str()) {
            "**required**".to_string()
        } else {
            match prop.get("default") {
                Some(Value::Null) | None => "—".to_string(),
                Some(v) => format!("`{}`", value_text(v)),
            }
        };
        let meaning = prop
            .get("description")
            .and_then(Value::as_str)
            .map(|d| paragraphs(d).replace("\n\n", " ").replace('|', "\\|"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "| `{name}` | {} | {default} | {meaning} |",
            type_of(prop, defs).replace('|', "\\|")
        );
    }
    out
}

/// For each key holding a list of tagged tables (`ops = [{ op = "decode", ... }]`), a table
/// of the variants: the tag, their keys, what they do.
fn variants_tables(schema: &Value, defs: &Map<String, Value>) -> String {
    let schema = resolve(schema, defs);
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return String::new();
    };
    let mut out = String::new();
    for (name, prop) in props {
        let items = prop.get("items").map_or(prop, |i| i);
        let items = resolve(items, defs);
        let Some(variants) = items.get("oneOf").and_then(Value::as_array) else {
            continue;
        };
        let mut rows = Vec::new();
        let mut tag_name = None;
        for v in variants {
            let v = resolve(v, defs);
            let Some(vprops) = v.get("properties").and_then(Value::as_object) else {
                continue;
            };
            let Some((tag, value)) = vprops
                .iter()
                .find_map(|(k, p)| Some((k.as_str(), p.get("const")?.as_str()?)))
            else {
                continue;
            };
            tag_name = Some(tag);
            let required: Vec<&str> = v
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let keys: Vec<String> = vprops
                .iter()
                .filter(|(k, _)| k.as_str() != tag)
                .map(|(k, p)| {
                    let t = type_of(p, defs);
                    let default = match p.get("default") {
                        _ if required.contains(&k.as_str()) => String::new(),
                        Some(Value::Null) | None if t.ends_with("(optional)") => String::new(),
                        Some(Value::Null) | None => " (optional)".to_string(),
                        Some(d) => format!(" (default `{}`)", value_text(d)),
                    };
                    format!("`{k}`: {t}{default}")
                })
                .collect();
            let what = v
                .get("description")
                .and_then(Value::as_str)
                .map(|d| paragraphs(d).replace('\n', " "))
                .unwrap_or_default();
            rows.push(format!(
                "| `{value}` | {} | {} |",
                if keys.is_empty() {
                    "—".to_string()
                } else {
                    keys.join("; ").replace('|', "\\|")
                },
                what.replace('|', "\\|")
            ));
        }
        if let Some(tag) = tag_name {
            let _ = writeln!(
                out,
                "\nEach entry of `{name}` is a table with `{tag}` naming it and its keys:\n\n| `{tag}` | Keys | What |\n|---|---|---|"
            );
            for row in rows {
                let _ = writeln!(out, "{row}");
            }
        }
    }
    out
}

/// A default value as written: JSON, with `f32` defaults in their shortest form (`0.08`,
/// not `0.07999999821186066`).
fn value_text(v: &Value) -> String {
    fn short(v: &Value) -> Value {
        match v {
            Value::Number(n) if n.is_f64() => {
                let f = n.as_f64().unwrap_or_default();
                let g = f as f32;
                match format!("{g}").parse::<f64>() {
                    Ok(p) if (p as f32) == g => {
                        serde_json::from_str(&format!("{g:?}")).unwrap_or_else(|_| v.clone())
                    }
                    _ => v.clone(),
                }
            }
            Value::Array(items) => Value::Array(items.iter().map(short).collect()),
            other => other.clone(),
        }
    }
    short(v).to_string()
}

/// The schema `$ref` points at, or the schema itself.
fn resolve<'a>(schema: &'a Value, defs: &'a Map<String, Value>) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => r
            .rsplit('/')
            .next()
            .and_then(|name| defs.get(name))
            .map_or(schema, |s| resolve(s, defs)),
        None => schema,
    }
}

/// A schema's type as a person reads it: `integer ≥ 1`, `bool`, `string`, `list of …`,
/// `table of …`, `"a" or "b"`, or a one-of of these.
fn type_of(schema: &Value, defs: &Map<String, Value>) -> String {
    let schema = resolve(schema, defs);
    if let Some(c) = schema.get("const") {
        return c.to_string();
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return values
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join(" or ");
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            let tagged: Vec<&str> = options
                .iter()
                .filter_map(|o| {
                    resolve(o, defs)
                        .get("properties")?
                        .as_object()?
                        .values()
                        .find_map(|p| p.get("const")?.as_str())
                })
                .collect();
            if tagged.len() == options.len() && !tagged.is_empty() {
                return format!("one of {} (see below)", tagged.len());
            }
            let mut parts: Vec<String> = options.iter().map(|o| type_of(o, defs)).collect();
            parts.dedup();
            return parts.join(" or ");
        }
    }
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    let nullable = types.contains(&"null");
    let t = types.iter().find(|t| **t != "null").copied().unwrap_or("");
    let base = match t {
        "integer" => match schema.get("minimum").and_then(Value::as_i64) {
            Some(m) if m > 0 => format!("integer ≥ {m}"),
            _ => "integer".to_string(),
        },
        "number" => "number".to_string(),
        "boolean" => "bool".to_string(),
        "string" => "string".to_string(),
        "array" => match schema.get("items") {
            Some(items) => format!("list of {}", type_of(items, defs)),
            None => match schema.get("prefixItems").and_then(Value::as_array) {
                Some(items) => format!(
                    "[{}]",
                    items
                        .iter()
                        .map(|i| type_of(i, defs))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                None => "list".to_string(),
            },
        },
        "object" => match (schema.get("additionalProperties"), schema.get("properties")) {
            (Some(v @ Value::Object(_)), _) => format!("table of {}", type_of(v, defs)),
            (_, Some(Value::Object(props))) if !props.is_empty() => format!(
                "table {{{}}}",
                props
                    .keys()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => "table".to_string(),
        },
        _ => "any".to_string(),
    };
    if nullable {
        format!("{base} (optional)")
    } else {
        base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_section_with_its_keys() {
        let md = reference_markdown();
        for kind in STAGES {
            assert!(
                md.contains(&format!("### `{}`", kind.kind)),
                "{}",
                kind.kind
            );
        }
        assert!(
            md.contains("| `batch_size` | integer ≥ 1 | **required** |"),
            "{md}"
        );
        assert!(md.contains("| `drop_remainder` | bool | `false` |"), "{md}");
    }
}
