//! The `[[aws.credentials]]` entries turned into the access keys the SQS/SNS endpoint
//! checks signatures against.
//!
//! SigV4 needs the secret itself to recompute a signature, so unlike an API token's
//! (`[[auth.tokens]]` holds only its SHA-256) it cannot be kept as a hash. To keep it out
//! of the config file, an entry may name an environment variable
//! (`secret_access_key_env`) or a file (`secret_access_key_file`) that holds it instead of
//! writing it there (`secret_access_key`): exactly one of the three.

use anyhow::{Context, bail};
use ferry_aws::sigv4::AccessKey;
use ferry_server::Permission;

use super::{AwsCredential, Env};

/// The entries, checked: ids unique and well formed, one secret each, names IAM user
/// names, accounts 12 digits, permissions well formed. A key's `account_id` stays as
/// written: `ferry_aws::Sqs::open` tells the endpoint's own account from another.
pub(super) fn access_keys(entries: Vec<AwsCredential>, env: Env) -> anyhow::Result<Vec<AccessKey>> {
    let mut ids = std::collections::BTreeSet::new();
    entries
        .into_iter()
        .map(|entry| {
            let id = entry.access_key_id.clone();
            if !valid_key_id(&id) {
                bail!(
                    "aws.credentials: access_key_id {id:?} must be 1 to 128 letters and digits \
                     (AWS's are 20, e.g. AKIAIOSFODNN7EXAMPLE)"
                );
            }
            if !ids.insert(id.clone()) {
                bail!("aws.credentials: the access_key_id {id:?} is used twice");
            }
            let secret = secret(&entry, env).with_context(|| format!("aws.credentials {id:?}"))?;
            if let Some(name) = &entry.name
                && !valid_user_name(name)
            {
                bail!(
                    "aws.credentials {id:?}: name {name:?} must be an IAM user name: 1 to 64 \
                     letters, digits and + = , . @ _ -"
                );
            }
            if let Some(account) = &entry.account_id
                && !valid_account_id(account)
            {
                bail!("aws.credentials {id:?}: account_id must be 12 digits, got {account:?}");
            }
            let permissions = entry
                .permissions
                .iter()
                .map(|p| {
                    p.parse::<Permission>()
                        .with_context(|| format!("aws.credentials {id:?}: permission {p:?}"))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            Ok(AccessKey {
                id,
                secret,
                name: entry.name,
                account_id: entry.account_id,
                permissions,
            })
        })
        .collect()
}

/// The secret, from the one place the entry names.
fn secret(entry: &AwsCredential, env: Env) -> anyhow::Result<String> {
    let secret = match (
        &entry.secret_access_key,
        &entry.secret_access_key_env,
        &entry.secret_access_key_file,
    ) {
        (Some(inline), None, None) => inline.clone(),
        (None, Some(variable), None) => env(variable).with_context(|| {
            format!("secret_access_key_env names {variable:?}, which is not set")
        })?,
        (None, None, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading secret_access_key_file {}", path.display()))?;
            // A file written by `echo` ends in a newline that is not part of the secret.
            text.trim_end_matches(['\r', '\n']).to_owned()
        }
        (None, None, None) => bail!(
            "no secret: set one of secret_access_key, secret_access_key_env (a variable \
             holding it) or secret_access_key_file (a file holding it)"
        ),
        _ => bail!(
            "more than one of secret_access_key, secret_access_key_env and \
             secret_access_key_file is set: keep one"
        ),
    };
    if secret.is_empty() {
        bail!("the secret access key is empty");
    }
    Ok(secret)
}

/// Letters and digits only: a key id is written into the `Credential=<id>/<scope>` of the
/// `Authorization` header, where `/`, `,` or `=` would change what it says.
fn valid_key_id(id: &str) -> bool {
    (1..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric())
}

fn valid_account_id(account: &str) -> bool {
    account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit())
}

fn valid_user_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+=,.@_-".contains(&b))
}
