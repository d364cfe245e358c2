//! One client connection: frames in, answers out, in request order. Requests are handled
//! one at a time, as Kafka handles a connection's requests, so answers keep their order
//! (a fetch in a long poll holds back the requests behind it on that connection only) —
//! with one exception: a Produce with acks 1 or -1 and no idempotent producer's batch is
//! begun (its appends placed) while the answers before it still wait for their fsync, up
//! to [`MAX_IN_FLIGHT`](crate::pipeline::MAX_IN_FLIGHT) answers pending
//! (`pipeline.rs`). Its answer is written after theirs. So a client's produce requests in
//! flight share the storage's group commits instead of paying one fsync each, and
//! partitions' appends keep the order of the requests. Any other request first waits
//! until every pending answer is written, then runs as before: it sees every record the
//! produces before it stored, and what it does is never overtaken.
//!
//! A frame too large, a header that does not decode, an unknown API key, or an API or
//! version not served ends the connection with a logged reason; ApiVersions at a version
//! not served is answered with UNSUPPORTED_VERSION and the served list, as Kafka answers
//! it, so that the client can pick another.
//!
//! **Security.** With TLS the handshake comes first, within [`TLS_HANDSHAKE_TIMEOUT`]. With
//! SASL users a connection is unauthenticated until SaslHandshake and SaslAuthenticate (or
//! v0's bare token frames) succeed (`api/sasl.rs`): before that only ApiVersions and the
//! SASL APIs are taken, and any other request closes the connection, as Kafka's broker
//! closes it (ILLEGAL_SASL_STATE). Once authenticated, every request is answered for the
//! user's [`Access`](crate::authz::Access).

use std::net::SocketAddr;
use std::sync::Arc;

use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::Shared;
use crate::api::produce::{self, Produce};
use crate::api::sasl::{self, After, Session};
use crate::framing::{FrameError, framed, read_frame};
use crate::pipeline::{self, Pipeline};
use crate::{api, guard, versions};

/// How long a client has to finish its TLS handshake before the connection is closed (as
/// on Ferry's other TLS listeners).
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a connection whose authentication failed stays open before it is closed:
/// Kafka's `connection.failed.authentication.delay.ms` default. The client reads the
/// failure's answer before the close (a client that handles the close first reports a
/// lost connection, not the reason), and a client retrying at once is slowed down.
pub const FAILED_AUTHENTICATION_DELAY: Duration = Duration::from_millis(100);

/// This node as Metadata describes it.
pub struct Node {
    pub host: String,
    pub port: u16,
    /// The address the listener is bound to (Kafka's `listeners`; `host:port` above is
    /// its `advertised.listeners`).
    pub listener: std::net::SocketAddr,
}

/// Why a connection was ended.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error("request of {len} bytes is too short for a request header")]
    ShortHeader { len: usize },
    #[error("unknown API key {key}")]
    UnknownApiKey { key: i16 },
    #[error("{api:?} v{version} is not served (see ApiVersions)")]
    NotServed { api: ApiKey, version: i16 },
    #[error("{api:?} v{version} request does not decode: {problem}")]
    Malformed {
        api: ApiKey,
        version: i16,
        problem: String,
    },
    #[error("encoding the {api:?} answer: {problem}")]
    Encode { api: ApiKey, problem: String },
    #[error("writing the answer: {0}")]
    Write(#[from] std::io::Error),
    #[error(
        "{api:?} before SASL authentication (ILLEGAL_SASL_STATE): the endpoint requires \
         SASL; configure the client with SASL_PLAINTEXT or SASL_SSL"
    )]
    Unauthenticated { api: ApiKey },
    #[error("SASL authentication did not succeed ({0})")]
    Sasl(String),
}

/// What a decoded request is: its header and its body, undecoded.
pub struct Request {
    pub api: ApiKey,
    pub header: RequestHeader,
    pub body: Bytes,
}

/// Decodes a request's header; the body is left for the API's handler.
pub fn decode_header(mut frame: Bytes) -> Result<Request, ConnectionError> {
    // The key and version come first in every header version; the codec's header decoder
    // reads them without checking that they are there.
    if frame.len() < 8 {
        return Err(ConnectionError::ShortHeader { len: frame.len() });
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let api = ApiKey::try_from(key).map_err(|_| ConnectionError::UnknownApiKey { key })?;
    let header_version = api.request_header_version(version);
    let header = RequestHeader::decode(&mut frame, header_version).map_err(|e| {
        ConnectionError::Malformed {
            api,
            version,
            problem: e.to_string(),
        }
    })?;
    Ok(Request {
        api,
        header,
        body: frame,
    })
}

/// Decodes a request body of type `T`.
pub fn decode_body<T: Decodable>(request: &mut Request) -> Result<T, ConnectionError> {
    let version = request.header.request_api_version;
    guard::check(request.api, version, &request.body).map_err(|problem| {
        ConnectionError::Malformed {
            api: request.api,
            version,
            problem,
        }
    })?;
    let body = T::decode(&mut request.body, version).map_err(|e| ConnectionError::Malformed {
        api: request.api,
        version,
        problem: e.to_string(),
    })?;
    // Bytes after a request that decoded are ignored, as Kafka's own request parser ignores
    // them: librdkafka 2.x writes an all-topics Metadata request (v9+) with a 4-byte array
    // length where the flexible versions have a 1-byte one, and Kafka answers it. Only the
    // body is skipped; the frame's length already bounded it.
    if request.body.has_remaining() {
        tracing::debug!(
            api = ?request.api,
            version,
            trailing = request.body.remaining(),
            "kafka: bytes after a decoded request ignored"
        );
        request.body.advance(request.body.remaining());
    }
    Ok(body)
}

/// An encoded answer at `version`, header included, ready to frame.
pub fn encode_response<R: Encodable + HeaderVersion>(
    request: &Request,
    version: i16,
    response: &R,
) -> Result<Bytes, ConnectionError> {
    // ApiVersions answers always carry header v0, whatever the request's version, so that
    // a client that does not know the broker's versions yet can read the answer.
    let header_version = if request.api == ApiKey::ApiVersions {
        0
    } else {
        R::header_version(version)
    };
    let encode_error = |e: &dyn std::fmt::Display| ConnectionError::Encode {
        api: request.api,
        problem: e.to_string(),
    };
    let mut buf = BytesMut::new();
    ResponseHeader::default()
        .with_correlation_id(request.header.correlation_id)
        .encode(&mut buf, header_version)
        .map_err(|e| encode_error(&e))?;
    response
        .encode(&mut buf, version)
        .map_err(|e| encode_error(&e))?;
    Ok(buf.freeze())
}

pub async fn serve(shared: Arc<Shared>, node: Arc<Node>, stream: TcpStream, peer: SocketAddr) {
    let _ = stream.set_nodelay(true);
    let Some(tls) = shared.config.security.tls.clone() else {
        return serve_stream(shared, node, stream, peer).await;
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(stream)) => serve_stream(shared, node, stream, peer).await,
        Ok(Err(e)) => tracing::info!(%peer, error = %e, "kafka: TLS handshake failed"),
        Err(_) => tracing::info!(%peer, "kafka: TLS handshake timed out"),
    }
}

async fn serve_stream<S: AsyncRead + AsyncWrite + Unpin>(
    shared: Arc<Shared>,
    node: Arc<Node>,
    stream: S,
    peer: SocketAddr,
) {
    let (reader, mut writer) = tokio::io::split(stream);
    let max = shared.config.max_frame_bytes;
    // Owned by the read in progress and handed back with its frame: a read is never
    // dropped half done while answers are written (see `Event`).
    let mut reading = Box::pin(next_frame(BufReader::new(reader), max));
    let mut pipeline = Pipeline::default();
    let users = shared.config.security.users.as_deref();
    let mut session = Session::new(users);
    let ended = async {
        loop {
            let event = if pipeline.is_full() {
                Event::Answered(pipeline.next().await)
            } else if pipeline.is_empty() {
                Event::Read((&mut reading).await)
            } else {
                tokio::select! {
                    biased;
                    answer = pipeline.next() => Event::Answered(answer),
                    read = &mut reading => Event::Read(read),
                }
            };
            let frame = match event {
                Event::Answered(answer) => {
                    pipeline::write(&mut writer, answer?).await?;
                    continue;
                }
                Event::Read((reader, frame)) => {
                    // Not polled until the pipeline has room for another request.
                    reading.set(next_frame(reader, max));
                    frame
                }
            };
            let Some(frame) = frame? else {
                pipeline.drain(&mut writer).await?;
                return Ok(());
            };
            if session.expects_raw_token()
                && let Some(users) = users
            {
                pipeline.drain(&mut writer).await?;
                // SaslHandshake v0: the frame is a bare SASL token, answered by one.
                let reply = match sasl::step(users, &mut session, &frame) {
                    Ok(reply) => reply,
                    Err(reason) => {
                        tokio::time::sleep(FAILED_AUTHENTICATION_DELAY).await;
                        return Err(ConnectionError::Sasl(reason));
                    }
                };
                writer.write_all(&framed(&reply)).await?;
                writer.flush().await?;
                continue;
            }
            let mut request = decode_header(frame)?;
            let version = request.header.request_api_version;
            if request.api != ApiKey::ApiVersions && !versions::is_supported(request.api, version) {
                return Err(ConnectionError::NotServed {
                    api: request.api,
                    version,
                });
            }
            if matches!(
                request.api,
                ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
            ) {
                pipeline.drain(&mut writer).await?;
                let (answer, after) = sasl::answer(users, &mut session, &mut request)?;
                writer.write_all(&framed(&answer)).await?;
                writer.flush().await?;
                if after == After::Close {
                    tokio::time::sleep(FAILED_AUTHENTICATION_DELAY).await;
                    return Err(ConnectionError::Sasl(format!(
                        "{:?} answered with an error",
                        request.api
                    )));
                }
                continue;
            }
            let access = match (session.access(), &session) {
                (Some(access), _) => access.clone(),
                // Before authenticating, a client asks which versions the SASL APIs have.
                (None, Session::Start) if request.api == ApiKey::ApiVersions => {
                    crate::authz::Access::Open
                }
                (None, _) => return Err(ConnectionError::Unauthenticated { api: request.api }),
            };
            if request.api == ApiKey::Produce {
                let produce = Produce::decode(&shared, &access, &mut request)?;
                if produce.pipelines() {
                    // Placed now, in request order; answered once durable, after the
                    // answers before it.
                    let begun = produce.begin(&shared);
                    let shared = Arc::clone(&shared);
                    pipeline.push(Box::pin(async move {
                        let response = begun.answer(&shared).await;
                        let version = request.header.request_api_version;
                        response
                            .map(|response| produce::encode(&request, version, &response))
                            .transpose()
                    }));
                    continue;
                }
                pipeline.drain(&mut writer).await?;
                let answer = match produce.begin(&shared).answer(&shared).await {
                    Some(response) => Some(produce::encode(&request, version, &response)?),
                    None => None,
                };
                pipeline::write(&mut writer, answer).await?;
                continue;
            }
            // Every other request sees what the produces before it stored, as when a
            // connection's requests are taken one at a time.
            pipeline.drain(&mut writer).await?;
            let answer = api::handle(&shared, &node, &access, &mut request).await?;
            pipeline::write(&mut writer, answer).await?;
        }
    };
    let ended: Result<(), ConnectionError> = ended.await;
    if let Err(e) = ended {
        // Answers of requests begun before the one that ended the connection are still
        // written: they were stored, and the client would otherwise send them again.
        let _ = pipeline.drain(&mut writer).await;
        tracing::warn!(%peer, error = %e, "kafka: closing the connection");
    }
}

/// What a connection waits for: its oldest pending answer, or the next request.
enum Event<R> {
    Answered(Result<Option<Bytes>, ConnectionError>),
    Read((R, Result<Option<Bytes>, FrameError>)),
}

/// The next frame of `reader`, and the reader back.
async fn next_frame<R: AsyncRead + Unpin>(
    mut reader: R,
    max: usize,
) -> (R, Result<Option<Bytes>, FrameError>) {
    let frame = read_frame(&mut reader, max).await;
    (reader, frame)
}
