//! `filter` in pipeline files: keep the elements whose feature passes comparisons.

use std::cmp::Ordering;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::dataset::Dataset;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::invalid::Invalid;
use crate::parallelism::{NumParallel, check_num_parallel};
use crate::registry::{AppendContext, Spec};
use crate::stages::map::{MapSpec, MapStage};
use crate::tensor::{Tensor, TensorData};

/// A value a feature is compared with: an integer, a number or a string.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Literal {
    /// An integer (compared exactly with integer features).
    Int(i64),
    /// A number.
    Float(f64),
    /// A string (compared byte for byte with string features).
    Text(String),
}

/// Keeps the elements whose scalar feature `feature` passes every comparison given
/// (`tf.data`'s `filter` with a predicate on one feature): `eq`, `ne`, `lt`, `le`, `gt`,
/// `ge` with a value, `in` / `not_in` with a list. Numbers compare as numbers (an integer
/// feature with an integer exactly), strings byte for byte. A missing feature, a feature
/// that is not a scalar, or a string compared with a number is an error naming it.
/// (From Rust, `Dataset::filter` takes any closure; in a pipeline file, a predicate of
/// your own is a `plugin` stage whose plugin is of kind `filter`, in any plugin language.)
///
/// ```toml
/// [[stage]]
/// kind = "filter"
/// feature = "label"
/// in = [0, 3, 7]
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FilterSpec {
    /// The feature compared (a scalar).
    pub feature: String,
    /// Keep when equal to this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eq: Option<Literal>,
    /// Keep when not equal to this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ne: Option<Literal>,
    /// Keep when less than this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lt: Option<Literal>,
    /// Keep when at most this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub le: Option<Literal>,
    /// Keep when greater than this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gt: Option<Literal>,
    /// Keep when at least this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ge: Option<Literal>,
    /// Keep when one of these.
    #[serde(default, rename = "in", skip_serializing_if = "Option::is_none")]
    pub is_in: Option<Vec<Literal>>,
    /// Keep when none of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_in: Option<Vec<Literal>>,
    /// Threads: sequential (default), a number, or `"auto"`.
    #[serde(default)]
    pub num_parallel: NumParallel,
}

impl FilterSpec {
    /// Whether `e` passes.
    fn keeps(&self, e: &Element) -> Result<bool> {
        let name = &self.feature;
        let t = e.tensor(name).ok_or_else(|| {
            Error::data_of(
                name,
                format!("filter: no feature `{name}` (or it is ragged)"),
            )
        })?;
        if t.len() != 1 || t.rank() > 1 {
            return Err(Error::data_of(
                name,
                format!(
                    "filter: feature `{name}` has shape {:?}: a filter compares one value",
                    t.shape()
                ),
            ));
        }
        let cmp = |lit: &Literal| {
            compare(t, lit)
                .map_err(|m| Error::data_of(name, format!("filter: feature `{name}`: {m}")))
        };
        // Each comparison, and whether an unordered value (NaN) passes it (only `ne`).
        let checks: [Check<'_>; 6] = [
            (&self.eq, |o| o == Ordering::Equal, false),
            (&self.ne, |o| o != Ordering::Equal, true),
            (&self.lt, |o| o == Ordering::Less, false),
            (&self.le, |o| o != Ordering::Greater, false),
            (&self.gt, |o| o == Ordering::Greater, false),
            (&self.ge, |o| o != Ordering::Less, false),
        ];
        for (lit, ok, unordered) in checks {
            if let Some(lit) = lit {
                let pass = match cmp(lit)? {
                    Some(o) => ok(o),
                    None => unordered,
                };
                if !pass {
                    return Ok(false);
                }
            }
        }
        if let Some(set) = &self.is_in {
            let mut found = false;
            for lit in set {
                found |= cmp(lit)? == Some(Ordering::Equal);
            }
            if !found {
                return Ok(false);
            }
        }
        if let Some(set) = &self.not_in {
            for lit in set {
                if cmp(lit)? == Some(Ordering::Equal) {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }
}

/// A comparison: its value (when given), what it accepts, and whether an unordered value
/// passes it.
type Check<'a> = (&'a Option<Literal>, fn(Ordering) -> bool, bool);

/// The scalar `t` against `lit` (`None`: unordered, a NaN).
fn compare(t: &Tensor, lit: &Literal) -> std::result::Result<Option<Ordering>, String> {
    let int = |x: i64| -> Option<Ordering> {
        match lit {
            Literal::Int(y) => Some(x.cmp(y)),
            Literal::Float(y) => (x as f64).partial_cmp(y),
            Literal::Text(_) => None,
        }
    };
    let float = |x: f64| -> Option<Ordering> {
        match lit {
            Literal::Int(y) => x.partial_cmp(&(*y as f64)),
            Literal::Float(y) => x.partial_cmp(y),
            Literal::Text(_) => None,
        }
    };
    let text_vs_number = || format!("a {} feature compared with {lit:?}", t.dtype().tf_name());
    Ok(match (t.data(), lit) {
        (TensorData::Bytes(v), Literal::Text(s)) => Some(v[0].as_ref().cmp(s.as_bytes())),
        (TensorData::Bytes(_), _) | (_, Literal::Text(_)) => return Err(text_vs_number()),
        (TensorData::I64(v), _) => int(v[0]),
        (TensorData::I32(v), _) => int(i64::from(v[0])),
        (TensorData::U8(v), _) => int(i64::from(v[0])),
        (TensorData::F32(v), _) => float(f64::from(v[0])),
        (TensorData::F64(v), _) => float(v[0]),
    })
}

impl Spec for FilterSpec {
    const KIND: &'static str = "filter";
    const SUMMARY: &'static str = "keep the elements whose feature passes comparisons";

    fn validate(&self) -> std::result::Result<(), Invalid> {
        if self.feature.is_empty() {
            return Err(Invalid::at("feature", "filter: `feature` names no feature"));
        }
        let any = [&self.eq, &self.ne, &self.lt, &self.le, &self.gt, &self.ge]
            .iter()
            .any(|c| c.is_some())
            || self.is_in.is_some()
            || self.not_in.is_some();
        if !any {
            return Err(Invalid::at(
                "feature",
                "filter: give a comparison: `eq`, `ne`, `lt`, `le`, `gt`, `ge`, `in` or `not_in`",
            ));
        }
        check_num_parallel("filter", self.num_parallel)
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> Result<Dataset> {
        let spec = Arc::new(self.clone());
        // The predicate as written labels the stage (fingerprints, `explain`).
        let label = serde_json::to_string(self).map_err(|e| Error::internal(e.to_string()))?;
        let f = Arc::new(move |e: Element, _: &mut crate::rng::ElementRng| {
            Ok(if spec.keeps(&e)? { Some(e) } else { None })
        });
        Ok(Dataset::from_stage(
            MapStage::new("filter", MapSpec::parallel(self.num_parallel), f, label),
            vec![input.clone()],
        ))
    }
}
