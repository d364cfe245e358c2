use proptest::prelude::*;

use super::*;

fn headers(pairs: &[(&str, &str)]) -> Headers {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn subject_wildcards_match_one_or_any_number_of_segments() {
    let cases = [
        ("orders.*", "orders.created", true),
        ("orders.*", "orders", false),
        ("orders.*", "orders.eu.created", false),
        ("orders.#", "orders", true),
        ("orders.#", "orders.created", true),
        ("orders.#", "orders.eu.created", true),
        ("orders.#", "order", false),
        ("#", "anything.at.all", true),
        ("*.created", "orders.created", true),
        ("*.created", "created", false),
        ("orders.#.created", "orders.created", true),
        ("orders.#.created", "orders.eu.fr.created", true),
        ("orders.#.created", "orders.eu.fr.shipped", false),
        ("#.#", "a", true),
        ("a.b", "a.b", true),
        ("a.b", "a.bc", false),
    ];
    for (pattern, subject, expected) in cases {
        let p = SubjectPattern::parse(pattern).unwrap();
        assert_eq!(p.matches(subject), expected, "{pattern} ~ {subject}");
    }
}

#[test]
fn the_text_form_parses_every_predicate() {
    let f = Filter::parse(
        r#"subject ~ orders.# and type = order.created and region in (eu, "us-east") and exists(trace) and not priority = low"#,
    )
    .unwrap();
    assert_eq!(f.predicates.len(), 5);
    let m = headers(&[
        ("subject", "orders.eu.created"),
        ("type", "order.created"),
        ("region", "us-east"),
        ("trace", "1"),
    ]);
    assert!(f.matches(&m));
    let mut low = m.clone();
    low.insert("priority".into(), "low".into());
    assert!(!f.matches(&low));
    let mut untraced = m.clone();
    untraced.remove("trace");
    assert!(!f.matches(&untraced));
    let mut elsewhere = m;
    elsewhere.insert("region".into(), "apac".into());
    assert!(!f.matches(&elsewhere));
}

#[test]
fn no_predicate_takes_everything_and_a_missing_subject_matches_no_pattern() {
    assert!(Filter::parse("  ").unwrap().matches(&Headers::new()));
    let f = Filter::parse("subject ~ #").unwrap();
    assert!(!f.matches(&Headers::new()));
    assert!(f.matches(&headers(&[("subject", "x")])));
}

#[test]
fn quoted_values_keep_spaces_quotes_and_backslashes() {
    let f = Filter::parse(r#"note = "a \"b\" \\ c""#).unwrap();
    assert!(f.matches(&headers(&[("note", r#"a "b" \ c"#)])));
}

/// Found by the `filter_parser` fuzz target (corpus file `regression-quoted-pattern`): a
/// quoted subject pattern with a character a bare word cannot hold printed bare, so the
/// printed filter (which a subscription stores) did not parse back.
#[test]
fn a_quoted_subject_pattern_prints_quoted_and_parses_back() {
    let filter = Filter::parse("subject ~\"[\"").unwrap_or_else(|e| panic!("{e}"));
    let printed = filter.to_string();
    assert_eq!(printed, r#"subject ~ "[""#);
    assert_eq!(Filter::parse(&printed).unwrap(), filter);
    let plain = Filter::parse("subject ~ \"orders.#\"").unwrap();
    assert_eq!(plain.to_string(), "subject ~ orders.#");
}

/// Found while writing the `filter_parser` fuzz target's matcher oracle, and reproduced by
/// it (corpus file `regression-many-hashes`, a timeout): every `#` tried every split, so a
/// pattern of many `#`s against a long subject took exponential time. This pair took longer
/// than any test run; it now takes pattern × parts steps.
#[test]
fn many_hashes_against_a_long_subject_match_in_linear_steps() {
    let hashes = vec!["#"; 24].join(".");
    let long = vec!["a"; 40].join(".");
    let miss = SubjectPattern::parse(&format!("{hashes}.x")).unwrap();
    assert!(!miss.matches(&long));
    assert!(miss.matches(&format!("{long}.x")));
    let filter = Filter::parse(&format!("subject ~ {hashes}.x")).unwrap();
    assert!(!filter.matches(&headers(&[("subject", long.as_str())])));
    let hit = SubjectPattern::parse(&format!("{hashes}.a.*.#")).unwrap();
    assert!(hit.matches(&long));
    assert_eq!(
        hit.matches(&long),
        reference_match(hit.as_str(), &long),
        "the table agrees"
    );
}

#[test]
fn bad_filters_are_typed_errors_with_a_position() {
    let cases = [
        ("subject ~ orders..x", "empty segment"),
        ("subject ~ orders.c*", "mixes a wildcard"),
        ("type = ", "expected a value"),
        ("type == x", "expected a value"),
        ("type = x y = z", "expected `and` or `or`"),
        ("(type = x", "expected `)`"),
        ("type = x or", "expected a predicate"),
        ("prefix(type)", "expected `,`"),
        ("prefix(type, a*)", "wildcards belong"),
        ("type = x and", "expected a predicate"),
        ("region in ()", "expected a value"),
        ("region in (a, b", "expected `)`"),
        (r#"type = "open"#, "not closed"),
        (r#"type = "\n""#, "escapes"),
        ("exists trace", "expected `(`"),
        ("type = a*", "wildcards belong"),
        ("type ? x", "unexpected character"),
        ("ty;pe = x", "unexpected character"),
        ("type x", "expected `=` or `in`"),
    ];
    for (text, problem_part) in cases {
        match Filter::parse(text) {
            Err(BrokerError::InvalidFilter { problem, .. }) => {
                assert!(problem.contains(problem_part), "{text:?}: {problem}");
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }
    let long = "a = b and ".repeat(500);
    assert!(matches!(
        Filter::parse(&long),
        Err(BrokerError::InvalidFilter { .. })
    ));
    let many = vec!["a = b"; MAX_PREDICATES + 1].join(" and ");
    assert!(matches!(
        Filter::parse(&many),
        Err(BrokerError::InvalidFilter { .. })
    ));
    let many_alternatives = vec!["a = b"; MAX_PREDICATES + 1].join(" or ");
    assert!(matches!(
        Filter::parse(&many_alternatives),
        Err(BrokerError::InvalidFilter { .. })
    ));
    let deep = format!("{}a = b{}", "(".repeat(MAX_DEPTH), ")".repeat(MAX_DEPTH));
    match Filter::parse(&deep) {
        Err(BrokerError::InvalidFilter { problem, .. }) => assert!(problem.contains("nest")),
        other => panic!("{other:?}"),
    }
    let nots = format!("{}a = b", "not ".repeat(MAX_DEPTH));
    assert!(Filter::parse(&nots).is_err());
    let just_deep_enough = format!(
        "{}a = b{}",
        "(".repeat(MAX_DEPTH - 1),
        ")".repeat(MAX_DEPTH - 1)
    );
    Filter::parse(&just_deep_enough).unwrap();
}

#[test]
fn or_groups_and_prefixes_combine_with_and_binding_tighter() {
    let f =
        Filter::parse(r#"(region = eu or prefix(region, "us-")) and not exists(test)"#).unwrap();
    assert!(f.matches(&headers(&[("region", "eu")])));
    assert!(f.matches(&headers(&[("region", "us-east")])));
    assert!(!f.matches(&headers(&[("region", "apac")])));
    assert!(!f.matches(&headers(&[("region", "us-east"), ("test", "1")])));
    assert!(!f.matches(&Headers::new()), "a prefix needs the header");

    // `a or b and c` is `a or (b and c)`.
    let f = Filter::parse("a = 1 or b = 1 and c = 1").unwrap();
    assert!(f.matches(&headers(&[("a", "1")])));
    assert!(!f.matches(&headers(&[("b", "1")])));
    assert!(f.matches(&headers(&[("b", "1"), ("c", "1")])));
    assert_eq!(f.to_string(), r#"a = "1" or b = "1" and c = "1""#);

    // `not` takes the group after it.
    let f = Filter::parse("not (a = 1 or b = 1)").unwrap();
    assert!(f.matches(&headers(&[("c", "1")])));
    assert!(!f.matches(&headers(&[("b", "1")])));
    assert_eq!(f.to_string(), r#"not (a = "1" or b = "1")"#);
}

#[test]
fn filters_stored_before_groups_existed_read_the_same() {
    let text = r#"subject ~ orders.# and type = "order.created" and not priority = "low""#;
    let f = Filter::parse(text).unwrap();
    assert_eq!(f.predicates.len(), 3);
    assert_eq!(f.to_string(), text);
}

/// A second, independent matcher: dynamic programming over (pattern, parts) prefixes.
fn reference_match(pattern: &str, subject: &str) -> bool {
    let p: Vec<&str> = pattern.split('.').collect();
    let s: Vec<&str> = subject.split('.').collect();
    let mut ok = vec![vec![false; s.len() + 1]; p.len() + 1];
    ok[0][0] = true;
    for i in 1..=p.len() {
        for j in 0..=s.len() {
            ok[i][j] = match p[i - 1] {
                "#" => ok[i - 1][j] || (j > 0 && ok[i][j - 1]),
                "*" => j > 0 && ok[i - 1][j - 1],
                lit => j > 0 && ok[i - 1][j - 1] && s[j - 1] == lit,
            };
        }
    }
    ok[p.len()][s.len()]
}

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a".to_owned()),
        Just("b".to_owned()),
        Just("*".to_owned()),
        Just("#".to_owned())
    ]
}

fn predicate() -> impl Strategy<Value = Predicate> {
    let name = prop::sample::select(vec!["type", "region", "x-y", "a.b"]).prop_map(String::from);
    let value = "[ -~]{0,6}";
    let leaf = prop_oneof![
        prop::collection::vec(segment(), 1..4)
            .prop_map(|s| Predicate::Subject(SubjectPattern::parse(&s.join(".")).unwrap())),
        (name.clone(), value).prop_map(|(header, value)| Predicate::Equals { header, value }),
        (name.clone(), prop::collection::vec(value, 1..4))
            .prop_map(|(header, values)| Predicate::In { header, values }),
        name.clone().prop_map(|header| Predicate::Exists { header }),
        (name, value).prop_map(|(header, prefix)| Predicate::Prefix { header, prefix }),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(|p| Predicate::Not(Box::new(p))),
            prop::collection::vec(inner.clone(), 2..4).prop_map(Predicate::All),
            prop::collection::vec(inner, 2..4).prop_map(Predicate::Any),
        ]
    })
}

proptest! {
    #[test]
    fn subject_matching_agrees_with_a_reference(
        pattern in prop::collection::vec(segment(), 1..5),
        subject in prop::collection::vec(prop_oneof![Just("a"), Just("b"), Just("c")], 1..6),
    ) {
        let pattern = pattern.join(".");
        let subject = subject.join(".");
        let ours = SubjectPattern::parse(&pattern).unwrap().matches(&subject);
        prop_assert_eq!(ours, reference_match(&pattern, &subject), "{} ~ {}", pattern, subject);
    }

    #[test]
    fn the_text_form_round_trips(predicates in prop::collection::vec(predicate(), 0..5)) {
        // One `and` group alone is the same filter as its members (the parser gives the
        // flat form), so the generator's nested form is not expected back.
        prop_assume!(!matches!(predicates.as_slice(), [Predicate::All(_)]));
        let filter = Filter { predicates };
        let text = filter.to_string();
        prop_assert_eq!(Filter::parse(&text).unwrap(), filter, "{}", text);
    }

    #[test]
    fn parsing_arbitrary_text_never_panics(text in "\\PC{0,80}") {
        let _ = Filter::parse(&text);
    }
}
