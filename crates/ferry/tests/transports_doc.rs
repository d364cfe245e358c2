//! `docs/transports.md` is generated from the capability tables; this fails when it drifts.
//! `FERRY_BLESS=1 cargo test -p ferry --test transports_doc` rewrites it.

use std::path::Path;

#[test]
fn docs_transports_md_matches_the_capability_tables() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/transports.md");
    let want = ferry::capability::markdown(&ferry::capability::all());
    if std::env::var_os("FERRY_BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/transports.md is out of date with the capability tables; \
         run `FERRY_BLESS=1 cargo test -p ferry --test transports_doc`"
    );
}
