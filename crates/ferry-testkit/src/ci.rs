//! The rule for tests that need something the machine may lack (an engine, root, a C
//! compiler, a Python package): outside CI they skip with a message nobody can miss; under
//! `CI=true` the machine is meant to have everything, so a skip there would hide a test that
//! never ran, and it fails instead.

/// Whether `ci`, the value of the `CI` variable (`None` when unset), demands that every
/// test runs. Only the exact value `true` does, as CI services set it.
pub fn requires_everything(ci: Option<&str>) -> bool {
    ci == Some("true")
}

/// Whether this process runs under `CI=true`.
pub fn under_ci() -> bool {
    requires_everything(std::env::var("CI").ok().as_deref())
}

/// Says loudly on stderr that the test skips because of `message`; under `CI=true`,
/// panics with `message` instead. The caller returns right after.
pub fn skip_or_fail(message: &str) {
    skip_or_fail_under(std::env::var("CI").ok().as_deref(), message);
}

/// [`skip_or_fail`] with the `CI` variable's value given.
pub fn skip_or_fail_under(ci: Option<&str>, message: &str) {
    if requires_everything(ci) {
        panic!("{message}; under CI=true this test must run, not skip");
    }
    eprintln!("\n!!! SKIPPED: {message} !!!\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ci_true_requires_everything() {
        assert!(requires_everything(Some("true")));
        assert!(!requires_everything(None));
        assert!(!requires_everything(Some("")));
        assert!(!requires_everything(Some("false")));
        assert!(!requires_everything(Some("1")));
        assert!(!requires_everything(Some("TRUE")));
    }

    #[test]
    fn outside_ci_a_missing_need_is_a_skip() {
        skip_or_fail_under(None, "nothing here");
        skip_or_fail_under(Some("false"), "nothing here");
    }

    #[test]
    #[should_panic(expected = "Redis is not here; under CI=true this test must run")]
    fn under_ci_a_missing_need_is_a_failure() {
        skip_or_fail_under(Some("true"), "Redis is not here");
    }
}
