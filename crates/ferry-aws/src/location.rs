//! Queue URLs and ARNs. A queue is addressed as `http://<host>/<account>/<name>`: any host
//! is accepted (clients reach Ferry through whatever name or tunnel they use), the path
//! must name the configured account and a queue. ARNs are
//! `arn:aws:sqs:<region>:<account>:<name>`.

use crate::errors::SqsError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub account_id: String,
    pub region: String,
}

impl Location {
    pub fn arn(&self, queue: &str) -> String {
        format!("arn:aws:sqs:{}:{}:{queue}", self.region, self.account_id)
    }

    /// The queue an ARN names, if it is one of this account and region.
    pub fn queue_of_arn<'a>(&self, arn: &'a str) -> Option<&'a str> {
        let rest = arn.strip_prefix("arn:aws:sqs:")?;
        let (region, rest) = rest.split_once(':')?;
        let (account, name) = rest.split_once(':')?;
        (region == self.region && account == self.account_id && !name.is_empty()).then_some(name)
    }

    /// The URL of `queue` as a client reaching `host` sees it.
    pub fn url(&self, host: &str, queue: &str) -> String {
        format!("http://{host}/{}/{queue}", self.account_id)
    }

    /// The queue a QueueUrl names. SQS also takes a queue's bare name there (no scheme, no
    /// `/`). A URL of another account, or one that is no queue URL at all, names no queue
    /// here: `QueueDoesNotExist`, as SQS answers both.
    pub fn queue_of_url(&self, url: &str) -> Result<String, SqsError> {
        if !url.is_empty() && !url.contains('/') && !url.contains(':') {
            return Ok(url.to_owned());
        }
        let path = match url.split_once("://") {
            Some((_, rest)) => rest.find('/').map_or("", |i| &rest[i..]),
            None => url,
        };
        let path = path.split(['?', '#']).next().unwrap_or("");
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        match parts.as_slice() {
            [account, name] if *account == self.account_id => Ok((*name).to_owned()),
            _ => Err(SqsError::no_queue()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn here() -> Location {
        Location {
            account_id: "000000000000".into(),
            region: "us-east-1".into(),
        }
    }

    #[test]
    fn urls_name_queues_whatever_the_host() {
        let l = here();
        assert_eq!(
            l.queue_of_url("http://localhost:4566/000000000000/q")
                .unwrap(),
            "q"
        );
        assert_eq!(
            l.queue_of_url("https://sqs.us-east-1.amazonaws.com/000000000000/q.fifo")
                .unwrap(),
            "q.fifo"
        );
        assert_eq!(l.queue_of_url("/000000000000/q").unwrap(), "q");
        assert!(l.queue_of_url("http://h/111111111111/q").is_err());
        assert!(l.queue_of_url("http://h/q").is_err());
        assert!(
            l.queue_of_url("http://whatever-incorrect-queue-address")
                .is_err()
        );
        assert_eq!(l.queue_of_url("q.fifo").unwrap(), "q.fifo");
        assert!(l.queue_of_url("").is_err());
        assert_eq!(l.url("h:1", "q"), "http://h:1/000000000000/q");
    }

    #[test]
    fn arns_of_this_account_and_region_name_queues() {
        let l = here();
        assert_eq!(l.queue_of_arn(&l.arn("dlq")), Some("dlq"));
        assert_eq!(
            l.queue_of_arn("arn:aws:sqs:eu-west-1:000000000000:dlq"),
            None
        );
        assert_eq!(l.queue_of_arn("nonsense"), None);
    }
}
