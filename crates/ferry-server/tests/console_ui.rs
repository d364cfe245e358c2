//! The web console's files as `ferry serve` serves them: `/ui` redirects to the page,
//! the page has its sign-in form, everything it names (and every module those import)
//! is served with the right type, every file of `console/` is embedded, nothing needs a
//! token, and every answer carries the content security policy.

use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use ferry_server::AuthConfig;

mod support;

use support::{RawReply, Served, grant};

const TOKEN: &str = "console-3c1f5e7a9b2d4f6a8c0e1b3d5f7a9c1e";
const CSP: &str = "content-security-policy: default-src 'self'";

async fn served_with_tokens() -> Served {
    let (broker, dir) = support::fresh_broker().await;
    Served::serve(broker, Some(dir), |s| {
        s.auth(AuthConfig {
            tokens: vec![grant("root", TOKEN, &["admin:#"])],
        })
    })
    .await
}

async fn get(s: &Served, path: &str) -> RawReply {
    support::exchange(s.http, "", "GET", path, b"").await
}

/// A header's value (names compared case-insensitively), if the reply has it.
fn header<'a>(reply: &'a RawReply, name: &str) -> Option<&'a str> {
    reply.head.lines().skip(1).find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn text(reply: &RawReply) -> String {
    String::from_utf8(reply.body.clone()).expect("UTF-8")
}

fn expected_type(path: &str) -> &'static str {
    match path.rsplit('.').next() {
        Some("html") => "text/html; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("svg") => "image/svg+xml",
        other => panic!("{path}: the suite knows no content type for {other:?}"),
    }
}

/// `reference` resolved against the URL path `base` (a file's path: its last segment is
/// replaced), with `.` and `..` segments applied as a browser would.
fn resolve(base: &str, reference: &str) -> String {
    let joined = if reference.starts_with('/') {
        reference.to_owned()
    } else {
        format!("{}{}", &base[..=base.rfind('/').unwrap()], reference)
    };
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = joined.split('/').skip(1).collect();
    for (i, seg) in segments.iter().enumerate() {
        match *seg {
            "." => {}
            ".." => {
                out.pop();
            }
            s => out.push(s),
        }
        // A trailing `.`/`..` still names a directory.
        if i == segments.len() - 1 && (*seg == "." || *seg == "..") {
            out.push("");
        }
    }
    format!("/{}", out.join("/"))
}

/// The values of `attr="..."` attributes in an HTML document.
fn attribute_values(html: &str, attr: &str) -> Vec<String> {
    let needle = format!(" {attr}=\"");
    let mut values = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find(&needle) {
        rest = &rest[at + needle.len()..];
        let end = rest.find('"').expect("a closed attribute");
        values.push(rest[..end].to_owned());
        rest = &rest[end..];
    }
    values
}

/// The specifiers a module imports: `import … from '…'`, `import '…'`, `export … from
/// '…'` and `import('…')`.
fn imports(source: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in source.lines() {
        let line = line.trim_start();
        let static_import = (line.starts_with("import ") || line.starts_with("export "))
            && (line.contains(" from ")
                || line.starts_with("import '")
                || line.starts_with("import \""));
        let dynamic = line.contains("import(");
        if !(static_import || dynamic) || line.starts_with("//") {
            continue;
        }
        let start = if dynamic && !static_import {
            line.find("import(").unwrap() + "import(".len()
        } else {
            line.rfind(" from ")
                .map(|i| i + 6)
                .unwrap_or("import ".len())
        };
        let rest = line[start..].trim_start();
        let quote = rest.chars().next().filter(|c| *c == '\'' || *c == '"');
        if let Some(q) = quote {
            let end = rest[1..].find(q).expect("a closed specifier") + 1;
            found.push(rest[1..end].to_owned());
        }
    }
    found
}

fn console_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("console")
}

fn files_under(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_under(&path, into);
        } else {
            into.push(path);
        }
    }
}

fn assert_served_as(reply: &RawReply, path: &str) {
    assert_eq!(reply.status, 200, "{path}: {}", reply.head);
    assert_eq!(
        header(reply, "content-type"),
        Some(expected_type(path)),
        "{path}"
    );
    assert_eq!(header(reply, "cache-control"), Some("no-cache"), "{path}");
}

#[tokio::test]
async fn ui_without_a_trailing_slash_redirects_to_the_page() {
    let s = served_with_tokens().await;
    let reply = get(&s, "/ui").await;
    assert!(
        [301, 308].contains(&reply.status),
        "a permanent redirect: {}",
        reply.head
    );
    assert_eq!(header(&reply, "location"), Some("/ui/"));
}

#[tokio::test]
async fn the_page_has_the_sign_in_form_and_every_file_it_names_is_served() {
    let s = served_with_tokens().await;
    let page = get(&s, "/ui/").await;
    assert_served_as(&page, "/ui/index.html");
    let html = text(&page);
    for part in [
        "<form id=\"login\">",
        "<label for=\"token\">API token</label>",
        "<input id=\"token\" type=\"password\"",
        "<button type=\"submit\" class=\"primary\">Sign in</button>",
        "id=\"sign-out\"",
    ] {
        assert!(html.contains(part), "the page lacks {part}");
    }
    let mut named: Vec<String> = attribute_values(&html, "src");
    named.extend(attribute_values(&html, "href"));
    let files: BTreeSet<String> = named
        .iter()
        .filter(|v| !v.starts_with('#'))
        .map(|v| resolve("/ui/", v))
        .collect();
    assert!(
        files.contains("/ui/assets/js/main.js") && files.contains("/ui/assets/console.css"),
        "the page names its script and its styles: {files:?}"
    );
    for path in &files {
        let reply = get(&s, path).await;
        assert_served_as(&reply, path);
    }
}

#[tokio::test]
async fn every_module_import_resolves_to_a_served_module() {
    let s = served_with_tokens().await;
    // Walk the module graph from the entry, as the browser does.
    let mut queue = VecDeque::from(["/ui/assets/js/main.js".to_owned()]);
    let mut seen = BTreeSet::new();
    while let Some(module) = queue.pop_front() {
        if !seen.insert(module.clone()) {
            continue;
        }
        let reply = get(&s, &module).await;
        assert_served_as(&reply, &module);
        for specifier in imports(&text(&reply)) {
            assert!(
                specifier.starts_with("./") || specifier.starts_with("../"),
                "{module} imports {specifier:?}: only relative imports of the console's own modules"
            );
            queue.push_back(resolve(&module, &specifier));
        }
    }
    // Every module on disk is reached from the entry: none is dead or forgotten.
    let mut on_disk = Vec::new();
    files_under(&console_dir(), &mut on_disk);
    let modules: BTreeSet<String> = on_disk
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "js"))
        .map(|p| format!("/ui/{}", p.strip_prefix(console_dir()).unwrap().display()))
        .collect();
    assert_eq!(seen, modules);
}

#[tokio::test]
async fn every_file_of_the_console_directory_is_embedded_and_served() {
    let s = served_with_tokens().await;
    let mut files = Vec::new();
    files_under(&console_dir(), &mut files);
    assert!(files.len() > 10, "the console's files: {files:?}");
    for file in files {
        let relative = file
            .strip_prefix(console_dir())
            .unwrap()
            .display()
            .to_string();
        let path = format!("/ui/{relative}");
        let reply = get(&s, &path).await;
        assert_served_as(&reply, &path);
        assert_eq!(
            reply.body,
            std::fs::read(&file).unwrap(),
            "{path}: the embedded copy is stale"
        );
    }
}

#[tokio::test]
async fn an_unknown_file_is_not_found() {
    let s = served_with_tokens().await;
    for path in [
        "/ui/assets/nope.js",
        "/ui/assets/js/../../../Cargo.toml",
        "/ui/assets/",
        "/ui/src/lib.rs",
    ] {
        let reply = get(&s, path).await;
        assert_eq!(reply.status, 404, "{path}: {}", reply.head);
    }
}

#[tokio::test]
async fn the_console_needs_no_token_though_the_api_does() {
    let s = served_with_tokens().await;
    assert_eq!(
        get(&s, "/v1/queues").await.status,
        401,
        "tokens are required"
    );
    for path in ["/ui/", "/ui/assets/js/main.js", "/ui/assets/console.css"] {
        assert_eq!(get(&s, path).await.status, 200, "{path}");
    }
}

#[tokio::test]
async fn every_file_carries_the_content_security_policy() {
    let s = served_with_tokens().await;
    for path in [
        "/ui/",
        "/ui/assets/js/main.js",
        "/ui/assets/console.css",
        "/ui/assets/icon.svg",
    ] {
        let reply = get(&s, path).await;
        let head = reply.head.to_ascii_lowercase();
        assert!(head.contains(CSP), "{path}: {}", reply.head);
        assert!(head.contains("frame-ancestors 'none'"), "{path}");
        assert!(head.contains("x-content-type-options: nosniff"), "{path}");
        let policy = header(&reply, "content-security-policy").unwrap();
        assert!(
            !policy.contains("unsafe-inline") && !policy.contains("unsafe-eval"),
            "{policy}"
        );
    }
}

/// The policy forbids inline script and handlers; the page must not need them, and no
/// module builds markup from strings (names and payloads are always text).
#[test]
fn the_page_has_no_inline_script_or_handler_and_no_module_parses_html() {
    let html = std::fs::read_to_string(console_dir().join("index.html")).unwrap();
    let lower = html.to_ascii_lowercase();
    let scripts = lower.matches("<script").count();
    let external = lower.matches("<script type=\"module\" src=").count();
    assert_eq!(scripts, external, "every script is a module from a file");
    for handler in [
        " onclick=",
        " onload=",
        " onsubmit=",
        " oninput=",
        " style=",
        "javascript:",
    ] {
        assert!(!lower.contains(handler), "index.html has {handler}");
    }
    let mut files = Vec::new();
    files_under(&console_dir(), &mut files);
    for file in files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "js"))
    {
        let source = std::fs::read_to_string(file).unwrap();
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
        ] {
            assert!(!source.contains(sink), "{} uses {sink}", file.display());
        }
    }
}

#[test]
fn relative_references_resolve_as_a_browser_resolves_them() {
    assert_eq!(resolve("/ui/", "assets/a.css"), "/ui/assets/a.css");
    assert_eq!(
        resolve("/ui/assets/js/main.js", "./api.js"),
        "/ui/assets/js/api.js"
    );
    assert_eq!(
        resolve("/ui/assets/js/pages/queue.js", "../dom.js"),
        "/ui/assets/js/dom.js"
    );
    assert_eq!(resolve("/ui/assets/js/main.js", "/ui/x.js"), "/ui/x.js");
    assert_eq!(
        imports(
            "import { a } from './a.js';\nimport * as b from \"../b.js\";\nconst c = import('./c.js');\n// import x from './no.js'\n"
        ),
        vec!["./a.js", "../b.js", "./c.js"]
    );
}
