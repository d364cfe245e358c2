//! Paging of list answers: names in order, a page of at most `page_size` (100 when 0, at
//! most 1,000), and as the next page's token the last name given, so a page stays right
//! when names are created or deleted between calls.

use tonic::Status;

const DEFAULT_PAGE: usize = 100;
const MAX_PAGE: usize = 1000;

/// The page of `names` (sorted) after `token`, and the token of the next one (empty at the
/// end).
pub fn page(
    names: Vec<String>,
    page_size: i32,
    token: &str,
) -> Result<(Vec<String>, String), Status> {
    let size = match page_size {
        0 => DEFAULT_PAGE,
        n if n < 0 => {
            return Err(Status::invalid_argument(format!(
                "page_size must not be negative (got {n})"
            )));
        }
        n => (n as usize).min(MAX_PAGE),
    };
    let mut rest: Vec<String> = names
        .into_iter()
        .filter(|n| token.is_empty() || n.as_str() > token)
        .collect();
    let more = rest.len() > size;
    rest.truncate(size);
    let next = if more {
        rest.last().cloned().unwrap_or_default()
    } else {
        String::new()
    };
    Ok((rest, next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_walk_every_name_once() {
        let names: Vec<String> = (0..5).map(|i| format!("n{i}")).collect();
        let (first, token) = page(names.clone(), 2, "").unwrap();
        assert_eq!(first, ["n0", "n1"]);
        let (second, token) = page(names.clone(), 2, &token).unwrap();
        assert_eq!(second, ["n2", "n3"]);
        let (last, token) = page(names.clone(), 2, &token).unwrap();
        assert_eq!(last, ["n4"]);
        assert!(token.is_empty());
        assert!(page(names, -1, "").is_err());
    }
}
