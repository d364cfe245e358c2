//! Personal data stays out of messages, or travels protected.

use super::Rule;
use crate::Severity;

/// FT010. Seed: patterns guide Rule 8 ("never log or store message payloads containing
/// PII … in DLQs, outbox tables, or monitoring systems without field-level encryption or
/// tokenization") and its e-commerce example ("customer PII is NOT in the event payload
/// … the email service fetches it … using customer_id"); backend guide Security
/// ("encrypt payload at application level").
///
/// A field is flagged by its name, so a false alarm is silenced by saying how the field
/// is protected (`personal_data: encrypted` or `tokenized`), never by renaming it.
pub const PERSONAL_DATA: Rule = Rule {
    id: "FT010",
    name: "personal-data",
    severity: Severity::Error,
    summary: "no payload field that looks like personal data, unless marked as protected",
    check: |topology, report| {
        for m in &topology.messages {
            for field in m.payload.iter().filter(|f| f.personal_data.is_none()) {
                if let Some(kind) = looks_personal(field.name.as_str()) {
                    report.add(
                        format!("message {} field {}", m.name, field.name),
                        field.name.line(),
                        format!("looks like personal data ({kind}): it would sit in the clear in queues, dead-letter queues and logs"),
                        "send a reference (e.g. customer_id) instead, or encrypt or tokenize it and say `personal_data: encrypted` (or `tokenized`)",
                    );
                }
            }
        }
    },
};

/// Words that name personal data by themselves.
const PERSONAL_WORDS: [(&str, &str); 16] = [
    ("email", "an email address"),
    ("mail", "an email address"),
    ("phone", "a phone number"),
    ("telephone", "a phone number"),
    ("mobile", "a phone number"),
    ("msisdn", "a phone number"),
    ("address", "an address"),
    ("street", "an address"),
    ("postcode", "an address"),
    ("zip", "an address"),
    ("ssn", "a national id"),
    ("passport", "a national id"),
    ("birthdate", "a date of birth"),
    ("dob", "a date of birth"),
    ("iban", "a bank account"),
    ("pan", "a card number"),
];

/// Words that make `name` a person's name (`first_name`, `customerName`), not a
/// product's.
const PERSON_QUALIFIERS: [&str; 10] = [
    "first", "last", "full", "given", "family", "middle", "customer", "user", "contact", "holder",
];

/// What kind of personal data the field name suggests, if any.
fn looks_personal(name: &str) -> Option<&'static str> {
    let words = words(name);
    if let Some((_, kind)) = PERSONAL_WORDS
        .iter()
        .find(|(word, _)| words.iter().any(|w| w == word))
    {
        return Some(kind);
    }
    let has = |w: &str| words.iter().any(|x| x == w);
    if words == ["name"] || (has("name") && PERSON_QUALIFIERS.iter().any(|q| has(q))) {
        return Some("a person's name");
    }
    if has("card") && (has("number") || has("no")) {
        return Some("a card number");
    }
    if has("birth") || (has("date") && has("of") && has("birth")) {
        return Some("a date of birth");
    }
    if has("ip") && (words.len() == 1 || has("address")) {
        return Some("an IP address");
    }
    None
}

/// `customerEmail`, `customer_email`, `customer-email` → `["customer", "email"]`.
fn words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if !c.is_alphanumeric() {
            words.extend((!current.is_empty()).then(|| std::mem::take(&mut current)));
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower {
            words.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        current.extend(c.to_lowercase());
    }
    words.extend((!current.is_empty()).then_some(current));
    words
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::test_support::{clean_with, findings_of};

    #[test]
    fn field_names_are_split_into_words_in_any_case_style() {
        assert_eq!(words("customerEmail"), ["customer", "email"]);
        assert_eq!(
            words("shipping-address_line1"),
            ["shipping", "address", "line1"]
        );
        assert_eq!(words("IPAddress"), ["ipaddress"]);
    }

    #[test]
    fn personal_looking_names_are_recognised_and_others_are_not() {
        for personal in [
            "email",
            "customer_email",
            "phoneNumber",
            "first_name",
            "name",
            "shipping_address",
            "card_number",
            "date_of_birth",
            "ip",
        ] {
            assert!(looks_personal(personal).is_some(), "{personal}");
        }
        for plain in [
            "order_id",
            "customer_id",
            "product_name",
            "sku",
            "currency",
            "zipper_count",
            "emailed_at_ms",
        ] {
            assert_eq!(looks_personal(plain), None, "{plain}");
        }
    }

    #[test]
    fn an_unprotected_email_field_is_an_error_and_a_protected_one_is_not() {
        let field = "      - { name: currency, type: string }\n";
        let yaml = clean_with(
            field,
            &format!("{field}      - {{ name: customerEmail, type: string }}\n"),
        );
        assert_eq!(
            findings_of(&yaml, "FT010"),
            [
                "message OrderPlaced field customerEmail: looks like personal data (an email address): \
              it would sit in the clear in queues, dead-letter queues and logs"
            ]
        );
        let yaml = clean_with(
            field,
            &format!(
                "{field}      - {{ name: customerEmail, type: string, personal_data: encrypted }}\n"
            ),
        );
        assert!(findings_of(&yaml, "FT010").is_empty());
    }
}
