//! Static files end to end (issue 2, point 7): Content-Type by extension, ETag
//! and Last-Modified with 304, single ranges (206, 416), HEAD, the default
//! `Cache-Control`, and no way out of the mount (`..`, `%2e%2e`, symlinks that
//! leave the root: 404).

mod common;

use std::time::{Duration, SystemTime};

use common::{pattern, Server, TempDir};

/// The tree under test:
///
/// ```text
/// <tmp>/root/            mounted at /static
///     index.html a.txt style.css app.js data.json pixel.png blob.zzz
///     with space.txt  big.bin  sub/inner.txt
///     leak.txt -> ../outside/secret.txt     (a symlink out of the root)
///     leakdir  -> ../outside                (a directory symlink out of it)
/// <tmp>/outside/secret.txt
/// ```
struct Tree {
    dir: TempDir,
    server: Server,
}

const SECRET: &[u8] = b"the secret outside the mount\n";
const BIG: usize = 300 * 1024;

impl Tree {
    fn new() -> Tree {
        let dir = TempDir::new("static");
        dir.write("root/index.html", b"<!doctype html><h1>hi</h1>\n");
        dir.write("root/a.txt", b"hello world\n");
        dir.write("root/style.css", b"h1 { color: red }\n");
        dir.write("root/app.js", b"console.log(1)\n");
        dir.write("root/data.json", b"{\"a\": 1}\n");
        dir.write("root/pixel.png", b"\x89PNG\r\n\x1a\nnot really");
        dir.write("root/blob.zzz", b"opaque");
        dir.write("root/with space.txt", b"spaced\n");
        dir.write("root/big.bin", &pattern(BIG));
        dir.write("root/sub/inner.txt", b"inner\n");
        dir.write("outside/secret.txt", SECRET);
        std::os::unix::fs::symlink("../outside/secret.txt", dir.path().join("root/leak.txt"))
            .unwrap();
        std::os::unix::fs::symlink("../outside", dir.path().join("root/leakdir")).unwrap();
        let root = dir.path().join("root");
        let server = Server::start(&[
            "--static-path-route",
            "/static",
            "--static-path-mount",
            root.to_str().unwrap(),
        ]);
        Tree { dir, server }
    }

    fn mtime_http(&self, rel: &str) -> String {
        let meta = std::fs::metadata(self.dir.path().join("root").join(rel)).unwrap();
        httpdate::fmt_http_date(meta.modified().unwrap())
    }
}

/// The media type without parameters, lowercased.
fn media_type(v: Option<&str>) -> String {
    v.unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

#[test]
fn files_are_served_with_their_content_type() {
    let t = Tree::new();
    let cases: &[(&str, &[&str], &[u8])] = &[
        (
            "index.html",
            &["text/html"],
            b"<!doctype html><h1>hi</h1>\n",
        ),
        ("a.txt", &["text/plain"], b"hello world\n"),
        ("style.css", &["text/css"], b"h1 { color: red }\n"),
        (
            "app.js",
            &["text/javascript", "application/javascript"],
            b"console.log(1)\n",
        ),
        ("data.json", &["application/json"], b"{\"a\": 1}\n"),
        ("pixel.png", &["image/png"], b"\x89PNG\r\n\x1a\nnot really"),
        ("blob.zzz", &["application/octet-stream"], b"opaque"),
        ("sub/inner.txt", &["text/plain"], b"inner\n"),
    ];
    let mut c = t.server.connect();
    for (rel, types, body) in cases {
        let r = c.request("GET", &format!("/static/{rel}"), &[]);
        assert_eq!(r.status, 200, "{rel}");
        assert_eq!(r.body, *body, "{rel}");
        assert_eq!(
            r.header("content-length"),
            Some(body.len().to_string().as_str()),
            "{rel}"
        );
        let ty = media_type(r.header("content-type"));
        assert!(
            types.contains(&ty.as_str()),
            "{rel}: Content-Type {ty:?}, wanted one of {types:?}"
        );
        // --static-path-expires' default, as Granian's.
        assert_eq!(r.header("cache-control"), Some("max-age=86400"), "{rel}");
    }
}

#[test]
fn a_large_file_arrives_whole() {
    let t = Tree::new();
    let r = t.server.get("/static/big.bin");
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), BIG);
    assert!(r.body == pattern(BIG), "the body differs from the file");
}

#[test]
fn percent_encoded_names_and_queries_are_resolved() {
    let t = Tree::new();
    let r = t.server.get("/static/with%20space.txt");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"spaced\n"[..]));
    let r = t.server.get("/static/a.txt?v=123");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"hello world\n"[..]));
}

#[test]
fn missing_files_and_unrouted_paths_are_404() {
    let t = Tree::new();
    assert_eq!(t.server.get("/static/missing.txt").status, 404);
    assert_eq!(t.server.get("/static/sub/missing.txt").status, 404);
    assert_eq!(t.server.get("/elsewhere/a.txt").status, 404);
}

#[test]
fn etag_and_last_modified_validate_with_304() {
    let t = Tree::new();
    let mut c = t.server.connect();
    let r = c.request("GET", "/static/a.txt", &[]);
    assert_eq!(r.status, 200);
    let etag = r.header("etag").expect("an ETag").to_string();
    assert!(
        etag.ends_with('"') && etag.trim_start_matches("W/").starts_with('"'),
        "ETag {etag:?}"
    );
    let last_modified = r
        .header("last-modified")
        .expect("a Last-Modified")
        .to_string();
    assert_eq!(
        last_modified,
        t.mtime_http("a.txt"),
        "Last-Modified is the file's mtime"
    );

    // The same representation: 304, no body (the next answer on this connection proves it).
    let r = c.request("GET", "/static/a.txt", &[("If-None-Match", &etag)]);
    assert_eq!(r.status, 304);
    assert_eq!(
        r.header("etag"),
        Some(etag.as_str()),
        "a 304 repeats the ETag"
    );
    let r = c.request(
        "GET",
        "/static/a.txt",
        &[("If-Modified-Since", &last_modified)],
    );
    assert_eq!(r.status, 304);

    // Another representation: 200 with the body.
    let r = c.request(
        "GET",
        "/static/a.txt",
        &[("If-None-Match", "\"something-else\"")],
    );
    assert_eq!((r.status, r.body.as_slice()), (200, &b"hello world\n"[..]));
    let long_ago = httpdate::fmt_http_date(SystemTime::now() - Duration::from_secs(30 * 86400));
    let r = c.request("GET", "/static/a.txt", &[("If-Modified-Since", &long_ago)]);
    assert_eq!((r.status, r.body.as_slice()), (200, &b"hello world\n"[..]));

    // RFC 9110 §13.1.3: If-Modified-Since is ignored when If-None-Match is present.
    let r = c.request(
        "GET",
        "/static/a.txt",
        &[
            ("If-None-Match", "\"something-else\""),
            ("If-Modified-Since", &last_modified),
        ],
    );
    assert_eq!(
        r.status, 200,
        "If-None-Match decides, not If-Modified-Since"
    );

    // The connection is still in step after the bodiless 304s.
    let r = c.request("GET", "/static/sub/inner.txt", &[]);
    assert_eq!((r.status, r.body.as_slice()), (200, &b"inner\n"[..]));
}

#[test]
fn a_changed_file_gets_a_new_etag() {
    let t = Tree::new();
    let before = t
        .server
        .get("/static/a.txt")
        .header("etag")
        .unwrap()
        .to_string();
    std::thread::sleep(Duration::from_millis(20));
    t.dir.write("root/a.txt", b"hello again, longer\n");
    let r = t.server.get("/static/a.txt");
    assert_eq!(r.body, b"hello again, longer\n");
    assert_ne!(r.header("etag").unwrap(), before);
    let r = t
        .server
        .connect()
        .request("GET", "/static/a.txt", &[("If-None-Match", &before)]);
    assert_eq!(r.status, 200, "the old ETag no longer matches");
}

#[test]
fn single_ranges_get_206() {
    let t = Tree::new();
    let mut c = t.server.connect();
    let cases: &[(&str, &[u8], &str)] = &[
        ("bytes=0-4", b"hello", "bytes 0-4/12"),
        ("bytes=6-", b"world\n", "bytes 6-11/12"),
        ("bytes=-6", b"world\n", "bytes 6-11/12"),
        ("bytes=6-100", b"world\n", "bytes 6-11/12"),
    ];
    for (range, body, content_range) in cases {
        let r = c.request("GET", "/static/a.txt", &[("Range", range)]);
        assert_eq!(r.status, 206, "{range}");
        assert_eq!(r.body, *body, "{range}");
        assert_eq!(r.header("content-range"), Some(*content_range), "{range}");
        assert_eq!(
            r.header("content-length"),
            Some(body.len().to_string().as_str()),
            "{range}"
        );
    }
    // Deep inside a larger file: the offset reaches the file read, not only the headers.
    let r = c.request(
        "GET",
        "/static/big.bin",
        &[("Range", "bytes=200000-200999")],
    );
    assert_eq!(r.status, 206);
    assert!(
        r.body == pattern(BIG)[200_000..201_000],
        "wrong bytes for the range"
    );
    assert_eq!(
        r.header("content-range"),
        Some(format!("bytes 200000-200999/{BIG}").as_str())
    );
}

#[test]
fn unsatisfiable_ranges_get_416() {
    let t = Tree::new();
    let mut c = t.server.connect();
    for range in ["bytes=12-", "bytes=100-200"] {
        let r = c.request("GET", "/static/a.txt", &[("Range", range)]);
        assert_eq!(r.status, 416, "{range}");
        assert_eq!(r.header("content-range"), Some("bytes */12"), "{range}");
    }
    // Still in step afterwards.
    assert_eq!(c.request("GET", "/static/a.txt", &[]).status, 200);
}

#[test]
fn head_answers_like_get_without_the_body() {
    let t = Tree::new();
    let mut c = t.server.connect();
    let get = c.request("GET", "/static/style.css", &[]);
    let head = c.request("HEAD", "/static/style.css", &[]);
    assert_eq!(head.status, 200);
    for h in ["content-length", "content-type", "etag", "last-modified"] {
        assert_eq!(head.header(h), get.header(h), "{h}");
    }
    // A HEAD answer with body bytes would spoil this next answer.
    let r = c.request("GET", "/static/a.txt", &[]);
    assert_eq!((r.status, r.body.as_slice()), (200, &b"hello world\n"[..]));
}

#[test]
fn dot_dot_in_any_spelling_is_404() {
    let t = Tree::new();
    let targets = [
        "/static/../outside/secret.txt",
        "/static/sub/../../outside/secret.txt",
        "/static/%2e%2e/outside/secret.txt",
        "/static/%2E%2E/outside/secret.txt",
        "/static/sub/%2e%2e/%2e%2e/outside/secret.txt",
        "/static/..%2foutside%2fsecret.txt",
        "/static/%2e%2e%2foutside%2fsecret.txt",
        "/static/.%2e/outside/secret.txt",
    ];
    for target in targets {
        // Sent exactly as written: the client does not normalise.
        let r = t.server.get(target);
        assert_eq!(r.status, 404, "{target}");
        assert!(
            common::find(&r.body, SECRET).is_none(),
            "{target} leaked the secret"
        );
    }
}

#[test]
fn symlinks_out_of_the_root_are_404() {
    let t = Tree::new();
    for target in ["/static/leak.txt", "/static/leakdir/secret.txt"] {
        let r = t.server.get(target);
        assert_eq!(r.status, 404, "{target}");
        assert!(
            common::find(&r.body, SECRET).is_none(),
            "{target} leaked the secret"
        );
    }
    // The tree itself is fine: the refusal is about leaving it.
    assert_eq!(t.server.get("/static/sub/inner.txt").status, 200);
}
