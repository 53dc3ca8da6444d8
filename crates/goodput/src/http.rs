//! HTTP/1.1 transfers through the DUT: a built-in server (hyper) on one side
//! and N keep-alive clients (hyper) on the other, on one tokio runtime.
//!
//! URLs: `GET /<bytes>` returns an object of that many bytes (the built-in
//! server makes it from one shared buffer; nginx serves files of those names,
//! see `nginx`), `POST /upload` takes a body and answers 204 (built-in only).
//! Goodput counts body bytes (L7 payload, headers not counted) where they
//! arrive: downloads at the clients, uploads at the built-in server (bytes
//! a client has handed to its socket may still sit in the send buffer,
//! megabytes on a slow path). Requests/s counts requests completed in the
//! window.

use crate::record::HttpRun;
use crate::tcp;
use crate::{Direction, Endpoint, GoodputError};
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Largest object the built-in server serves (one buffer holds it).
pub const MAX_OBJECT: u64 = 1 << 30;
/// Upload bodies go out in chunks of this size.
const UPLOAD_CHUNK: usize = 256 * 1024;

/// The runtime both the server and the clients run on.
pub fn runtime() -> Result<tokio::runtime::Runtime, GoodputError> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .map_err(|e| GoodputError::io("starting the tokio runtime", e))
}

/// The built-in server, running until dropped. It has a runtime of its
/// own, apart from the clients', as a server process would: neither side's
/// tasks queue behind the other's.
pub struct BuiltinServer {
    rt: Option<tokio::runtime::Runtime>,
    /// Upload body bytes received so far.
    pub received: Arc<AtomicU64>,
}

impl Drop for BuiltinServer {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

/// Serves objects up to `max_object` bytes on `listener` (made in the
/// server's namespace by `tcp::listen`).
pub fn serve(listener: TcpListener, max_object: u64) -> Result<BuiltinServer, GoodputError> {
    let rt = runtime()?;
    listener
        .set_nonblocking(true)
        .map_err(|e| GoodputError::io("setting the listener non-blocking", e))?;
    let _guard = rt.enter();
    let listener = tokio::net::TcpListener::from_std(listener)
        .map_err(|e| GoodputError::io("handing the listener to tokio", e))?;
    let data = Bytes::from(pattern(max_object as usize));
    let received = Arc::new(AtomicU64::new(0));
    let counter = received.clone();
    rt.spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let (data, counter) = (data.clone(), counter.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    handle(req, data.clone(), counter.clone())
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    drop(_guard);
    Ok(BuiltinServer {
        rt: Some(rt),
        received,
    })
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

async fn handle(
    req: Request<Incoming>,
    data: Bytes,
    received: Arc<AtomicU64>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let reply = |status: StatusCode, body: Bytes| {
        let mut r = Response::new(Full::new(body));
        *r.status_mut() = status;
        Ok(r)
    };
    match (req.method(), req.uri().path()) {
        (&Method::POST, "/upload") => {
            let mut body = req.into_body();
            while let Some(frame) = body.frame().await {
                match frame {
                    Ok(frame) => {
                        if let Some(chunk) = frame.data_ref() {
                            received.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                        }
                    }
                    Err(_) => break,
                }
            }
            reply(StatusCode::NO_CONTENT, Bytes::new())
        }
        (&Method::GET, path) => match path[1..].parse::<usize>() {
            Ok(n) if n <= data.len() => reply(StatusCode::OK, data.slice(0..n)),
            _ => reply(StatusCode::NOT_FOUND, Bytes::new()),
        },
        _ => reply(StatusCode::METHOD_NOT_ALLOWED, Bytes::new()),
    }
}

/// A request body of `remaining` bytes sent in chunks of one shared
/// buffer (empty for GET).
struct UploadBody {
    data: Bytes,
    remaining: u64,
}

impl Body for UploadBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.remaining == 0 {
            return Poll::Ready(None);
        }
        let n = self.remaining.min(self.data.len() as u64) as usize;
        self.remaining -= n as u64;
        Poll::Ready(Some(Ok(Frame::data(self.data.slice(0..n)))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[derive(Debug, Clone)]
pub struct HttpConfig {
    pub client: Endpoint,
    /// Where the clients connect: the server's address and port.
    pub connect_to: SocketAddr,
    pub clients: usize,
    /// Object sizes, requested in turn by every client.
    pub sizes: Vec<u64>,
    pub duration: Duration,
    pub connect_timeout: Duration,
    /// The built-in server's count of upload bytes received (uploads are
    /// counted there); None with nginx, which takes no uploads.
    pub upload_received: Option<Arc<AtomicU64>>,
}

#[derive(Default)]
struct Counters {
    /// Download body bytes received.
    bytes: AtomicU64,
    requests: AtomicU64,
    errors: AtomicU64,
    /// The first error, for the message when nothing worked.
    first_error: std::sync::Mutex<Option<String>>,
}

impl Counters {
    fn error(&self, what: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut first = self.first_error.lock().unwrap_or_else(|e| e.into_inner());
        first.get_or_insert(what);
    }
}

/// Runs the clients for one direction against a server already listening.
pub fn run_clients(
    rt: &tokio::runtime::Runtime,
    cfg: &HttpConfig,
    direction: Direction,
    interrupt: &AtomicBool,
) -> Result<HttpRun, GoodputError> {
    // Connect every client first (in the client namespace, blocking), so a
    // DUT that blocks the port is reported before any window opens.
    let mut streams = Vec::with_capacity(cfg.clients);
    for _ in 0..cfg.clients {
        let s = tcp::connect(&cfg.client, cfg.connect_to, None, cfg.connect_timeout)?;
        s.set_nonblocking(true)
            .map_err(|e| GoodputError::io("setting a client socket non-blocking", e))?;
        streams.push(s);
    }
    let counters = Arc::new(Counters::default());
    let upload_data = Bytes::from(pattern(UPLOAD_CHUNK));
    let host = cfg.connect_to.to_string();
    let mut tasks = Vec::new();
    {
        let _guard = rt.enter();
        for (i, s) in streams.into_iter().enumerate() {
            let stream = tokio::net::TcpStream::from_std(s)
                .map_err(|e| GoodputError::io("handing a client socket to tokio", e))?;
            let counters = counters.clone();
            let sizes = cfg.sizes.clone();
            let (host, data) = (host.clone(), upload_data.clone());
            tasks.push(rt.spawn(async move {
                client(stream, i, sizes, direction, host, data, counters).await
            }));
        }
    }
    let received = |c: &Arc<Counters>| match (direction, &cfg.upload_received) {
        (Direction::Upload, Some(server)) => server.load(Ordering::Relaxed),
        _ => c.bytes.load(Ordering::Relaxed),
    };
    let t0 = Instant::now();
    let at_start = received(&counters);
    let mut interrupted = false;
    while t0.elapsed() < cfg.duration {
        if interrupt.load(Ordering::Relaxed) {
            interrupted = true;
            break;
        }
        std::thread::sleep((cfg.duration - t0.elapsed()).min(Duration::from_millis(50)));
    }
    let seconds = t0.elapsed().as_secs_f64();
    let bytes = received(&counters) - at_start;
    let requests = counters.requests.load(Ordering::Relaxed);
    let errors = counters.errors.load(Ordering::Relaxed);
    for task in &tasks {
        task.abort();
    }
    if bytes == 0 && !interrupted {
        let first = counters
            .first_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or_else(|| "no answer".into());
        return Err(GoodputError::NoData(format!(
            "{} HTTP clients connected to {} but no body bytes moved in {seconds:.1} s ({first}): the DUT drops the data, or the server does not serve these objects",
            cfg.clients, cfg.connect_to
        )));
    }
    Ok(HttpRun {
        direction,
        seconds,
        bytes,
        goodput_bps: 8.0 * bytes as f64 / seconds,
        requests,
        requests_per_s: requests as f64 / seconds,
        errors,
        l2_bps: 0.0,
        link_usage_percent: 0.0,
        interrupted,
    })
}

/// One keep-alive client: requests the sizes in turn (starting at its own
/// offset, so clients spread over the sizes) until aborted.
async fn client(
    stream: tokio::net::TcpStream,
    index: usize,
    sizes: Vec<u64>,
    direction: Direction,
    host: String,
    upload_data: Bytes,
    counters: Arc<Counters>,
) {
    let (mut sender, conn) = match hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
    {
        Ok(pair) => pair,
        Err(e) => return counters.error(format!("HTTP handshake: {e}")),
    };
    // The connection runs as a task of its own; it must end with this
    // client (aborted at the end of the window), or a download still in
    // flight would go on competing with the next direction's run.
    let _conn = AbortOnDrop(tokio::spawn(conn));
    for k in index.. {
        let size = sizes[k % sizes.len()];
        let (method, uri, body_len) = match direction {
            Direction::Download => (Method::GET, format!("/{size}"), 0),
            Direction::Upload => (Method::POST, "/upload".to_string(), size),
        };
        let body = UploadBody {
            data: upload_data.clone(),
            remaining: body_len,
        };
        let req = Request::builder()
            .method(method)
            .uri(uri)
            .header(hyper::header::HOST, &host)
            .body(body)
            .expect("a valid request");
        if sender.ready().await.is_err() {
            return counters.error("the server closed the connection".into());
        }
        let response = match sender.send_request(req).await {
            Ok(r) => r,
            Err(e) => return counters.error(format!("request failed: {e}")),
        };
        let status = response.status();
        let mut body = response.into_body();
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(frame) => {
                    if let Some(chunk) = frame.data_ref() {
                        if status.is_success() && direction == Direction::Download {
                            counters
                                .bytes
                                .fetch_add(chunk.len() as u64, Ordering::Relaxed);
                        }
                    }
                }
                Err(e) => return counters.error(format!("reading a response: {e}")),
            }
        }
        if status.is_success() {
            counters.requests.fetch_add(1, Ordering::Relaxed);
        } else {
            counters.error(format!(
                "the server answered {status} for {size}-byte objects"
            ));
            // A server that refuses is not retried in a tight loop.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
