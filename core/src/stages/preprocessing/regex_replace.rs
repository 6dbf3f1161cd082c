//! `regex_replace`: rewrite byte strings where a regular expression matches
//! (`tf.strings.regex_replace`).

use std::borrow::Cow;

use bytes::Bytes;
use regex::bytes::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{FeatureLayer, LayerFn, check_input, one_input, wrong_dtype};
use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::invalid::Invalid;
use crate::registry::{AppendContext, Spec};
use crate::tensor::{Shared, Tensor, TensorData};

/// Replaces the matches of `pattern` in each string of `input` with `rewrite`
/// (`tf.strings.regex_replace(input, pattern, rewrite, replace_global)`): every match, or
/// only the first with `replace_global = false`. The syntax is RE2's, as TensorFlow's
/// (the `regex` crate implements it: Perl classes, Unicode classes, no backreferences or
/// look-around); `rewrite` names groups as RE2 does, `\1` to `\9` (`\0` the whole match,
/// `\\` a backslash). Strings are matched as UTF-8 where they are, bytes elsewhere.
///
/// The IMDB tutorial's custom standardization, before `text_vectorization`:
///
/// ```toml
/// [[stage]]
/// kind = "regex_replace"
/// input = "text"
/// pattern = "<br />"
/// rewrite = " "
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegexReplaceSpec {
    /// The feature read (byte strings, any shape).
    pub input: String,
    /// The feature written (default: `input`, replaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The regular expression (RE2 syntax).
    pub pattern: String,
    /// What each match becomes (`\1` ... `\9` insert groups).
    pub rewrite: String,
    /// Replace every match (default true), or only the first.
    #[serde(default = "yes")]
    pub replace_global: bool,
}

fn yes() -> bool {
    true
}

impl Spec for RegexReplaceSpec {
    const KIND: &'static str = "regex_replace";
    const SUMMARY: &'static str =
        "rewrite strings where a regular expression matches (`tf.strings.regex_replace`)";

    fn validate(&self) -> std::result::Result<(), Invalid> {
        check_input(Self::KIND, &self.input)?;
        Regex::new(&self.pattern).map_err(|e| {
            Invalid::at(
                "pattern",
                format!("regex_replace: invalid pattern {:?}: {e}", self.pattern),
            )
        })?;
        rewrite_template(&self.rewrite).map_err(|m| Invalid::at("rewrite", m))?;
        Ok(())
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> Result<Dataset> {
        Ok(input.preprocess(self.clone()))
    }
}

impl FeatureLayer for RegexReplaceSpec {
    fn input(&self) -> &str {
        &self.input
    }

    fn output(&self) -> Option<&str> {
        self.output.as_deref()
    }

    fn layer(&self) -> Result<LayerFn> {
        let invalid =
            |e: regex::Error| Error::invalid(format!("regex_replace: invalid pattern: {e}"));
        // UTF-8 text is matched by character (an empty match never splits one, as in RE2);
        // other bytes by byte.
        let text = regex::Regex::new(&self.pattern).map_err(invalid)?;
        let bytes = Regex::new(&self.pattern).map_err(invalid)?;
        let rewrite = rewrite_template(&self.rewrite).map_err(Error::invalid)?;
        let rewrite_text = String::from_utf8(rewrite.clone())
            .map_err(|_| Error::invalid("regex_replace: `rewrite` is not UTF-8"))?;
        let global = self.replace_global;
        Ok(one_input(move |t| {
            let TensorData::Bytes(strings) = t.data() else {
                return Err(wrong_dtype(t, "byte strings"));
            };
            let out: Vec<Bytes> = strings
                .iter()
                .map(|s| {
                    let limit = if global { 0 } else { 1 };
                    match std::str::from_utf8(s) {
                        Ok(t) => match text.replacen(t, limit, rewrite_text.as_str()) {
                            Cow::Borrowed(_) => s.clone(),
                            Cow::Owned(v) => Bytes::from(v),
                        },
                        Err(_) => match bytes.replacen(s, limit, rewrite.as_slice()) {
                            Cow::Borrowed(_) => s.clone(),
                            Cow::Owned(v) => Bytes::from(v),
                        },
                    }
                })
                .collect();
            Tensor::new(t.shape(), TensorData::Bytes(Shared::new(out))).map_err(Error::from)
        }))
    }
}

/// RE2's rewrite string (`\N` a group, `\\` a backslash) as a `regex` replacement
/// (`${N}`, `$$` a dollar); any other backslash is an error, as in RE2.
fn rewrite_template(rewrite: &str) -> std::result::Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(rewrite.len());
    let mut chars = rewrite.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(d @ '0'..='9') => out.extend_from_slice(format!("${{{d}}}").as_bytes()),
                Some('\\') => out.push(b'\\'),
                other => {
                    return Err(format!(
                        "regex_replace: `rewrite` {rewrite:?}: a backslash must be followed by \
                         a digit (a group) or a backslash, not {}",
                        other.map_or("the end".to_string(), |c| format!("{c:?}"))
                    ));
                }
            },
            '$' => out.extend_from_slice(b"$$"),
            c => {
                let mut buf = [0; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_translate_re2_groups() {
        assert_eq!(rewrite_template(r"<\1>$\\").unwrap(), b"<${1}>$$\\");
        assert!(rewrite_template(r"\x").is_err());
        assert!(rewrite_template("\\").is_err());
    }
}
