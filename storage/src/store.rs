//! Object stores by URL: built once per (scheme, bucket or host, options), from the
//! environment and the explicit options.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::http::HttpBuilder;
use object_store::path::Path;
use object_store::{ObjectStore, RetryConfig};
use url::Url;

use crate::error::{Error, Result};
use crate::options::StorageOptions;
use crate::stats::{Counters, counters};

type Key = (String, String, Vec<(String, String)>);

/// The clients of one store.
#[derive(Clone)]
pub(crate) struct Store {
    /// With object_store's own retries: for listings, HEADs and uploads.
    pub(crate) store: Arc<dyn ObjectStore>,
    /// Without retries: for the ranged reads, which retry themselves (resuming at the byte
    /// reached) and count each attempt in the stats.
    pub(crate) data: Arc<dyn ObjectStore>,
    /// The store's counters (named by scheme and bucket or host, never by credentials).
    pub(crate) counters: Arc<Counters>,
}

static STORES: OnceLock<Mutex<HashMap<Key, Store>>> = OnceLock::new();

/// The store holding `url` and the object's path in it.
pub(crate) fn store_for(url: &Url, options: &StorageOptions) -> Result<(Store, Path)> {
    let scheme = url.scheme().to_ascii_lowercase();
    let authority = url.host_str().unwrap_or_default().to_string();
    let key: Key = (
        scheme.clone(),
        format!("{authority}:{}", url.port().unwrap_or(0)),
        options
            .options
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    );
    let path = object_path(url)?;
    let stores = STORES.get_or_init(Default::default);
    if let Some(store) = stores.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok((store.clone(), path));
    }
    let no_retries = RetryConfig {
        max_retries: 0,
        ..RetryConfig::default()
    };
    let store = Store {
        store: build(url, &scheme, options, RetryConfig::default())?,
        data: build(url, &scheme, options, no_retries)?,
        counters: counters(&format!(
            "{scheme}://{authority}{}",
            url.port().map(|p| format!(":{p}")).unwrap_or_default()
        )),
    };
    stores
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, store.clone());
    Ok((store, path))
}

/// The object's path within its store: the URL's path (for http(s), relative to the host).
fn object_path(url: &Url) -> Result<Path> {
    let raw = url.path().trim_start_matches('/');
    let decoded = percent_decode(raw);
    Path::parse(&decoded).map_err(|e| Error::InvalidUrl {
        url: url.to_string(),
        message: e.to_string(),
    })
}

fn percent_decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("x={}", s.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| s.to_string())
}

fn invalid(url: &Url, e: object_store::Error) -> Error {
    Error::InvalidUrl {
        url: url.to_string(),
        message: e.to_string(),
    }
}

fn build(
    url: &Url,
    scheme: &str,
    options: &StorageOptions,
    retry: RetryConfig,
) -> Result<Arc<dyn ObjectStore>> {
    let opts = || options.options.iter();
    let store: Arc<dyn ObjectStore> = match scheme {
        "s3" | "s3a" => {
            let bucket = url.host_str().unwrap_or_default();
            let mut b = AmazonS3Builder::from_env()
                .with_bucket_name(bucket)
                .with_retry(retry);
            // The AWS CLI's and SDKs' variable for S3-compatible servers (MinIO, moto).
            if let Ok(endpoint) = std::env::var("AWS_ENDPOINT_URL")
                && std::env::var("AWS_ENDPOINT").is_err()
            {
                b = b.with_endpoint(&endpoint);
                if endpoint.starts_with("http://") {
                    b = b.with_allow_http(true);
                }
            }
            for (k, v) in opts() {
                if let Ok(key) = k.to_ascii_lowercase().parse() {
                    b = b.with_config(key, v);
                } else {
                    return Err(unknown_key(url, k));
                }
            }
            if options
                .options
                .get("aws_endpoint")
                .is_some_and(|e| e.starts_with("http://"))
            {
                b = b.with_allow_http(true);
            }
            Arc::new(b.build().map_err(|e| invalid(url, e))?)
        }
        "gs" => {
            let bucket = url.host_str().unwrap_or_default();
            let mut b = GoogleCloudStorageBuilder::from_env()
                .with_bucket_name(bucket)
                .with_retry(retry);
            for (k, v) in opts() {
                match k.to_ascii_lowercase().parse() {
                    Ok(key) => b = b.with_config(key, v),
                    Err(_) => return Err(unknown_key(url, k)),
                }
            }
            Arc::new(b.build().map_err(|e| invalid(url, e))?)
        }
        "az" | "abfs" | "abfss" | "adl" | "azure" => {
            let mut b = MicrosoftAzureBuilder::from_env()
                .with_url(url.as_str())
                .with_retry(retry);
            for (k, v) in opts() {
                match k.to_ascii_lowercase().parse() {
                    Ok(key) => b = b.with_config(key, v),
                    Err(_) => return Err(unknown_key(url, k)),
                }
            }
            Arc::new(b.build().map_err(|e| invalid(url, e))?)
        }
        "http" | "https" => {
            let base = format!("{}://{}", url.scheme(), url.host_str().unwrap_or_default())
                + &url.port().map(|p| format!(":{p}")).unwrap_or_default();
            let b = HttpBuilder::new().with_url(base).with_retry(retry);
            Arc::new(b.build().map_err(|e| invalid(url, e))?)
        }
        other => {
            return Err(Error::InvalidUrl {
                url: url.to_string(),
                message: format!("unknown scheme `{other}`"),
            });
        }
    };
    Ok(store)
}

fn unknown_key(url: &Url, key: &str) -> Error {
    Error::InvalidUrl {
        url: url.to_string(),
        message: format!("unknown storage option `{key}`"),
    }
}
