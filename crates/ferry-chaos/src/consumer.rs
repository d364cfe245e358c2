//! A consumer worker: streams both queues until SIGTERM and settles each delivery as its
//! fate header says, recording the delivery before settling, the settle before sending it,
//! and the answer after — so a history cut short by SIGKILL still says what was in flight.

use std::time::Duration;

use ferry_client::{Client, ClientError, Consumer, ConsumerConfig, Delivery};

use crate::error::Result;
use crate::history::{Answer, Event, Fate, HistoryWriter, Settle, monotonic_ns};
use crate::scenario::{FATE_HEADER, KSEQ_HEADER, ORDERS_QUEUE, WORK_QUEUE};
use crate::worker::{Stop, connect};

/// How long a nacked `nack_once` or poison message waits before it is delivered again.
const NACK_DELAY: Duration = Duration::from_millis(100);

pub async fn run(url: &str, index: u32, history: &mut HistoryWriter) -> Result<()> {
    let mut stop = Stop::on_sigterm()?;
    let Some(client) = connect(url, &mut stop).await? else {
        return Ok(());
    };
    let name = format!("chaos-consumer-{index}");
    let Some(mut orders) = open(&client, ORDERS_QUEUE, &name, &mut stop).await else {
        return Ok(());
    };
    let Some(mut work) = open(&client, WORK_QUEUE, &name, &mut stop).await else {
        return Ok(());
    };
    loop {
        let (queue, next) = tokio::select! {
            next = orders.next() => (ORDERS_QUEUE, next),
            next = work.next() => (WORK_QUEUE, next),
            _ = stop.signalled() => return Ok(()),
        };
        // Before what `next` returned: the client dropped these first.
        let consumer = if queue == ORDERS_QUEUE {
            &mut orders
        } else {
            &mut work
        };
        record_dropped(queue, consumer, history)?;
        match next {
            Some(Ok(delivery)) => {
                handle(queue, delivery, history).await?;
                continue;
            }
            Some(Err(error)) => {
                eprintln!("ferry chaos: consumer {index}: {queue}: {error}; opening it again");
            }
            None => {}
        }
        // The stream failed for good (or closed): open it again.
        let Some(again) = open(&client, queue, &name, &mut stop).await else {
            return Ok(());
        };
        if queue == ORDERS_QUEUE {
            orders = again;
        } else {
            work = again;
        }
    }
}

/// Records each delivery the client dropped with a failed stream: the broker counted it as
/// an attempt, so the checker must know a consumer received it.
fn record_dropped(queue: &str, consumer: &mut Consumer, history: &mut HistoryWriter) -> Result<()> {
    for dropped in consumer.take_dropped() {
        history.append(&Event::Dropped {
            t: monotonic_ns(),
            queue: queue.to_owned(),
            id: dropped.id,
            seq: dropped.seq,
            attempt: dropped.attempt,
        })?;
    }
    Ok(())
}

/// Opens a consumer, retrying while the server is unreachable; `None` on SIGTERM.
async fn open(client: &Client, queue: &str, name: &str, stop: &mut Stop) -> Option<Consumer> {
    let config = ConsumerConfig {
        prefetch: 8,
        ..ConsumerConfig::default()
    };
    let mut attempt = 0;
    loop {
        match client.consumer(queue, name, config).await {
            Ok(consumer) => return Some(consumer),
            Err(error) => {
                if attempt % 20 == 0 {
                    eprintln!("ferry chaos: opening {queue}: {error}; trying again");
                }
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                    _ = stop.signalled() => return None,
                }
                attempt += 1;
            }
        }
    }
}

async fn handle(queue: &str, delivery: Delivery, history: &mut HistoryWriter) -> Result<()> {
    let m = &delivery.message;
    let fate = m
        .headers
        .get(FATE_HEADER)
        .and_then(|f| Fate::parse(f))
        .unwrap_or(Fate::Ack);
    let (id, seq, attempt) = (m.id.clone(), m.seq, m.delivery);
    history.append(&Event::Delivered {
        t: monotonic_ns(),
        queue: queue.to_owned(),
        id: id.clone(),
        seq,
        attempt,
        key: m
            .key
            .as_ref()
            .map(|k| String::from_utf8_lossy(k).into_owned()),
        kseq: m.headers.get(KSEQ_HEADER).and_then(|k| k.parse().ok()),
    })?;
    let op = match fate {
        Fate::Ack => Settle::Ack,
        Fate::NackOnce if attempt <= 1 => Settle::Nack,
        Fate::NackOnce => Settle::Ack,
        Fate::Reject => Settle::Reject,
        Fate::Poison => Settle::Nack,
    };
    history.append(&Event::Settling {
        t: monotonic_ns(),
        queue: queue.to_owned(),
        id: id.clone(),
        seq,
        attempt,
        op,
    })?;
    // The ordered queue's nacks have no delay: its head is delivered again at once.
    let delay = if queue == WORK_QUEUE {
        NACK_DELAY
    } else {
        Duration::ZERO
    };
    let outcome = match op {
        Settle::Ack => delivery.ack().await,
        Settle::Nack => delivery.nack(Some(delay), Some("chaos: nacked")).await,
        Settle::Reject => delivery.reject("chaos: rejected").await,
    };
    history.append(&Event::Settled {
        t: monotonic_ns(),
        queue: queue.to_owned(),
        id,
        seq,
        attempt,
        op,
        answer: answer(&outcome),
        error: outcome.err().map(|e| e.to_string()),
    })
}

/// Sorts a settle's outcome for the checker, which must tell a settle the broker refused
/// (not done) from one whose answer was lost (done or not: only what happens to the message
/// afterwards says which). An error the broker raised carries its kind; a refusal on the
/// consume stream, or the client's own for a delivery of a failed stream, is not
/// transient; a broken connection or a closed client is an answer that never came.
fn answer(outcome: &Result<(), ClientError>) -> Answer {
    match outcome {
        Ok(()) => Answer::Ok,
        Err(error) if error.kind().is_some() => Answer::Refused,
        Err(error) if error.is_transient() || matches!(error, ClientError::Closed) => {
            Answer::NeverCame
        }
        Err(_) => Answer::Refused,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_client::ErrorKind;
    use tonic::Code;

    fn server(code: Code, kind: Option<ErrorKind>) -> Result<(), ClientError> {
        Err(ClientError::Server {
            code,
            message: "x".into(),
            kind,
            missing: None,
        })
    }

    #[test]
    fn a_refused_settle_is_recorded_apart_from_one_whose_answer_never_came() {
        assert_eq!(answer(&Ok(())), Answer::Ok);
        // The stream's own refusal (a stale lease) and the client's for a dead stream's
        // delivery carry no kind, and are answers.
        assert_eq!(
            answer(&server(Code::FailedPrecondition, None)),
            Answer::Refused
        );
        assert_eq!(
            answer(&server(
                Code::FailedPrecondition,
                Some(ErrorKind::StaleLease)
            )),
            Answer::Refused
        );
        // The broker could not serve it: it said so, so it did not do it.
        assert_eq!(
            answer(&server(Code::Unavailable, Some(ErrorKind::Unavailable))),
            Answer::Refused
        );
        // The connection was lost before the server answered; the client was closed.
        assert_eq!(answer(&server(Code::Unavailable, None)), Answer::NeverCame);
        assert_eq!(answer(&server(Code::Unknown, None)), Answer::NeverCame);
        assert_eq!(answer(&Err(ClientError::Closed)), Answer::NeverCame);
    }
}
