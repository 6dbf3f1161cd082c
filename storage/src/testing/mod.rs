//! A real S3-compatible server for tests (feature `testing`): moto's, started on 127.0.0.1
//! on a free port once per test process and stopped when the process exits. It is found as
//! `$SLUICE_MOTO_SERVER` or `moto_server` on the PATH (`pip install 'moto[server]'`).
//!
//! [`FaultProxy`] sits between a client and that server and injects failures (error
//! statuses, bodies cut short, connections reset, latency) into ranged reads.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};

use crate::options::StorageOptions;
use crate::runtime::runtime;

mod fault_proxy;
pub use fault_proxy::*;

/// The running server.
pub struct S3Server {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// Keeps the server's shell's stdin open: it kills the server when this process exits.
    _child: std::process::Child,
}

/// The access key the test server is given (moto accepts any).
pub const ACCESS_KEY: &str = "testing";
/// The secret (checked never to appear in errors).
pub const SECRET_KEY: &str = "testing-secret";

/// The server of this process, started on first use. Panics, saying how to install it,
/// when `moto_server` cannot be started.
pub fn s3_server() -> &'static S3Server {
    static SERVER: OnceLock<S3Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let moto = std::env::var("SLUICE_MOTO_SERVER").unwrap_or_else(|_| "moto_server".into());
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let script = format!(
            "{moto} -H 127.0.0.1 -p {port} >/dev/null 2>&1 & pid=$!; cat >/dev/null; kill $pid"
        );
        let child = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .spawn()
            .expect("start sh");
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the S3 test server did not start: install it with `pip install 'moto[server]'` \
                 and put `moto_server` on the PATH (or set SLUICE_MOTO_SERVER to its path)"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        S3Server {
            endpoint: format!("http://127.0.0.1:{port}"),
            _child: child,
        }
    })
}

impl S3Server {
    /// Storage options that reach this server.
    pub fn options(&self) -> StorageOptions {
        s3_options(&self.endpoint)
    }

    /// The environment variables that make every default-configured S3 read reach this
    /// server (what a user of an S3-compatible store sets).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.into()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ALLOW_HTTP", "true".into()),
        ]
    }

    /// Creates `bucket` (S3's CreateBucket, `PUT /bucket`).
    pub fn create_bucket(&self, bucket: &str) {
        let addr = self.endpoint.trim_start_matches("http://").to_string();
        let mut s = TcpStream::connect(&addr).expect("connect to the S3 test server");
        write!(
            s,
            "PUT /{bucket} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .expect("send CreateBucket");
        let mut reply = String::new();
        s.read_to_string(&mut reply).expect("read the reply");
        assert!(
            reply.starts_with("HTTP/1.1 200"),
            "CreateBucket {bucket}: {reply}"
        );
    }

    /// A client of `bucket`.
    pub fn store(&self, bucket: &str) -> AmazonS3 {
        AmazonS3Builder::new()
            .with_bucket_name(bucket)
            .with_endpoint(&self.endpoint)
            .with_allow_http(true)
            .with_access_key_id(ACCESS_KEY)
            .with_secret_access_key(SECRET_KEY)
            .with_region("us-east-1")
            .build()
            .expect("an S3 client of the test server")
    }

    /// Writes `bytes` at `key` of `bucket`.
    pub fn put(&self, bucket: &str, key: &str, bytes: Vec<u8>) {
        let store = self.store(bucket);
        runtime()
            .block_on(store.put(&Path::from(key), PutPayload::from(bytes)))
            .expect("put an object");
    }

    /// Creates `bucket` and copies every file of `dir` into it under `prefix/`.
    pub fn upload_dir(&self, bucket: &str, dir: &std::path::Path, prefix: &str) {
        self.create_bucket(bucket);
        for entry in std::fs::read_dir(dir).expect("read the directory") {
            let path = entry.expect("an entry").path();
            if path.is_file() {
                let name = path
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .to_string();
                self.put(
                    bucket,
                    &format!("{prefix}/{name}"),
                    std::fs::read(&path).expect("read"),
                );
            }
        }
    }
}

/// S3 storage options with the test credentials that reach the S3 server at `endpoint`
/// (`http://host:port`).
pub(crate) fn s3_options(endpoint: &str) -> StorageOptions {
    let mut options = BTreeMap::new();
    for (k, v) in [
        ("aws_endpoint", endpoint),
        ("aws_access_key_id", ACCESS_KEY),
        ("aws_secret_access_key", SECRET_KEY),
        ("aws_region", "us-east-1"),
        ("aws_allow_http", "true"),
    ] {
        options.insert(k.to_string(), v.to_string());
    }
    StorageOptions {
        options,
        ..StorageOptions::default()
    }
}
