//! `[inputs.NAME]` and the sources that combine them: `zip`, `concatenate`,
//! `sample_from`, `choose_from` (tf.data's `Dataset.zip`, `concatenate`,
//! `sample_from_datasets`, `choose_from_datasets`).
//!
//! ```toml
//! # Two corpora, 70 % / 30 %, each read and parsed on its own.
//! [inputs.en.source]
//! files = ["en-*.tfrecord"]
//! [[inputs.en.stage]]
//! kind = "parse_example"
//! features.text = { dtype = "string" }
//!
//! [inputs.de.source]
//! format = "text_lines"
//! files = ["de-*.txt"]
//!
//! [source]
//! format = "sample_from"
//! inputs = ["en", "de"]
//! weights = [0.7, 0.3]
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::dataset::Dataset;
use crate::error::Result;
use crate::invalid::{Invalid as Problem, Key as Seg};
use crate::registry::StageSpec;
use crate::stages::choose_from::ChooseFromSpec;
use crate::stages::sample_from::SampleFromSpec;

use super::SourceSpec;

/// One `[inputs.NAME]` table: a pipeline of its own (a `source` and `stage`s, no options:
/// the whole file's `[options]` apply) that a combining source reads by its name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputSpec {
    /// What it reads (itself possibly a combining source over other inputs).
    pub source: SourceSpec,
    /// Its stages, in order.
    #[serde(default, rename = "stage", skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<StageSpec>,
}

/// A source made of named inputs (`format = "zip" | "concatenate" | "sample_from" |
/// "choose_from"`, with `inputs = [...]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CombineSpec {
    /// `zip`: the i-th elements of every input merged (names must not clash); ends with
    /// the shortest.
    Zip(InputsKeys),
    /// `concatenate`: every element of the first input, then of the next, ...
    Concatenate(InputsKeys),
    /// `sample_from`: [`SampleFromKeys`].
    SampleFrom(SampleFromKeys),
    /// `choose_from`: [`ChooseFromKeys`].
    ChooseFrom(ChooseFromKeys),
}

/// The keys of `zip` and `concatenate`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputsKeys {
    /// The inputs' names, in order (at least one; concatenate: at least two).
    pub inputs: Vec<String>,
}

/// The keys of `sample_from` (`tf.data.Dataset.sample_from_datasets`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SampleFromKeys {
    /// The inputs' names.
    pub inputs: Vec<String>,
    /// One non-negative weight per input, not all zero (default: equal weights).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<Vec<f64>>,
    /// A seed for the draws (default: the pipeline's seed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// End as soon as one input is exhausted (default false: it leaves the draw).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stop_on_empty_dataset: bool,
}

// Weights are checked finite (not NaN) before use, so equality is an equivalence on every
// spec that runs; a source spec is `Eq` for the file formats' sake.
impl Eq for SampleFromKeys {}

/// The keys of `choose_from` (`tf.data.Dataset.choose_from_datasets`): which input each
/// element comes from, as a list of indices into `inputs` (`choices`, e.g. `[0, 1, 2]`
/// for round robin, read `repeat_choices` times) or as the `int64` scalar
/// `choice_feature` of another input's elements (`choice_input`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChooseFromKeys {
    /// The data inputs' names; a choice `i` takes the next element of `inputs[i]`.
    pub inputs: Vec<String>,
    /// The choices, indices into `inputs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choices: Option<Vec<i64>>,
    /// How many times `choices` is read: a number, or `"forever"` (then the source ends
    /// when a chosen input is exhausted). Default 1.
    #[serde(default, skip_serializing_if = "Repeat::is_once")]
    pub repeat_choices: Repeat,
    /// Or: an input whose elements give the choices, in place of `choices`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice_input: Option<String>,
    /// The choice input's feature holding the index (default `value`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice_feature: Option<String>,
    /// End as soon as a chosen input is exhausted (default true, as TensorFlow's);
    /// `false` drops that input, skips later choices of it, and ends when every input is.
    #[serde(default = "yes", skip_serializing_if = "Clone::clone")]
    pub stop_on_empty_dataset: bool,
}

fn yes() -> bool {
    true
}

/// A number of passes, or `"forever"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Repeat {
    /// This many passes.
    Times(u64),
    /// `"forever"`.
    Forever(Forever),
}

/// The word `forever`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Forever {
    /// Without end.
    Forever,
}

impl Default for Repeat {
    fn default() -> Self {
        Repeat::Times(1)
    }
}

impl Repeat {
    fn is_once(&self) -> bool {
        *self == Repeat::Times(1)
    }
}

impl CombineSpec {
    /// The `format` names of combining sources.
    pub const NAMES: &[&str] = &["zip", "concatenate", "sample_from", "choose_from"];

    /// Its `format` name.
    pub fn name(&self) -> &'static str {
        match self {
            CombineSpec::Zip(_) => "zip",
            CombineSpec::Concatenate(_) => "concatenate",
            CombineSpec::SampleFrom(_) => "sample_from",
            CombineSpec::ChooseFrom(_) => "choose_from",
        }
    }

    /// The inputs it reads, by name, in order (a `choice_input` last).
    pub fn inputs(&self) -> Vec<&str> {
        let mut names: Vec<&str> = match self {
            CombineSpec::Zip(k) | CombineSpec::Concatenate(k) => &k.inputs,
            CombineSpec::SampleFrom(k) => &k.inputs,
            CombineSpec::ChooseFrom(k) => &k.inputs,
        }
        .iter()
        .map(String::as_str)
        .collect();
        if let CombineSpec::ChooseFrom(ChooseFromKeys {
            choice_input: Some(c),
            ..
        }) = self
        {
            names.push(c);
        }
        names
    }

    /// Its keys as a TOML table (for [`SourceSpec`]'s `Serialize`).
    pub(crate) fn keys(&self) -> std::result::Result<toml::Value, toml::ser::Error> {
        match self {
            CombineSpec::Zip(k) | CombineSpec::Concatenate(k) => toml::Value::try_from(k),
            CombineSpec::SampleFrom(k) => toml::Value::try_from(k),
            CombineSpec::ChooseFrom(k) => toml::Value::try_from(k),
        }
    }

    /// Reads the keys of the combining source `name` (one of [`CombineSpec::NAMES`]).
    pub(crate) fn deserialize<'de, D: serde::Deserializer<'de>>(
        name: &str,
        d: D,
    ) -> std::result::Result<CombineSpec, D::Error> {
        Ok(match name {
            "zip" => CombineSpec::Zip(InputsKeys::deserialize(d)?),
            "concatenate" => CombineSpec::Concatenate(InputsKeys::deserialize(d)?),
            "sample_from" => CombineSpec::SampleFrom(SampleFromKeys::deserialize(d)?),
            _ => CombineSpec::ChooseFrom(ChooseFromKeys::deserialize(d)?),
        })
    }

    /// Checks what can be checked without the other inputs (`at` is the source table's
    /// path); the names are checked by [`check_graph`].
    pub(crate) fn check(&self, at: &[Seg]) -> std::result::Result<(), Problem> {
        let key = |k: &str| {
            let mut p = at.to_vec();
            p.push(Seg::name(k));
            p
        };
        let names = self.inputs();
        let data = match self {
            CombineSpec::ChooseFrom(k) => k.inputs.len(),
            _ => names.len(),
        };
        let least = if matches!(self, CombineSpec::Concatenate(_)) {
            2
        } else {
            1
        };
        if data < least {
            return Err(Problem::new(
                key("inputs"),
                format!(
                    "format {:?} needs at least {least} input{} in `inputs`",
                    self.name(),
                    if least == 1 { "" } else { "s" }
                ),
            ));
        }
        match self {
            CombineSpec::SampleFrom(k) => {
                if let Some(w) = &k.weights {
                    let spec = SampleFromSpec {
                        weights: w.clone(),
                        seed: k.seed,
                        stop_on_empty: k.stop_on_empty_dataset,
                    };
                    if w.len() != k.inputs.len() {
                        return Err(Problem::new(
                            key("weights"),
                            format!(
                                "{} inputs but {} weights: give one weight per input",
                                k.inputs.len(),
                                w.len()
                            ),
                        ));
                    }
                    crate::Stage::validate(&spec).map_err(|p| p.under(at))?;
                }
            }
            CombineSpec::ChooseFrom(k) => match (&k.choices, &k.choice_input) {
                (Some(_), Some(_)) | (None, None) => {
                    return Err(Problem::new(
                        key("choices"),
                        "format \"choose_from\" takes its choices from `choices` (a list of \
                         indices into `inputs`) or from `choice_input` (an input's elements), \
                         one of the two",
                    ));
                }
                (Some(choices), None) => {
                    if let Some((i, c)) = choices
                        .iter()
                        .enumerate()
                        .find(|(_, c)| **c < 0 || **c as usize >= k.inputs.len())
                    {
                        let mut p = key("choices");
                        p.push(Seg::Index(i));
                        return Err(Problem::new(
                            p,
                            format!(
                                "choice {c} is not an index into `inputs` (0 to {})",
                                k.inputs.len() - 1
                            ),
                        ));
                    }
                    if k.choice_feature.is_some() {
                        return Err(Problem::new(
                            key("choice_feature"),
                            "`choice_feature` names the feature of `choice_input`'s elements; \
                             it does not apply to `choices`",
                        ));
                    }
                    if k.repeat_choices == Repeat::Times(0) {
                        return Err(Problem::new(
                            key("repeat_choices"),
                            "`repeat_choices` must be at least 1, or \"forever\"",
                        ));
                    }
                }
                (None, Some(_)) => {
                    if !k.repeat_choices.is_once() {
                        return Err(Problem::new(
                            key("repeat_choices"),
                            "`repeat_choices` applies to `choices`; repeat the choice input \
                             with a `repeat` stage",
                        ));
                    }
                }
            },
            CombineSpec::Zip(_) | CombineSpec::Concatenate(_) => {}
        }
        Ok(())
    }

    /// The dataset combining `inputs` (the datasets of [`CombineSpec::inputs`], in order).
    pub(crate) fn dataset(&self, mut inputs: Vec<Dataset>) -> Dataset {
        match self {
            CombineSpec::Zip(_) => Dataset::zip(inputs),
            CombineSpec::Concatenate(_) => {
                let mut it = inputs.into_iter();
                let first = it.next().expect("checked: at least two inputs");
                it.fold(first, |acc, d| acc.concatenate(&d))
            }
            CombineSpec::SampleFrom(k) => {
                let n = inputs.len();
                let spec = SampleFromSpec {
                    weights: k.weights.clone().unwrap_or_else(|| vec![1.0; n]),
                    seed: k.seed,
                    stop_on_empty: k.stop_on_empty_dataset,
                };
                Dataset::from_stage(spec, inputs)
            }
            CombineSpec::ChooseFrom(k) => {
                let mut spec = ChooseFromSpec {
                    stop_on_empty: k.stop_on_empty_dataset,
                    ..ChooseFromSpec::default()
                };
                let choices = match &k.choices {
                    Some(choices) => {
                        let once = Dataset::from_elements(
                            choices
                                .iter()
                                .enumerate()
                                .map(|(i, c)| {
                                    crate::Element::scalar_i64(
                                        crate::ElementId::new(0, i as u64),
                                        "value",
                                        *c,
                                    )
                                })
                                .collect(),
                        );
                        match k.repeat_choices {
                            Repeat::Times(1) => once,
                            Repeat::Times(n) => once.repeat(Some(n)),
                            Repeat::Forever(_) => once.repeat(None),
                        }
                    }
                    None => {
                        if let Some(f) = &k.choice_feature {
                            spec.feature = f.clone();
                        }
                        inputs.pop().expect("checked: the choice input is last")
                    }
                };
                Dataset::choose_from_with(spec, inputs, &choices)
            }
        }
    }
}

/// Checks that every input a combining source names exists, that no input reads itself
/// (directly or through others), and that every input is read.
pub(crate) fn check_graph(
    source: &SourceSpec,
    inputs: &BTreeMap<String, InputSpec>,
) -> std::result::Result<(), Problem> {
    fn visit<'a>(
        source: &'a SourceSpec,
        at: Vec<Seg>,
        inputs: &'a BTreeMap<String, InputSpec>,
        path: &mut Vec<&'a str>,
        seen: &mut std::collections::BTreeSet<&'a str>,
    ) -> std::result::Result<(), Problem> {
        let Some(combine) = source.combine() else {
            return Ok(());
        };
        for name in combine.inputs() {
            let Some((key, input)) = inputs.get_key_value(name) else {
                let mut p = at.clone();
                p.push(Seg::name("inputs"));
                let known: Vec<&str> = inputs.keys().map(String::as_str).collect();
                let mut message = format!("no input named `{name}`");
                match super::closest(name, known.iter().copied()) {
                    Some(s) => message.push_str(&format!("; did you mean `{s}`?")),
                    None if known.is_empty() => {
                        message.push_str(" (define it as an [inputs.NAME] table)")
                    }
                    None => message.push_str(&format!(
                        " (the inputs are {})",
                        known
                            .iter()
                            .map(|k| format!("`{k}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                }
                return Err(Problem::new(p, message));
            };
            if path.contains(&name) {
                return Err(Problem::new(
                    vec![Seg::name("inputs"), Seg::name(name)],
                    format!(
                        "input `{name}` reads itself (through {})",
                        path.iter()
                            .chain(std::iter::once(&name))
                            .map(|n| format!("`{n}`"))
                            .collect::<Vec<_>>()
                            .join(" -> ")
                    ),
                ));
            }
            seen.insert(key);
            path.push(key);
            visit(
                &input.source,
                vec![Seg::name("inputs"), Seg::name(name), Seg::name("source")],
                inputs,
                path,
                seen,
            )?;
            path.pop();
        }
        Ok(())
    }
    let mut seen = std::collections::BTreeSet::new();
    visit(
        source,
        vec![Seg::name("source")],
        inputs,
        &mut Vec::new(),
        &mut seen,
    )?;
    if let Some(unused) = inputs.keys().find(|k| !seen.contains(k.as_str())) {
        return Err(Problem::new(
            vec![Seg::name("inputs"), Seg::name(unused)],
            format!(
                "input `{unused}` is not read: name it in the `inputs` of a source with format \
                 {}",
                CombineSpec::NAMES
                    .iter()
                    .map(|n| format!("{n:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    Ok(())
}

/// The order in which inputs are built (each after the inputs it reads), each once:
/// the order their plugins are loaded in.
pub(crate) fn build_order<'a>(
    source: &'a SourceSpec,
    inputs: &'a BTreeMap<String, InputSpec>,
) -> Vec<&'a str> {
    fn visit<'a>(
        source: &'a SourceSpec,
        inputs: &'a BTreeMap<String, InputSpec>,
        order: &mut Vec<&'a str>,
    ) {
        let Some(combine) = source.combine() else {
            return;
        };
        for name in combine.inputs() {
            if let Some((key, input)) = inputs.get_key_value(name)
                && !order.contains(&key.as_str())
            {
                visit(&input.source, inputs, order);
                order.push(key);
            }
        }
    }
    let mut order = Vec::new();
    visit(source, inputs, &mut order);
    order
}

/// Builds the dataset of `source`, given the datasets of the inputs built so far.
pub(crate) fn source_dataset(
    source: &SourceSpec,
    built: &BTreeMap<&str, Dataset>,
) -> Result<Dataset> {
    match source.combine() {
        None => source.dataset(),
        Some(combine) => {
            let inputs = combine
                .inputs()
                .iter()
                .map(|n| {
                    built
                        .get(n)
                        .cloned()
                        .ok_or_else(|| crate::Error::internal(format!("input `{n}` was not built")))
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(combine.dataset(inputs))
        }
    }
}
