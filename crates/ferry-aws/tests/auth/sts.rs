//! STS GetCallerIdentity on the same endpoint: who the signing key is, signed like every
//! other request; other STS actions refused by name.

use crate::support::{ADMIN, Auth, PUBLISHER, Served, Signer, signer};

const IDENTITY: [(&str, &str); 2] = [("Action", "GetCallerIdentity"), ("Version", "2011-06-15")];

#[tokio::test]
async fn a_named_key_is_its_iam_user_and_an_unnamed_one_the_root() {
    let served = Served::start().await;
    let reply = served
        .form(&Auth::Signed(signer(PUBLISHER, "sts")), &IDENTITY)
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(
        reply.body.contains(
            "<GetCallerIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
        ),
        "{}",
        reply.body
    );
    assert_eq!(reply.xml("Account"), "000000000000");
    assert_eq!(
        reply.xml("Arn"),
        "arn:aws:iam::000000000000:user/orders-publisher"
    );
    let user_id = reply.xml("UserId");
    assert!(
        user_id.starts_with("AIDA") && user_id.len() == 21,
        "{user_id}"
    );

    let reply = served
        .form(&Auth::Signed(signer(ADMIN, "sts")), &IDENTITY)
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.xml("Arn"), "arn:aws:iam::000000000000:root");
    assert_eq!(reply.xml("UserId"), "000000000000");
}

#[tokio::test]
async fn sts_is_signed_like_everything_else() {
    let served = Served::start().await;
    let reply = served.form(&Auth::Unsigned, &IDENTITY).await;
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert_eq!(reply.xml("Code"), "MissingAuthenticationToken");
    assert!(
        reply
            .body
            .contains("https://sts.amazonaws.com/doc/2011-06-15/"),
        "{}",
        reply.body
    );
    let wrong = Auth::Signed(Signer::new(ADMIN.0, "not-the-secret", "sts"));
    let reply = served.form(&wrong, &IDENTITY).await;
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert_eq!(reply.xml("Code"), "SignatureDoesNotMatch");
    let stranger = Auth::Signed(Signer::new("AKIDSTRANGER", "x", "sts"));
    let reply = served.form(&stranger, &IDENTITY).await;
    assert_eq!(reply.xml("Code"), "InvalidClientTokenId");
}

#[tokio::test]
async fn other_sts_actions_are_invalid_and_the_scope_alone_routes_to_sts() {
    let served = Served::start().await;
    let reply = served
        .form(
            &Auth::Signed(signer(ADMIN, "sts")),
            &[("Action", "AssumeRole"), ("Version", "2011-06-15")],
        )
        .await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(reply.xml("Code"), "InvalidAction");
    // Signed for STS without a Version: STS's still.
    let reply = served
        .form(
            &Auth::Signed(signer(ADMIN, "sts")),
            &[("Action", "GetCallerIdentity")],
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.xml("Account"), "000000000000");
}

#[tokio::test]
async fn an_open_endpoint_answers_for_the_accounts_root() {
    let served = Served::with_keys(Vec::new()).await;
    let reply = served.form(&Auth::Unsigned, &IDENTITY).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.xml("Arn"), "arn:aws:iam::000000000000:root");
    assert_eq!(reply.xml("Account"), "000000000000");
}
