//! At most so many connections at once, on each listener: every accepted connection holds
//! a permit until it closes, and the ones accepted beyond the limit are answered with a
//! refusal instead of being served.
//!
//! This counts in the accept stream rather than with a tower `ConcurrencyLimit`: that
//! layer bounds requests in progress, while an idle keep-alive connection — or an HTTP/2
//! connection carrying any number of streams — holds a socket and memory without any
//! request in progress. A refused connection is still answered in its own protocol, so
//! the client sees why: HTTP gets a `429` and is closed; gRPC is served for
//! [`REFUSED_GRACE`] with every call answered `RESOURCE_EXHAUSTED` (an HTTP/2 client
//! cannot be answered without its handshake), then closed.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio::time::Sleep;
use tokio_rustls::TlsAcceptor;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::Connected;

use crate::tls::HANDSHAKE_TIMEOUT;

/// How long a gRPC connection over the limit is kept to answer its calls with
/// `RESOURCE_EXHAUSTED` before it is closed: long enough for the client to read why,
/// short enough that refused connections cannot pile up.
pub const REFUSED_GRACE: Duration = Duration::from_secs(1);

/// The permits of one listener.
#[derive(Debug, Clone)]
pub(crate) struct Admission {
    permits: Arc<Semaphore>,
    limit: usize,
}

impl Admission {
    /// At most `limit` connections; a limit beyond what a semaphore can count (no socket
    /// table holds that many) is that largest count rather than a panic.
    pub(crate) fn new(limit: usize) -> Admission {
        let limit = limit.min(Semaphore::MAX_PERMITS);
        Admission {
            permits: Arc::new(Semaphore::new(limit)),
            limit,
        }
    }

    /// `Ok` with the permit the connection holds while open, or `Err` when the limit is
    /// reached.
    fn admit(&self) -> Result<Option<OwnedSemaphorePermit>, ()> {
        Arc::clone(&self.permits)
            .try_acquire_owned()
            .map(Some)
            .map_err(|_| ())
    }

    /// An accepted gRPC connection: admitted, or refused and closing after the grace.
    pub(crate) fn grpc(&self, stream: TcpStream) -> Connection {
        match self.admit() {
            Ok(permit) => Connection {
                stream: Stream::Plain(stream),
                _permit: permit,
                closes_at: None,
                limit: self.limit,
            },
            Err(()) => {
                tracing::warn!(limit = self.limit, "gRPC connection over the limit refused");
                Connection {
                    stream: Stream::Plain(stream),
                    _permit: None,
                    closes_at: Some(Box::pin(tokio::time::sleep(REFUSED_GRACE))),
                    limit: self.limit,
                }
            }
        }
    }
}

/// An accepted connection, holding its permit until dropped.
pub struct Connection {
    stream: Stream,
    _permit: Option<OwnedSemaphorePermit>,
    /// Set on a refused connection: reads end here, so the server closes it.
    closes_at: Option<Pin<Box<Sleep>>>,
    limit: usize,
}

/// What a gRPC call learns of its connection (in the request's extensions).
#[derive(Debug, Clone)]
pub struct ConnectionInfo {
    /// `Some(limit)` when the connection was over the limit: every call is refused.
    pub refused_over: Option<usize>,
}

impl Connected for Connection {
    type ConnectInfo = ConnectionInfo;

    fn connect_info(&self) -> ConnectionInfo {
        ConnectionInfo {
            refused_over: self.closes_at.as_ref().map(|_| self.limit),
        }
    }
}

impl AsyncRead for Connection {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(closes_at) = &mut this.closes_at
            && closes_at.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(Ok(())); // end of stream: the server closes the connection
        }
        Pin::new(&mut this.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

impl Connection {
    /// The connection after its TLS handshake, or `None` when the handshake failed or
    /// took longer than [`HANDSHAKE_TIMEOUT`] (the connection is closed).
    pub(crate) async fn handshake(mut self, acceptor: TlsAcceptor) -> Option<Connection> {
        let Stream::Plain(tcp) = self.stream else {
            return Some(self);
        };
        let alpn = acceptor
            .config()
            .alpn_protocols
            .first()
            .cloned()
            .unwrap_or_default();
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
            Ok(Ok(tls)) => {
                self.stream = Stream::Tls(Box::new(tls));
                Some(self)
            }
            Ok(Err(error)) => {
                match crate::tls::handshake_failure(&error, &alpn) {
                    // The server's certificate or a client at the wrong port: for the
                    // operator to fix, so said where they look.
                    Some(cause) => tracing::info!(%cause, "TLS handshake failed"),
                    // A port scan or a plaintext client: not worth more than a debug line.
                    None => tracing::debug!(%error, "TLS handshake failed"),
                }
                None
            }
            Err(_) => {
                tracing::debug!("TLS handshake timed out");
                None
            }
        }
    }
}

impl Connection {
    /// [`Connection::handshake`] on the HTTP listener, after a look at the first bytes: a
    /// TLS connection starts with a handshake record (0x16), a plain HTTP request with its
    /// method's ASCII letters. Such a request (`curl http://` at the HTTPS port) is
    /// answered `400` in plain HTTP, saying to use `https://`, and closed: otherwise the
    /// handshake would fail on it and the client see only a closed connection.
    pub(crate) async fn http_handshake(self, acceptor: TlsAcceptor) -> Option<Connection> {
        let Stream::Plain(tcp) = &self.stream else {
            return Some(self);
        };
        let mut first = [0u8; 1];
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, tcp.peek(&mut first)).await {
            Ok(Ok(1..)) if first[0].is_ascii_uppercase() => {
                refuse_plain_http(self).await;
                None
            }
            Ok(Ok(1..)) => self.handshake(acceptor).await,
            // Closed, or silent for as long as a handshake may take.
            Ok(_) => None,
            Err(_) => {
                tracing::debug!("TLS handshake timed out");
                None
            }
        }
    }
}

/// Answers a plain HTTP request at a TLS port with a `400` saying to use `https://` (with
/// the request's own host and path when its head gives them), then closes.
async fn refuse_plain_http(mut stream: Connection) {
    let head = read_head(&mut stream).await;
    let head = String::from_utf8_lossy(&head);
    let path = head
        .lines()
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .filter(|path| path.starts_with('/'))
        .unwrap_or("/");
    let host = head.lines().skip(1).find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("host")
            .then(|| value.trim().to_owned())
    });
    let url = match host {
        Some(host) => format!("https://{host}{path}"),
        None => "https://".to_owned(),
    };
    let message = format!("this port speaks HTTPS (TLS) only: use {url}");
    tracing::debug!("plain HTTP at the TLS port answered 400");
    let body = serde_json::json!({ "error": message, "code": "tls_required" }).to_string();
    let reply = format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(reply.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// A connection's bytes: plain TCP, or TLS over it.
enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }
}

/// Accepted gRPC connections over TLS: accepted and admitted as without TLS, each
/// handshake in a task of its own so that a slow one delays no other connection.
/// Accepting ends when the stream is dropped (the server stopped).
pub(crate) fn grpc_tls(
    listener: TcpListener,
    admission: Admission,
    acceptor: TlsAcceptor,
) -> ReceiverStream<io::Result<Connection>> {
    let (ready, incoming) = mpsc::channel(16);
    tokio::spawn(async move {
        let mut handshakes = JoinSet::new();
        loop {
            tokio::select! {
                () = ready.closed() => return,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        if stream.set_nodelay(true).is_ok() {
                            let connection = admission.grpc(stream);
                            handshakes.spawn(connection.handshake(acceptor.clone()));
                        }
                    }
                    // As tonic does with its own listeners: skip, after a pause so that
                    // running out of file descriptors is not a busy loop.
                    Err(error) => {
                        tracing::warn!(%error, "accepting a gRPC connection failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
                Some(done) = handshakes.join_next() => {
                    if let Ok(Some(connection)) = done
                        && ready.send(Ok(connection)).await.is_err()
                    {
                        return;
                    }
                }
            }
        }
    });
    ReceiverStream::new(incoming)
}

/// The HTTP listener, answering connections over the limit with a `429` of its own.
pub(crate) struct HttpListener {
    pub(crate) listener: TcpListener,
    pub(crate) admission: Admission,
    /// With TLS: each handshake runs in a task of its own, so a slow one delays no other.
    pub(crate) tls: Option<TlsAcceptor>,
    pub(crate) handshakes: JoinSet<Option<(Connection, SocketAddr)>>,
}

impl axum::serve::Listener for HttpListener {
    type Io = Connection;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Connection, SocketAddr) {
        loop {
            let (stream, addr) = tokio::select! {
                accepted = axum::serve::Listener::accept(&mut self.listener) => accepted,
                Some(done) = self.handshakes.join_next() => {
                    if let Ok(Some(handshaken)) = done {
                        return handshaken;
                    }
                    continue;
                }
            };
            let limit = self.admission.limit;
            let (permit, refused) = match self.admission.admit() {
                Ok(permit) => (permit, false),
                Err(()) => {
                    tracing::warn!(limit, "HTTP connection over the limit refused");
                    (None, true)
                }
            };
            let connection = Connection {
                stream: Stream::Plain(stream),
                _permit: permit,
                closes_at: None,
                limit,
            };
            match (&self.tls, refused) {
                (None, false) => return (connection, addr),
                (None, true) => {
                    tokio::spawn(refuse_http(connection, limit));
                }
                (Some(tls), false) => {
                    let handshake = connection.http_handshake(tls.clone());
                    self.handshakes
                        .spawn(async move { Some((handshake.await?, addr)) });
                }
                (Some(tls), true) => {
                    let handshake = connection.http_handshake(tls.clone());
                    tokio::spawn(async move {
                        if let Some(connection) = handshake.await {
                            refuse_http(connection, limit).await;
                        }
                    });
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

/// What arrives of a request's head within a second (at most 64 KiB): read before an
/// answer that closes, since closing with unread bytes would reset the connection and
/// the client could lose the answer.
async fn read_head(stream: &mut Connection) -> Vec<u8> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    head
}

/// Answers `429` and closes. The request's head is read first (for at most a second):
/// closing with unread bytes would reset the connection, and the client could lose the
/// answer.
async fn refuse_http(mut stream: Connection, limit: usize) {
    read_head(&mut stream).await;
    let body = format!(
        "{{\"error\":\"the server has its maximum of {limit} HTTP connections open: \
         retry later, or reuse a connection\",\"code\":\"too_many_connections\"}}"
    );
    let reply = format!(
        "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(reply.as_bytes()).await;
    let _ = stream.shutdown().await;
}
