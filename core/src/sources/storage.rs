//! `storage`: how object-store URLs are reached (credentials, endpoint, region) and read
//! (block size, requests in flight, retries), over what the environment gives.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

use crate::invalid::{Invalid, Key};
use crate::pipeline_file::ByteSize;

/// What the user writes under `[source.storage]` (or `storage=` in Python): object_store's
/// option keys for the stores (`aws_endpoint`, `aws_region`, `aws_access_key_id`,
/// `google_service_account`, `azure_storage_account_name`, `timeout`, ...), and three keys of
/// Sluice's own for reading. Empty (the default): the environment alone decides.
///
/// ```toml
/// [source.storage]
/// aws_endpoint = "http://127.0.0.1:9000"   # an S3-compatible server (MinIO, moto, ...)
/// aws_region = "us-east-1"
/// block_size = "8MiB"                      # bytes per ranged request
/// max_in_flight = 4                        # requests ahead of the reader, per file
/// max_retries = 10                         # per request, resuming at the byte reached
/// ```
///
/// Values may be secrets: they are never printed (`Debug` shows the keys only).
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageSpec {
    /// Bytes per ranged request. Default 8 MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_size: Option<ByteSize>,
    /// Requests kept in flight ahead of the reader, per file. Default 4.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_in_flight: Option<usize>,
    /// Retries of one request (throttling, 5xx, resets, bodies cut short). Default 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// Store options by object_store's keys (case-insensitive).
    #[serde(flatten, deserialize_with = "scalar_map")]
    pub options: BTreeMap<String, String>,
}

impl fmt::Debug for StorageSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StorageSpec")
            .field("block_size", &self.block_size)
            .field("max_in_flight", &self.max_in_flight)
            .field("max_retries", &self.max_retries)
            .field("options", &self.options.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl StorageSpec {
    /// True when nothing is set.
    pub fn is_empty(&self) -> bool {
        *self == StorageSpec::default()
    }

    /// What `explain`, stats and fingerprints show of it: Sluice's keys with their values,
    /// the store options' keys with `"<set>"` (their values may be secrets).
    pub fn redacted(&self) -> serde_json::Value {
        let mut out = serde_json::Map::new();
        if let Some(b) = self.block_size {
            out.insert("block_size".into(), b.0.into());
        }
        if let Some(n) = self.max_in_flight {
            out.insert("max_in_flight".into(), n.into());
        }
        if let Some(n) = self.max_retries {
            out.insert("max_retries".into(), n.into());
        }
        for key in self.options.keys() {
            out.insert(key.clone(), "<set>".into());
        }
        serde_json::Value::Object(out)
    }

    /// The running options.
    pub fn to_options(&self) -> sluice_storage::StorageOptions {
        let d = sluice_storage::ReadOptions::default();
        sluice_storage::StorageOptions {
            options: self.options.clone(),
            read: sluice_storage::ReadOptions {
                block_size: self.block_size.map_or(d.block_size, |b| b.0),
                max_in_flight: self.max_in_flight.unwrap_or(d.max_in_flight),
                max_retries: self.max_retries.unwrap_or(d.max_retries),
                ..d
            },
        }
    }

    /// Checks the keys and values; `at` is where the table is (for the error's path).
    pub(crate) fn check(&self, at: &[Key]) -> Result<(), Invalid> {
        let path = |key: &str| {
            let mut p = at.to_vec();
            p.push(Key::name(key));
            p
        };
        if self.block_size == Some(ByteSize(0)) {
            return Err(Invalid::new(
                path("block_size"),
                "`block_size` must be at least 1 byte",
            ));
        }
        if self.max_in_flight == Some(0) {
            return Err(Invalid::new(
                path("max_in_flight"),
                "`max_in_flight` must be at least 1",
            ));
        }
        if let Some(key) = self
            .options
            .keys()
            .find(|k| !sluice_storage::is_option_key(k))
        {
            return Err(Invalid::new(
                path(key),
                format!(
                    "unknown storage option `{key}`: use object_store's keys (aws_endpoint, \
                     aws_region, aws_access_key_id, google_service_account, \
                     azure_storage_account_name, timeout, ...) or block_size, max_in_flight, \
                     max_retries"
                ),
            ));
        }
        Ok(())
    }
}

/// A table of scalars, each kept as its text (`aws_allow_http = true` is `"true"`).
fn scalar_map<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Scalar {
        Text(String),
        Bool(bool),
        Int(i64),
        Float(f64),
    }
    let map = BTreeMap::<String, Scalar>::deserialize(d)?;
    Ok(map
        .into_iter()
        .map(|(k, v)| {
            let text = match v {
                Scalar::Text(s) => s,
                Scalar::Bool(b) => b.to_string(),
                Scalar::Int(i) => i.to_string(),
                Scalar::Float(f) => f.to_string(),
            };
            (k, text)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_sluice_and_of_the_stores_split_and_values_stay_private() {
        let spec: StorageSpec = toml::from_str(
            "block_size = \"1MiB\"\nmax_in_flight = 8\naws_endpoint = \"http://x:9\"\n\
             aws_allow_http = true\naws_secret_access_key = \"hunter2\"",
        )
        .unwrap();
        assert_eq!(spec.block_size, Some(ByteSize(1 << 20)));
        assert_eq!(spec.max_in_flight, Some(8));
        assert_eq!(spec.options["aws_allow_http"], "true");
        let options = spec.to_options();
        assert_eq!(options.read.block_size, 1 << 20);
        assert_eq!(options.read.max_in_flight, 8);
        assert_eq!(options.options.len(), 3);
        assert!(!format!("{spec:?}").contains("hunter2"));
        assert!(!spec.redacted().to_string().contains("hunter2"));
        assert_eq!(spec.redacted()["aws_secret_access_key"], "<set>");
        assert!(spec.check(&[]).is_ok());
        // Round trip through the serialized form.
        let again: StorageSpec = toml::from_str(&toml::to_string(&spec).unwrap()).unwrap();
        assert_eq!(again, spec);
    }

    #[test]
    fn unknown_keys_and_zero_sizes_are_refused() {
        let typo: StorageSpec = toml::from_str("aws_endpiont = \"x\"").unwrap();
        let e = typo.check(&[Key::name("storage")]).unwrap_err();
        assert!(e.to_string().contains("aws_endpiont"), "{e}");
        let zero: StorageSpec = toml::from_str("max_in_flight = 0").unwrap();
        assert!(zero.check(&[]).is_err());
    }
}
