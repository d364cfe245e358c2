//! The queue publish calls (`ferry.v1.Publisher/Publish` and `/PublishStream`), with each
//! request shared between tries rather than copied for each.
//!
//! A publish may be retried, so the request must outlive a try; the generated client takes
//! it by value, which means a deep copy of every message (its id, its headers) before each
//! try. Here the request is behind an `Arc` and encoded from there, the same bytes as prost
//! encodes the owned message. The encoder also reserves the request's whole encoded length
//! at once: a batch of large messages otherwise grows the codec's 8 KiB buffer by doubling,
//! copying what was already encoded at each step.

use std::sync::Arc;

use ferry_proto::v1;
use prost::Message as _;
use tonic::codec::{Codec, EncodeBuf, Encoder};
use tonic::codegen::http::uri::PathAndQuery;
use tonic_prost::ProstDecoder;

use crate::{MAX_MESSAGE, Transport};

const SERVICE: &str = "ferry.v1.Publisher";
const METHOD: &str = "Publish";
const PATH: &str = "/ferry.v1.Publisher/Publish";
const STREAM_METHOD: &str = "PublishStream";
const STREAM_PATH: &str = "/ferry.v1.Publisher/PublishStream";

/// Encodes a shared [`v1::PublishRequest`].
#[derive(Debug, Clone, Copy, Default)]
struct SharedRequestEncoder;

impl Encoder for SharedRequestEncoder {
    type Item = Arc<v1::PublishRequest>;
    type Error = tonic::Status;

    fn encode(&mut self, item: Self::Item, buf: &mut EncodeBuf<'_>) -> Result<(), Self::Error> {
        buf.reserve(item.encoded_len());
        // The buffer grows on demand, so prost's only error (too little room) cannot occur;
        // it is still answered rather than unwrapped.
        item.encode(buf)
            .map_err(|e| tonic::Status::internal(format!("encoding a publish request: {e}")))
    }
}

/// The publish call's codec: a shared request out, prost's decoding of the response in.
#[derive(Debug, Clone, Copy, Default)]
struct PublishCodec;

impl Codec for PublishCodec {
    type Encode = Arc<v1::PublishRequest>;
    type Decode = v1::PublishResponse;
    type Encoder = SharedRequestEncoder;
    type Decoder = ProstDecoder<v1::PublishResponse>;

    fn encoder(&mut self) -> Self::Encoder {
        SharedRequestEncoder
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstDecoder::default()
    }
}

/// One try of a publish: what `PublisherClient::publish` does, from a shared request.
pub(crate) async fn publish(
    channel: Transport,
    request: Arc<v1::PublishRequest>,
) -> Result<v1::PublishResponse, tonic::Status> {
    let (mut grpc, request) = ready(channel, request, METHOD).await?;
    let response = grpc
        .unary(request, PathAndQuery::from_static(PATH), PublishCodec)
        .await?;
    Ok(response.into_inner())
}

/// Opens a publish stream sending `requests`: what `PublisherClient::publish_stream` does,
/// with shared requests, so that a batch sent again on a new stream is not copied.
pub(crate) async fn open_stream(
    channel: Transport,
    requests: impl tokio_stream::Stream<Item = Arc<v1::PublishRequest>> + Send + 'static,
) -> Result<tonic::Streaming<v1::PublishResponse>, tonic::Status> {
    let (mut grpc, request) = ready(channel, requests, STREAM_METHOD).await?;
    let response = grpc
        .streaming(
            request,
            PathAndQuery::from_static(STREAM_PATH),
            PublishCodec,
        )
        .await?;
    Ok(response.into_inner())
}

/// The channel ready for a call of `method`, and `body` as its request: the generated
/// client's preamble.
async fn ready<T>(
    channel: Transport,
    body: T,
    method: &'static str,
) -> Result<(tonic::client::Grpc<Transport>, tonic::Request<T>), tonic::Status> {
    let mut grpc = tonic::client::Grpc::new(channel)
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE);
    grpc.ready()
        .await
        .map_err(|e| tonic::Status::unknown(format!("Service was not ready: {e}")))?;
    let mut request = tonic::Request::new(body);
    request
        .extensions_mut()
        .insert(tonic::GrpcMethod::new(SERVICE, method));
    Ok((grpc, request))
}
