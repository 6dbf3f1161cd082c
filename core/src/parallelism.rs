//! [`NumParallel`]: how many threads a parallel stage uses.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::invalid::Invalid;

/// How many threads a parallel stage uses: written as a number, `"auto"`, or left out
/// (sequential).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NumParallel {
    /// Run on the consumer's thread, element by element (tf.data's default for `map`).
    /// Written by leaving `num_parallel` out (or as `"sequential"`).
    #[default]
    Sequential,
    /// This many worker threads (capped by the CPU budget).
    Fixed(usize),
    /// Chosen by the runtime within the CPU budget (written `"auto"`).
    Auto,
}

impl NumParallel {
    /// Worker threads to start (0: sequential) within `cpu_budget`.
    pub fn workers(self, cpu_budget: usize) -> usize {
        match self {
            NumParallel::Sequential => 0,
            NumParallel::Fixed(n) => n.clamp(1, cpu_budget.max(1)),
            NumParallel::Auto => cpu_budget.max(1),
        }
    }
}

impl From<usize> for NumParallel {
    fn from(n: usize) -> Self {
        NumParallel::Fixed(n)
    }
}

/// The message for a `num_parallel` that is neither a number nor `"auto"`.
pub(crate) const EXPECTED: &str = "`num_parallel` takes a number of threads or \"auto\"";

impl Serialize for NumParallel {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            NumParallel::Sequential => s.serialize_str("sequential"),
            NumParallel::Fixed(n) => s.serialize_u64(*n as u64),
            NumParallel::Auto => s.serialize_str("auto"),
        }
    }
}

impl<'de> Deserialize<'de> for NumParallel {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = NumParallel;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number of threads or \"auto\"")
            }

            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<NumParallel, E> {
                usize::try_from(v)
                    .map(NumParallel::Fixed)
                    .map_err(|_| E::custom(EXPECTED))
            }

            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<NumParallel, E> {
                u64::try_from(v)
                    .map_err(|_| E::custom(EXPECTED))
                    .and_then(|v| self.visit_u64(v))
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<NumParallel, E> {
                match v {
                    "auto" => Ok(NumParallel::Auto),
                    "sequential" => Ok(NumParallel::Sequential),
                    _ => Err(E::custom(EXPECTED)),
                }
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl schemars::JsonSchema for NumParallel {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NumParallel".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A number of threads, \"auto\" (the CPU budget, tuned while the pipeline runs), or \"sequential\" (on the consumer's thread, as when left out).",
            "oneOf": [
                { "type": "integer", "minimum": 1 },
                { "enum": ["auto", "sequential"] }
            ]
        })
    }
}

/// `num_parallel = 0` is impossible (sequential is the default; `"auto"` uses the budget).
pub(crate) fn check_num_parallel(kind: &str, n: NumParallel) -> Result<(), Invalid> {
    if n == NumParallel::Fixed(0) {
        return Err(Invalid::at(
            "num_parallel",
            format!(
                "{kind}: `num_parallel` must be at least 1 or \"auto\" (leave it out to run sequentially)"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_as_a_number_auto_or_sequential() {
        for (json, n) in [
            ("3", NumParallel::Fixed(3)),
            ("\"auto\"", NumParallel::Auto),
            ("\"sequential\"", NumParallel::Sequential),
        ] {
            assert_eq!(serde_json::from_str::<NumParallel>(json).unwrap(), n);
            assert_eq!(serde_json::to_string(&n).unwrap(), json);
        }
        let e = serde_json::from_str::<NumParallel>("\"many\"").unwrap_err();
        assert!(e.to_string().contains(EXPECTED), "{e}");
        assert!(serde_json::from_str::<NumParallel>("-1").is_err());
    }
}
