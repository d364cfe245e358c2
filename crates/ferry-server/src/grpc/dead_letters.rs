//! `ferry.v1.DeadLetters`: peek at dead letters (with redacted headers masked) and redrive
//! them.

use std::sync::Arc;

use ferry_broker::{Broker, ReadLimit, RedriveRequest};
use ferry_proto::v1::{self, dead_letters_server::DeadLetters};
use tonic::{Request, Response, Status};

use super::{allow, allow_read};
use crate::auth::{Action, Gate};
use crate::convert;
use crate::redaction::Redaction;
use crate::status::{from_broker, from_convert, from_refusal};

pub struct DeadLettersService {
    pub broker: Broker,
    pub gate: Arc<Gate>,
    /// Headers whose values peeks mask.
    pub redaction: Arc<Redaction>,
    /// The most message bytes one peek answers with (see [`crate::Server::max_read_bytes`]).
    pub max_read_bytes: usize,
}

impl DeadLettersService {
    fn check_filter(&self, filter: Option<&v1::DeadLetterFilter>) -> Result<(), Status> {
        self.redaction
            .check_filter(filter.and_then(|f| f.header_name.as_deref()))
            .map_err(|e| Status::invalid_argument(e.to_string()))
    }
}

type Reply<T> = Result<Response<T>, Status>;

#[tonic::async_trait]
impl DeadLetters for DeadLettersService {
    async fn peek(&self, r: Request<v1::PeekRequest>) -> Reply<v1::PeekResponse> {
        allow_read(&self.gate, &self.broker, &r, &r.get_ref().dlq)?;
        let r = r.into_inner();
        self.check_filter(r.filter.as_ref())?;
        let filter = convert::dead_letter_filter(r.filter).map_err(from_convert)?;
        let after = r.after_seq;
        let limit = ReadLimit {
            messages: if r.max == 0 { 100 } else { r.max as usize },
            bytes: self.max_read_bytes,
        };
        let page = self
            .broker
            .peek_within(&r.dlq, after, limit, &filter)
            .map_err(from_broker)?;
        Ok(Response::new(v1::PeekResponse {
            more: page.more,
            letters: page
                .messages
                .into_iter()
                .map(|l| {
                    let mut letter = convert::peeked(l);
                    self.redaction.mask(&mut letter.headers);
                    letter
                })
                .collect(),
        }))
    }

    async fn redrive(&self, r: Request<v1::RedriveRequest>) -> Reply<v1::RedriveResponse> {
        let who = allow(&self.gate, &r, Action::DeadLetters, &r.get_ref().dlq)?;
        // A named target is written to as a publish would: publishing there is needed too.
        // (Without one, letters go back to the queues they came from.)
        if let Some(target) = &r.get_ref().target {
            self.gate
                .allow(who, Action::Publish, target)
                .map_err(from_refusal)?;
        }
        let r = r.into_inner();
        self.check_filter(r.filter.as_ref())?;
        let request = RedriveRequest {
            target: r.target,
            filter: convert::dead_letter_filter(r.filter).map_err(from_convert)?,
            max_messages: r
                .max_messages
                .map(|m| usize::try_from(m).unwrap_or(usize::MAX)),
            rate_per_sec: r.rate_per_sec,
        };
        let report = self
            .broker
            .redrive(&r.dlq, request)
            .await
            .map_err(from_broker)?;
        Ok(Response::new(v1::RedriveResponse {
            moved: report.moved as u64,
            skipped: report.skipped as u64,
        }))
    }
}
