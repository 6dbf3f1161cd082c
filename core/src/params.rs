//! A stage's parameters as structured data: what `explain` prints and what fingerprints
//! hash (instead of `Debug` text, whose form is not a contract).

use std::fmt::{self, Write as _};

use serde::Serialize;
use serde_json::{Map, Value};

/// The parameters of a stage: named JSON values, in a stable order (sorted by name).
///
/// ```
/// use sluice_core::Params;
/// use sluice_core::prelude::*;
///
/// let p = Params::of(&BatchSpec::new(64));
/// assert_eq!(p.get("batch_size"), Some(&serde_json::json!(64)));
/// let p = Params::new().with("fn", "my_closure").with("num_parallel", 2);
/// assert_eq!(p.to_string(), r#"fn="my_closure" num_parallel=2"#);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Params(Map<String, Value>);

impl Params {
    /// No parameters.
    pub fn new() -> Self {
        Params(Map::new())
    }

    /// The fields of a serializable spec (a struct serializes to its fields; anything else
    /// to one parameter named `value`).
    pub fn of<T: Serialize + ?Sized>(spec: &T) -> Self {
        match serde_json::to_value(spec) {
            Ok(Value::Object(map)) => Params(map),
            Ok(Value::Null) => Params::new(),
            Ok(other) => Params::new().with("value", other),
            // Specs serialize infallibly (no maps with non-string keys, no failing
            // serializers); should one not, its parameters say so rather than vanish.
            Err(e) => Params::new().with("unserializable", e.to_string()),
        }
    }

    /// These parameters with `key` set to `value`.
    pub fn with(mut self, key: &str, value: impl Serialize) -> Self {
        let value = serde_json::to_value(value).unwrap_or_else(|e| Value::String(e.to_string()));
        self.0.insert(key.to_string(), value);
        self
    }

    /// These parameters with those of `other` added (other's win on equal names).
    pub fn merged(mut self, other: Params) -> Self {
        self.0.extend(other.0);
        self
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    /// The parameters, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// These parameters without `keys` (for fingerprints that leave tuning out).
    pub fn without(&self, keys: &[&str]) -> Params {
        Params(
            self.0
                .iter()
                .filter(|(k, _)| !keys.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        )
    }

    /// The parameters as one JSON object.
    pub fn to_value(&self) -> Value {
        Value::Object(self.0.clone())
    }

    /// The canonical encoding fingerprints hash: compact JSON with sorted keys.
    pub fn canonical(&self) -> String {
        // serde_json's `Map` is a BTreeMap here (no `preserve_order`), so keys are sorted.
        Value::Object(self.0.clone()).to_string()
    }
}

impl Serialize for Params {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

/// `key=value` pairs, values as compact JSON, long arrays shortened (`[a, b, ... (16 in
/// all)]`): how `explain` shows a stage.
impl fmt::Display for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (k, v) in &self.0 {
            if !first {
                f.write_char(' ')?;
            }
            first = false;
            write!(f, "{k}={}", Short(v))?;
        }
        Ok(())
    }
}

/// A JSON value with arrays of more than [`Short::ITEMS`] items shortened.
struct Short<'a>(&'a Value);

impl Short<'_> {
    const ITEMS: usize = 3;
}

impl fmt::Display for Short<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Value::Array(items) if items.len() > Self::ITEMS => {
                f.write_char('[')?;
                for item in &items[..Self::ITEMS - 1] {
                    write!(f, "{}, ", Short(item))?;
                }
                write!(f, "... ({} in all)]", items.len())
            }
            Value::Array(items) => {
                f.write_char('[')?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{}", Short(item))?;
                }
                f.write_char(']')
            }
            Value::Object(map) => {
                f.write_char('{')?;
                for (i, (k, v)) in map.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k}: {}", Short(v))?;
                }
                f.write_char('}')
            }
            other => write!(f, "{other}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn long_arrays_are_shortened_for_people_not_for_fingerprints() {
        let p = Params::new().with("files", ["a", "b", "c", "d", "e"]);
        assert_eq!(p.to_string(), r#"files=["a", "b", ... (5 in all)]"#);
        assert_eq!(p.canonical(), r#"{"files":["a","b","c","d","e"]}"#);
    }

    #[test]
    fn keys_are_sorted_and_tuning_can_be_left_out() {
        let p = Params::new()
            .with("num_parallel", "auto")
            .with("batch_size", 8);
        assert_eq!(p.canonical(), r#"{"batch_size":8,"num_parallel":"auto"}"#);
        assert_eq!(
            p.without(&["num_parallel"]).canonical(),
            r#"{"batch_size":8}"#
        );
        assert_eq!(p.get("batch_size"), Some(&json!(8)));
    }
}
