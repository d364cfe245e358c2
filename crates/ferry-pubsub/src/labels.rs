//! Labels: a resource's `labels` map, kept as given (the front end's record holds them),
//! checked as Pub/Sub checks them: at most 64, keys 1–63 characters starting with a
//! lowercase letter, values up to 63, both of lowercase letters, digits, `_` and `-`.

use std::collections::BTreeMap;

use tonic::Status;

const MAX_LABELS: usize = 64;
const MAX_LENGTH: usize = 63;

pub fn check(labels: &BTreeMap<String, String>) -> Result<(), Status> {
    if labels.len() > MAX_LABELS {
        return Err(Status::invalid_argument(format!(
            "at most {MAX_LABELS} labels (got {})",
            labels.len()
        )));
    }
    let allowed = |text: &str| {
        text.len() <= MAX_LENGTH
            && text
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
    };
    for (key, value) in labels {
        if !key.starts_with(|c: char| c.is_ascii_lowercase()) || !allowed(key) {
            return Err(Status::invalid_argument(format!(
                "label key {key:?}: 1 to 63 lowercase letters, digits, '_' or '-', starting \
                 with a letter"
            )));
        }
        if !allowed(value) {
            return Err(Status::invalid_argument(format!(
                "label value {value:?} of {key:?}: up to 63 lowercase letters, digits, '_' \
                 or '-'"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pubsubs_label_rules() {
        let one = |k: &str, v: &str| BTreeMap::from([(k.to_owned(), v.to_owned())]);
        check(&one("team", "billing-eu_1")).unwrap();
        check(&one("team", "")).unwrap();
        for (k, v) in [
            ("Team", "x"),
            ("1team", "x"),
            ("", "x"),
            ("team", "Billing"),
        ] {
            assert_eq!(
                check(&one(k, v)).unwrap_err().code(),
                tonic::Code::InvalidArgument,
                "{k}={v}"
            );
        }
        let many: BTreeMap<String, String> =
            (0..65).map(|i| (format!("k{i}"), String::new())).collect();
        assert!(check(&many).is_err());
    }
}
