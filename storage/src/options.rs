//! What the user may set: store options (credentials, endpoint, region) and how remote
//! objects are read.

use std::collections::BTreeMap;
use std::time::Duration;

/// Options for the stores, by object_store's keys (`aws_access_key_id`, `aws_endpoint`,
/// `aws_region`, `google_service_account`, `azure_storage_account_name`, ...), over what the
/// environment gives. Values are secrets as far as Sluice knows: never printed.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct StorageOptions {
    /// Key -> value.
    pub options: BTreeMap<String, String>,
    /// How objects are read.
    pub read: ReadOptions,
}

impl std::fmt::Debug for StorageOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Keys only: values may be secrets.
        f.debug_struct("StorageOptions")
            .field("keys", &self.options.keys().collect::<Vec<_>>())
            .field("read", &self.read)
            .finish()
    }
}

/// How remote objects are read: ranged requests of `block_size` bytes, `max_in_flight` of
/// them ahead of the reader (per object), each retried up to `max_retries` times with
/// exponential backoff from `initial_backoff`, resuming at the byte reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOptions {
    /// Bytes per request (default 8 MiB).
    pub block_size: u64,
    /// Requests in flight per object (default 4: 32 MiB ahead, enough to hide ~50 ms of
    /// latency at 600 MB/s per object).
    pub max_in_flight: usize,
    /// Retries of one block's request (default 10).
    pub max_retries: u32,
    /// The first backoff, doubled per retry up to 5 s (default 50 ms).
    pub initial_backoff: Duration,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            block_size: 8 << 20,
            max_in_flight: 4,
            max_retries: 10,
            initial_backoff: Duration::from_millis(50),
        }
    }
}

/// Whether `key` is a store option some scheme understands (object_store's names, in any
/// case: `aws_endpoint`, `aws_region`, `google_service_account`, `azure_storage_account_name`,
/// client keys such as `timeout` or `allow_http`, ...).
///
/// ```
/// assert!(sluice_storage::is_option_key("aws_endpoint"));
/// assert!(sluice_storage::is_option_key("AWS_REGION"));
/// assert!(!sluice_storage::is_option_key("aws_endpiont"));
/// ```
pub fn is_option_key(key: &str) -> bool {
    use object_store::ClientConfigKey;
    use object_store::aws::AmazonS3ConfigKey;
    use object_store::azure::AzureConfigKey;
    use object_store::gcp::GoogleConfigKey;
    let key = key.to_ascii_lowercase();
    key.parse::<AmazonS3ConfigKey>().is_ok()
        || key.parse::<GoogleConfigKey>().is_ok()
        || key.parse::<AzureConfigKey>().is_ok()
        || key.parse::<ClientConfigKey>().is_ok()
}
