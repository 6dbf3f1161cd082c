//! A fault-injecting HTTP/1.1 proxy for tests: it forwards each request to an upstream
//! server (moto's S3) and, for ranged GETs, can answer with an error status instead, cut the
//! body short, or close the connection without a response; every request can be delayed.
//!
//! Plain std threads: one accepting, one per client connection. Each client connection
//! carries one request: it is forwarded on a fresh upstream connection with
//! `Connection: close`, and the response (its `Connection` header rewritten to `close`) is
//! streamed back before the client connection is closed. An I/O error on either side just
//! drops the connection; no proxy thread panics.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::options::StorageOptions;

/// How long a proxy thread waits on a silent socket before dropping the connection.
const IO_TIMEOUT: Duration = Duration::from_secs(60);
/// The largest request or response head accepted.
const MAX_HEAD: usize = 1 << 20;
/// The buffer response bodies are streamed through.
const COPY_BUFFER: usize = 512 << 10;

/// A fault-injecting HTTP/1.1 proxy in front of an S3-compatible server, for tests and
/// benchmarks. Each client connection carries one request, forwarded on a fresh upstream
/// connection; the response is streamed back with `Connection: close`.
///
/// Faults apply to GET requests with a `Range` header (the ranged reads of
/// [`crate::RemoteReader`]); listings, HEADs and uploads pass through untouched, except for
/// [`FaultProxy::latency`], which delays every request. Pending one-shot faults are used in
/// the order resets, then failures, then cuts; [`FaultProxy::fail_always`] applies when none
/// is pending. The proxy stops accepting connections when dropped.
///
/// ```no_run
/// use sluice_storage::testing::{FaultProxy, s3_server};
///
/// let proxy = FaultProxy::start(&s3_server().endpoint);
/// proxy.fail_next(3, 503); // the next 3 ranged GETs get 503 SlowDown
/// let options = proxy.options(); // S3 options that reach moto through the proxy
/// # let _ = options;
/// ```
pub struct FaultProxy {
    endpoint: String,
    addr: SocketAddr,
    shared: Arc<Shared>,
}

/// What the proxy threads share with the handle.
struct Shared {
    /// `host:port` of the upstream server.
    upstream: String,
    faults: Mutex<Faults>,
    requests: AtomicU64,
    range_gets: AtomicU64,
    faults_injected: AtomicU64,
    stop: AtomicBool,
}

/// The faults configured.
#[derive(Debug, Default)]
struct Faults {
    latency: Duration,
    fail_next: u64,
    fail_status: u16,
    cut_next: u64,
    cut_after: u64,
    reset_next: u64,
    always: Option<u16>,
}

/// What to do with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// Forward it and return the response as it is.
    Forward,
    /// Forward it; if a cut is still pending and the body is longer than this, send only
    /// this many bytes of it.
    Cut(u64),
    /// Close the connection without a response.
    Reset,
    /// Answer with this status and an S3-style error body, without forwarding.
    Fail(u16),
}

impl FaultProxy {
    /// Starts a proxy on `127.0.0.1` (a free port) forwarding to `upstream_endpoint`
    /// (`http://host:port`, as [`crate::testing::S3Server::endpoint`]), with no fault set.
    ///
    /// # Panics
    ///
    /// When the endpoint is not a plain `http://host:port` or no port can be bound.
    pub fn start(upstream_endpoint: &str) -> FaultProxy {
        let upstream = upstream_endpoint
            .trim()
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        assert!(
            !upstream.is_empty() && !upstream.contains('/'),
            "the fault proxy forwards to a plain http://host:port endpoint, not {upstream_endpoint:?}"
        );
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fault proxy's port");
        let addr = listener
            .local_addr()
            .expect("the fault proxy's local address");
        let shared = Arc::new(Shared {
            upstream,
            faults: Mutex::new(Faults::default()),
            requests: AtomicU64::new(0),
            range_gets: AtomicU64::new(0),
            faults_injected: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        });
        let accepting = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("fault-proxy".into())
            .spawn(move || accept_loop(&listener, &accepting))
            .expect("start the fault proxy's thread");
        FaultProxy {
            endpoint: format!("http://{addr}"),
            addr,
            shared,
        }
    }

    /// `http://127.0.0.1:PORT`: where clients connect.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// S3 storage options (the test credentials of [`crate::testing::S3Server::options`])
    /// whose endpoint is this proxy, so reads reach the upstream server through it.
    pub fn options(&self) -> StorageOptions {
        super::s3_options(&self.endpoint)
    }

    /// Delays every request (of any method) by `latency` before it is forwarded or
    /// answered; zero removes the delay.
    pub fn latency(&self, latency: Duration) {
        self.shared.faults().latency = latency;
    }

    /// The next `n` ranged GETs are answered with `status` and an S3-style XML error body
    /// (503 is `SlowDown`, 500 `InternalError`, 403 `AccessDenied`, 404 `NoSuchKey`, 412
    /// `PreconditionFailed`), without reaching the upstream server. Replaces the previous
    /// count.
    pub fn fail_next(&self, n: u64, status: u16) {
        let mut faults = self.shared.faults();
        faults.fail_next = n;
        faults.fail_status = status;
    }

    /// The next `n` ranged GETs whose response body is longer than `after_bytes` get the
    /// response head (its `Content-Length` unchanged) and only the first `after_bytes`
    /// bytes of the body, then the connection is closed. Responses that are errors or no
    /// longer than `after_bytes` pass whole and do not use up a cut. Replaces the previous
    /// count.
    pub fn cut_next(&self, n: u64, after_bytes: u64) {
        let mut faults = self.shared.faults();
        faults.cut_next = n;
        faults.cut_after = after_bytes;
    }

    /// The connections of the next `n` ranged GETs are closed without any response (after
    /// the request was read). Replaces the previous count.
    pub fn reset_next(&self, n: u64) {
        self.shared.faults().reset_next = n;
    }

    /// Every ranged GET, when no one-shot fault is pending, is answered with `status` (as in
    /// [`FaultProxy::fail_next`]) until [`FaultProxy::clear`].
    pub fn fail_always(&self, status: u16) {
        self.shared.faults().always = Some(status);
    }

    /// Removes every fault: pending ones, [`FaultProxy::fail_always`] and the latency.
    /// The counters are kept.
    pub fn clear(&self) {
        *self.shared.faults() = Faults::default();
    }

    /// Requests received so far (every method).
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::SeqCst)
    }

    /// Ranged GETs received so far (faulted or not).
    pub fn range_gets(&self) -> u64 {
        self.shared.range_gets.load(Ordering::SeqCst)
    }

    /// Faults injected so far: error responses, cut bodies and resets (not latency).
    pub fn faults_injected(&self) -> u64 {
        self.shared.faults_injected.load(Ordering::SeqCst)
    }
}

impl std::fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultProxy")
            .field("endpoint", &self.endpoint)
            .field("upstream", &self.shared.upstream)
            .field("faults", &*self.shared.faults())
            .field("requests", &self.requests())
            .field("range_gets", &self.range_gets())
            .field("faults_injected", &self.faults_injected())
            .finish()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accepting thread so it sees the flag and closes the port.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

impl Shared {
    fn faults(&self) -> MutexGuard<'_, Faults> {
        self.faults.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The fault for the next ranged GET (using up a pending reset or failure).
    fn plan(&self) -> Plan {
        let mut faults = self.faults();
        if faults.reset_next > 0 {
            faults.reset_next -= 1;
            Plan::Reset
        } else if faults.fail_next > 0 {
            faults.fail_next -= 1;
            Plan::Fail(faults.fail_status)
        } else if faults.cut_next > 0 {
            Plan::Cut(faults.cut_after)
        } else if let Some(status) = faults.always {
            Plan::Fail(status)
        } else {
            Plan::Forward
        }
    }

    /// Uses up a pending cut, if one is still pending.
    fn take_cut(&self) -> bool {
        let mut faults = self.faults();
        if faults.cut_next > 0 {
            faults.cut_next -= 1;
            true
        } else {
            false
        }
    }

    fn injected(&self) {
        self.faults_injected.fetch_add(1, Ordering::SeqCst);
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    for connection in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(client) = connection else {
            // Out of file descriptors or the like: let the moment pass.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        let shared = Arc::clone(shared);
        // If no thread can be started, the closure (and with it the connection) is dropped.
        let _ = std::thread::Builder::new()
            .name("fault-proxy-conn".into())
            .spawn(move || {
                let _ = serve(&shared, client);
            });
    }
}

/// One client connection: one request, forwarded or faulted, then the connection closes.
fn serve(shared: &Shared, mut client: TcpStream) -> io::Result<()> {
    client.set_nodelay(true)?;
    client.set_read_timeout(Some(IO_TIMEOUT))?;
    client.set_write_timeout(Some(IO_TIMEOUT))?;
    let Some((head, mut body)) = read_head(&mut client)? else {
        return Ok(());
    };
    let request = Head::parse(&head)?;
    if request.chunked {
        // Not needed by object_store's requests; refuse rather than guess the body's end.
        return write_error(&mut client, 501);
    }
    let length = usize::try_from(request.content_length.unwrap_or(0))
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "request body too large"))?;
    if body.len() < length {
        let have = body.len();
        body.resize(length, 0);
        client.read_exact(&mut body[have..])?;
    } else {
        body.truncate(length);
    }

    shared.requests.fetch_add(1, Ordering::SeqCst);
    let latency = shared.faults().latency;
    if !latency.is_zero() {
        std::thread::sleep(latency);
    }
    let plan = if request.method == "GET" && request.range {
        shared.range_gets.fetch_add(1, Ordering::SeqCst);
        shared.plan()
    } else {
        Plan::Forward
    };
    match plan {
        Plan::Reset => {
            shared.injected();
            // Everything the client sent was read, so this is a plain close (FIN), no reply.
            let _ = client.shutdown(Shutdown::Both);
            return Ok(());
        }
        Plan::Fail(status) => {
            shared.injected();
            return write_error(&mut client, status);
        }
        Plan::Forward | Plan::Cut(_) => {}
    }

    let mut upstream = TcpStream::connect(&shared.upstream)?;
    upstream.set_nodelay(true)?;
    upstream.set_read_timeout(Some(IO_TIMEOUT))?;
    upstream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut forward = request.rewritten;
    forward.extend_from_slice(&body);
    upstream.write_all(&forward)?;
    let Some((head, first)) = read_head(&mut upstream)? else {
        // The upstream closed without a response: so does the proxy.
        return Ok(());
    };
    let response = Head::parse(&head)?;
    let status = response.status;
    let body_len = if request.method == "HEAD"
        || (100..200).contains(&status)
        || status == 204
        || status == 304
    {
        Some(0)
    } else {
        response.content_length
    };
    let mut limit = body_len;
    if let Plan::Cut(after) = plan
        && (200..300).contains(&status)
        && body_len.is_some_and(|n| n > after)
        && shared.take_cut()
    {
        shared.injected();
        limit = Some(after);
    }
    client.write_all(&response.rewritten)?;
    copy_body(&mut upstream, &mut client, &first, limit)?;
    client.flush()?;
    let _ = client.shutdown(Shutdown::Write);
    Ok(())
}

/// Reads up to the end of an HTTP head (`\r\n\r\n`): the head and the bytes read after it.
/// `None` when the peer closed before sending anything.
fn read_head(stream: &mut TcpStream) -> io::Result<Option<(Vec<u8>, Vec<u8>)>> {
    let mut buf = Vec::with_capacity(8 << 10);
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let n = match stream.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            if buf.is_empty() {
                return Ok(None);
            }
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf[from..].windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(from + i + 4);
            return Ok(Some((buf, rest)));
        }
        if buf.len() > MAX_HEAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "HTTP head too large",
            ));
        }
    }
}

/// A request or response head, read and rewritten with `Connection: close`.
struct Head {
    /// The request's method (empty for a response).
    method: String,
    /// The response's status (0 for a request).
    status: u16,
    /// Whether a `Range` header is present.
    range: bool,
    content_length: Option<u64>,
    /// Whether `Transfer-Encoding` is chunked.
    chunked: bool,
    /// The head to send on: hop-by-hop connection headers replaced by `Connection: close`.
    rewritten: Vec<u8>,
}

impl Head {
    fn parse(raw: &[u8]) -> io::Result<Head> {
        let text = std::str::from_utf8(raw)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "a non-UTF-8 HTTP head"))?;
        let mut lines = text.split("\r\n");
        let first = lines.next().unwrap_or_default();
        let mut words = first.split(' ');
        let (method, status) = if first.starts_with("HTTP/") {
            let status = words
                .nth(1)
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "a bad status line"))?;
            (String::new(), status)
        } else {
            (words.next().unwrap_or_default().to_string(), 0)
        };
        let mut head = Head {
            method,
            status,
            range: false,
            content_length: None,
            chunked: false,
            rewritten: Vec::with_capacity(raw.len() + 32),
        };
        head.rewritten.extend_from_slice(first.as_bytes());
        head.rewritten.extend_from_slice(b"\r\n");
        for line in lines.filter(|l| !l.is_empty()) {
            let (name, value) = line.split_once(':').unwrap_or((line, ""));
            let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
            match name.as_str() {
                "connection" | "keep-alive" | "proxy-connection" => continue,
                "range" => head.range = true,
                "content-length" => head.content_length = value.parse().ok(),
                "transfer-encoding" => {
                    head.chunked = value.to_ascii_lowercase().contains("chunked");
                }
                _ => {}
            }
            head.rewritten.extend_from_slice(line.as_bytes());
            head.rewritten.extend_from_slice(b"\r\n");
        }
        head.rewritten
            .extend_from_slice(b"Connection: close\r\n\r\n");
        Ok(head)
    }
}

/// Sends `first` then what follows from `from`, `limit` bytes in all (or up to the end of
/// `from` when `None`).
fn copy_body(
    from: &mut TcpStream,
    to: &mut TcpStream,
    first: &[u8],
    limit: Option<u64>,
) -> io::Result<()> {
    let mut left = limit.unwrap_or(u64::MAX);
    let n = first.len().min(usize::try_from(left).unwrap_or(usize::MAX));
    to.write_all(&first[..n])?;
    left -= n as u64;
    if left == 0 {
        return Ok(());
    }
    let mut buf = vec![0u8; COPY_BUFFER];
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = match from.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
        left -= n as u64;
    }
    Ok(())
}

/// An S3-style error response with `status`, then the connection closes.
fn write_error(client: &mut TcpStream, status: u16) -> io::Result<()> {
    let (reason, code, message) = match status {
        400 => (
            "Bad Request",
            "InvalidRequest",
            "Injected by the fault proxy.",
        ),
        403 => ("Forbidden", "AccessDenied", "Access Denied"),
        404 => (
            "Not Found",
            "NoSuchKey",
            "The specified key does not exist.",
        ),
        412 => (
            "Precondition Failed",
            "PreconditionFailed",
            "At least one of the pre-conditions you specified did not hold",
        ),
        429 => (
            "Too Many Requests",
            "SlowDown",
            "Please reduce your request rate.",
        ),
        500 => (
            "Internal Server Error",
            "InternalError",
            "We encountered an internal error. Please try again.",
        ),
        501 => (
            "Not Implemented",
            "NotImplemented",
            "Chunked request bodies are not supported by the fault proxy.",
        ),
        503 => ("Slow Down", "SlowDown", "Please reduce your request rate."),
        _ => (
            "Injected Fault",
            "InjectedFault",
            "Injected by the fault proxy.",
        ),
    };
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code>\
         <Message>{message}</Message><RequestId>sluice-fault-proxy</RequestId></Error>"
    );
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n\
         x-amz-request-id: sluice-fault-proxy\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(response.as_bytes())?;
    client.flush()?;
    let _ = client.shutdown(Shutdown::Write);
    Ok(())
}
