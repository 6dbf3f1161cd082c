//! `[options]`: seed, CPU and RAM budgets, error policy.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::options::{ErrorPolicy, Options};

use crate::invalid::{Invalid as Problem, Key as Seg};

/// The `[options]` table. Every key is optional; absent keys keep [`Options::default`].
///
/// ```toml
/// [options]
/// seed = 42               # default: a random seed per run
/// cpu_budget = 4          # default: the number of CPUs; what `num_parallel = "auto"` uses
/// ram_budget = "2GiB"     # bytes, or a string with a unit; default: half the memory
/// error_policy = "skip"   # fail (default) | skip
/// map_and_batch_fusion = false  # default true: image_ops + batch run as one stage
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OptionsSpec {
    /// The seed of every random decision (shuffles, random image ops).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// The most worker threads any stage may use, and what `"auto"` means for
    /// `num_parallel` and prefetch buffers (≥ 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_budget: Option<usize>,
    /// Memory the pipeline's buffers and caches may hold (≥ 1 byte).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ram_budget: Option<ByteSize>,
    /// `fail` (default): the first failing element ends the run with its error. `skip`:
    /// failing elements (and damaged records) are dropped and counted per stage.
    pub error_policy: ErrorPolicy,
    /// Run an `image_ops` followed by a `batch` as one stage (same output; default true).
    /// See [`Options::map_and_batch_fusion`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub map_and_batch_fusion: Option<bool>,
}

impl OptionsSpec {
    /// The runtime options: [`Options::default`] with the keys that were given.
    pub fn to_options(&self) -> Options {
        let mut o = Options::default().with_error_policy(self.error_policy);
        if let Some(seed) = self.seed {
            o = o.with_seed(seed);
        }
        if let Some(n) = self.cpu_budget {
            o = o.with_cpu_budget(n);
        }
        if let Some(b) = self.ram_budget {
            o = o.with_ram_budget(b.0);
        }
        if let Some(on) = self.map_and_batch_fusion {
            o = o.with_map_and_batch_fusion(on);
        }
        o
    }

    /// Checks the values (also done when a pipeline file is built), for options given by
    /// another front end (the Python package). The error names the key.
    pub fn validate(&self) -> crate::Result<()> {
        self.check()
            .map_err(|p| crate::Error::invalid(format!("{}: {}", p.path_display(), p.message)))
    }

    pub(super) fn check(&self) -> Result<(), Problem> {
        let at = |key: &str| vec![Seg::name("options"), Seg::name(key)];
        if self.cpu_budget == Some(0) {
            return Err(Problem::new(
                at("cpu_budget"),
                "`cpu_budget` must be at least 1",
            ));
        }
        if self.ram_budget == Some(ByteSize(0)) {
            return Err(Problem::new(
                at("ram_budget"),
                "`ram_budget` must be at least 1 byte",
            ));
        }
        Ok(())
    }
}

/// A number of bytes, written as an integer or as a string with a unit: `B`, `KB`, `MB`,
/// `GB`, `TB` (powers of 1000) or `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024), case
/// insensitive, e.g. `"512MiB"`, `"1.5 GB"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

impl schemars::JsonSchema for ByteSize {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ByteSize".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A number of bytes: an integer, or a string with a unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), e.g. \"512MiB\".",
            "oneOf": [{ "type": "integer", "minimum": 0 }, { "type": "string" }]
        })
    }
}

impl ByteSize {
    /// Parses `"4GiB"`, `"100 MB"`, `"123"`.
    pub fn parse(s: &str) -> Result<ByteSize, String> {
        let s = s.trim();
        let split = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        let (number, unit) = (s[..split].trim(), s[split..].trim());
        let factor: u64 = match unit.to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "kb" => 1000,
            "mb" => 1000_u64.pow(2),
            "gb" => 1000_u64.pow(3),
            "tb" => 1000_u64.pow(4),
            "kib" => 1 << 10,
            "mib" => 1 << 20,
            "gib" => 1 << 30,
            "tib" => 1 << 40,
            _ => {
                return Err(format!(
                    "unknown unit {unit:?} in {s:?}: use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB"
                ));
            }
        };
        let value: f64 = number
            .parse()
            .map_err(|_| format!("{s:?} is not a size (e.g. 4096, \"512MiB\", \"2 GB\")"))?;
        let bytes = value * factor as f64;
        if !bytes.is_finite() || bytes > u64::MAX as f64 {
            return Err(format!("{s:?} is too large"));
        }
        Ok(ByteSize(bytes.round() as u64))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} bytes", self.0)
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = ByteSize;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number of bytes or a size such as \"512MiB\"")
            }

            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(v))
            }

            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<ByteSize, E> {
                u64::try_from(v)
                    .map(ByteSize)
                    .map_err(|_| E::custom(format!("a size cannot be negative, got {v}")))
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ByteSize, E> {
                ByteSize::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_any(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes_parse_with_and_without_units() {
        assert_eq!(ByteSize::parse("123"), Ok(ByteSize(123)));
        assert_eq!(ByteSize::parse("2GiB"), Ok(ByteSize(2 << 30)));
        assert_eq!(ByteSize::parse("1.5 gb"), Ok(ByteSize(1_500_000_000)));
        assert_eq!(ByteSize::parse("512 MiB"), Ok(ByteSize(512 << 20)));
        assert!(
            ByteSize::parse("12 parsecs")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(ByteSize::parse("lots").is_err());
    }

    #[test]
    fn absent_keys_keep_the_defaults() {
        let d = Options::default();
        let o = OptionsSpec::default().to_options();
        assert_eq!(o, d);
        let o = OptionsSpec {
            seed: Some(7),
            cpu_budget: Some(3),
            ram_budget: Some(ByteSize(1 << 20)),
            error_policy: ErrorPolicy::Skip,
            map_and_batch_fusion: Some(false),
        }
        .to_options();
        assert_eq!(
            (
                o.seed,
                o.cpu_budget,
                o.ram_budget,
                o.error_policy,
                o.map_and_batch_fusion
            ),
            (Some(7), 3, 1 << 20, ErrorPolicy::Skip, false)
        );
    }
}
