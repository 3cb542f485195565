//! Static files under a route prefix, sent as [`Body::File`] (zero-copy where
//! the backend can).
//!
//! Containment: the path under the prefix is percent-decoded, `..` segments,
//! backslashes and NUL are refused, and the canonicalized file must lie under
//! the canonicalized mount root, so neither `%2e%2e` nor a symlink leaves it.
//! Every refusal is a 404, never a 403, so the tree outside cannot be probed.
//!
//! Caching and ranges follow RFC 9110: a strong ETag and Last-Modified,
//! `If-None-Match` (weak comparison) before `If-Modified-Since` → 304, and a
//! single byte range → 206 (or 416). Several ranges are answered with the
//! whole file (200), which RFC 9110 allows, rather than multipart/byteranges.

use std::ffi::OsStr;
use std::fs::{File, Metadata, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use percent_encoding::percent_decode_str;

use super::{is_get_or_head, method_not_allowed, mime, not_found, ConfigError};
use crate::http::RequestHead;
use crate::reply::{Body, Reply};

/// How every mount serves its files: set once for the router.
#[derive(Debug)]
pub(super) struct Serving {
    /// The `Cache-Control` value files (and their 304s) carry, if any.
    pub(super) cache_control: Option<String>,
    /// The file a directory stands for.
    pub(super) index: String,
}

impl Default for Serving {
    fn default() -> Serving {
        Serving {
            cache_control: None,
            index: "index.html".into(),
        }
    }
}

/// One route prefix served from one directory.
#[derive(Debug)]
pub(super) struct Mount {
    /// The route without its trailing `/` (so `""` for a mount at `/`).
    route: String,
    /// The canonical directory: symlink checks compare against it.
    root: PathBuf,
}

impl Mount {
    pub(super) fn new(route: &str, dir: &Path) -> Result<Mount, ConfigError> {
        let shown = dir.display();
        let root = dir.canonicalize().map_err(|e| {
            let why = match e.kind() {
                std::io::ErrorKind::NotFound => "does not exist".to_string(),
                _ => format!("cannot be opened: {e}"),
            };
            ConfigError(format!("static mount '{route}': directory '{shown}' {why}"))
        })?;
        if !root.is_dir() {
            return Err(ConfigError(format!(
                "static mount '{route}': '{shown}' is not a directory"
            )));
        }
        Ok(Mount {
            route: route.trim_end_matches('/').to_string(),
            root,
        })
    }

    pub(super) fn route(&self) -> &str {
        &self.route
    }

    /// The rest of `path` under this mount (`""` or starting with `/`), or
    /// `None` when `path` is not under the route. Whole segments only:
    /// `/static` does not own `/staticfoo`.
    pub(super) fn strip<'a>(&self, path: &'a str) -> Option<&'a str> {
        let rest = path.strip_prefix(&self.route)?;
        (rest.is_empty() || rest.starts_with('/')).then_some(rest)
    }

    /// Answer `head`, whose path's part under this mount is `rest`; a file
    /// (or its 304, RFC 9110 §15.4.5) carries the `Cache-Control` when set.
    pub(super) fn serve(&self, head: &RequestHead, rest: &str, how: &Serving) -> Reply {
        if !is_get_or_head(head) {
            return method_not_allowed();
        }
        let Some(path) = self.resolve(rest, &how.index) else {
            return not_found();
        };
        let Some((file, meta)) = open_regular(&path) else {
            return not_found();
        };
        let validators = Validators::of(&meta);
        let mut headers = validators.headers();
        // The file's answers carry it; a 416 does not (it would keep a stale
        // refusal for as long once the file grows).
        let cache_control = how
            .cache_control
            .as_ref()
            .map(|value| ("Cache-Control".to_string(), value.clone()));
        if not_modified(head, &validators) {
            headers.extend(cache_control);
            return Reply {
                status: 304,
                headers,
                body: Body::Empty,
            };
        }

        let size = meta.len();
        headers.push(("Content-Type".into(), mime::content_type(&path).into()));
        if let Some(coding) = mime::content_encoding(&path) {
            headers.push(("Content-Encoding".into(), coding.into()));
        }
        headers.push(("Accept-Ranges".into(), "bytes".into()));
        // Range handling is defined for GET only (RFC 9110 §14.2): HEAD gets the whole.
        let range = match head.header("Range") {
            Some(value) if head.method == "GET" && if_range_holds(head, &validators) => {
                parse_range(value, size)
            }
            _ => Range::Whole,
        };
        let (status, offset, len) = match range {
            Range::Whole => (200, 0, size),
            Range::Part { start, len } => {
                let end = start + len - 1;
                headers.push((
                    "Content-Range".into(),
                    format!("bytes {start}-{end}/{size}"),
                ));
                (206, start, len)
            }
            Range::Unsatisfiable => {
                headers.push(("Content-Range".into(), format!("bytes */{size}")));
                headers.push(("Content-Length".into(), "0".into()));
                return Reply {
                    status: 416,
                    headers,
                    body: Body::Empty,
                };
            }
        };
        headers.extend(cache_control);
        headers.push(("Content-Length".into(), len.to_string()));
        Reply {
            status,
            headers,
            body: Body::File { file, offset, len },
        }
    }

    /// The real path `rest` names under the root, or `None` if it would leave
    /// the root or does not exist. A directory stands for its `index` file.
    fn resolve(&self, rest: &str, index: &str) -> Option<PathBuf> {
        let decoded: Vec<u8> = percent_decode_str(rest).collect();
        // A backslash is a separator to some filesystems and tools; NUL ends C strings.
        if decoded.iter().any(|&b| b == b'\\' || b == 0) {
            return None;
        }
        let mut path = self.root.clone();
        for segment in decoded.split(|&b| b == b'/') {
            match segment {
                b"" | b"." => {}
                b".." => return None,
                name => path.push(OsStr::from_bytes(name)),
            }
        }
        let real = self.contained(&path)?;
        if real.is_dir() {
            return self.contained(&real.join(index));
        }
        Some(real)
    }

    /// `path` with every symlink resolved, if that still lies under the root.
    fn contained(&self, path: &Path) -> Option<PathBuf> {
        let real = path.canonicalize().ok()?;
        real.starts_with(&self.root).then_some(real)
    }
}

/// Open `path` if it is a regular file. `O_NOFOLLOW` refuses a symlink swapped
/// in since it was resolved; `O_NONBLOCK` keeps a FIFO from blocking the core
/// thread until `fstat` turns it away.
fn open_regular(path: &Path) -> Option<(File, Metadata)> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    meta.is_file().then_some((file, meta))
}

/// What a client can revalidate a file against.
struct Validators {
    /// Strong: `"{size:x}-{mtime_ns:x}"`, changes whenever size or mtime does.
    etag: String,
    /// Whole seconds since the epoch, the precision of HTTP dates.
    modified_secs: u64,
    last_modified: String,
}

impl Validators {
    fn of(meta: &Metadata) -> Validators {
        let modified = meta.modified().unwrap_or(UNIX_EPOCH);
        let since_epoch = modified.duration_since(UNIX_EPOCH).unwrap_or_default();
        Validators {
            etag: format!("\"{:x}-{:x}\"", meta.len(), since_epoch.as_nanos()),
            modified_secs: since_epoch.as_secs(),
            last_modified: httpdate::fmt_http_date(modified),
        }
    }

    fn headers(&self) -> Vec<(String, String)> {
        vec![
            ("ETag".into(), self.etag.clone()),
            ("Last-Modified".into(), self.last_modified.clone()),
        ]
    }
}

/// RFC 9110 §13.2.2: If-None-Match decides when present; If-Modified-Since
/// only counts without it.
fn not_modified(head: &RequestHead, v: &Validators) -> bool {
    if let Some(value) = head.header("If-None-Match") {
        if value.trim_ascii() == b"*" {
            return true;
        }
        // Weak comparison: `W/"x"` matches `"x"`.
        return entity_tags(value).any(|(_, opaque)| opaque == v.etag.as_bytes());
    }
    match head.header("If-Modified-Since").and_then(http_date_secs) {
        Some(since) => v.modified_secs <= since,
        None => false,
    }
}

/// Whether a Range may be honoured under If-Range (RFC 9110 §13.1.5): absent,
/// or naming the current representation by strong ETag or exact date.
fn if_range_holds(head: &RequestHead, v: &Validators) -> bool {
    let Some(value) = head.header("If-Range") else {
        return true;
    };
    let value = value.trim_ascii();
    if value.starts_with(b"\"") || value.starts_with(b"W/") {
        // Strong comparison: a weak tag never matches.
        let mut tags = entity_tags(value);
        return matches!(tags.next(), Some((false, opaque)) if opaque == v.etag.as_bytes());
    }
    http_date_secs(value) == Some(v.modified_secs)
}

/// The entity-tags of a comma-separated list, as (weak, opaque-tag with its
/// quotes). Stops at the first malformed element.
fn entity_tags(list: &[u8]) -> impl Iterator<Item = (bool, &[u8])> {
    let mut rest = list;
    std::iter::from_fn(move || {
        rest = rest.trim_ascii_start();
        while let [b',', tail @ ..] = rest {
            rest = tail.trim_ascii_start();
        }
        let (weak, tagged) = match rest.strip_prefix(b"W/") {
            Some(tail) => (true, tail),
            None => (false, rest),
        };
        let body = tagged.strip_prefix(b"\"")?;
        let close = body.iter().position(|&b| b == b'"')?;
        let opaque = &tagged[..close + 2];
        rest = &body[close + 1..];
        Some((weak, opaque))
    })
}

/// An HTTP-date as whole seconds since the epoch; `None` if it is not one.
fn http_date_secs(value: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(value).ok()?;
    let time: SystemTime = httpdate::parse_http_date(text.trim()).ok()?;
    Some(time.duration_since(UNIX_EPOCH).ok()?.as_secs())
}

/// What a Range header asks of a file.
#[derive(Debug, PartialEq, Eq)]
enum Range {
    /// No usable range (absent, malformed, another unit, several ranges): send it all.
    Whole,
    /// `len` (≥ 1) bytes from `start`, all inside the file.
    Part { start: u64, len: u64 },
    /// A well-formed range that starts past the end: 416.
    Unsatisfiable,
}

/// Parse a `Range` value for a file of `size` bytes: `bytes=a-b`, `bytes=a-`,
/// `bytes=-n`. An invalid value is ignored (RFC 9110 §14.2), so it is `Whole`.
fn parse_range(value: &[u8], size: u64) -> Range {
    let Some((unit, spec)) = std::str::from_utf8(value)
        .ok()
        .and_then(|v| v.split_once('='))
    else {
        return Range::Whole;
    };
    if !unit.trim().eq_ignore_ascii_case("bytes") || spec.contains(',') {
        return Range::Whole;
    }
    let Some((first, last)) = spec.trim().split_once('-') else {
        return Range::Whole;
    };
    let (first, last) = (first.trim(), last.trim());
    if first.is_empty() {
        // A suffix: the last n bytes.
        return match digits(last) {
            None => Range::Whole,
            Some(0) => Range::Unsatisfiable,
            Some(_) if size == 0 => Range::Unsatisfiable,
            Some(n) => {
                let start = size.saturating_sub(n);
                Range::Part {
                    start,
                    len: size - start,
                }
            }
        };
    }
    let Some(start) = digits(first) else {
        return Range::Whole;
    };
    let end = if last.is_empty() {
        Some(u64::MAX)
    } else {
        digits(last)
    };
    match end {
        None => Range::Whole,
        Some(end) if end < start => Range::Whole,
        Some(_) if start >= size => Range::Unsatisfiable,
        Some(end) => Range::Part {
            start,
            len: end.min(size - 1) - start + 1,
        },
    }
}

/// A non-empty run of ASCII digits (`u64::from_str` would also take `+5`).
fn digits(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{symlink, FileExt, MetadataExt};

    use super::super::testing::{header, request, TempDir};
    use super::*;

    /// A mount at `/static` over a small tree, with a secret outside it.
    struct Fixture {
        dir: TempDir,
        mount: Mount,
    }

    const HELLO: &str = "hello world";

    impl Fixture {
        fn new(tag: &str) -> Fixture {
            let dir = TempDir::new(tag);
            let root = dir.path().join("root");
            let outside = dir.path().join("outside");
            for d in [&root, &root.join("sub"), &root.join("bare"), &outside] {
                std::fs::create_dir_all(d).unwrap();
            }
            std::fs::write(root.join("hello.txt"), HELLO).unwrap();
            std::fs::write(root.join("a b.css"), "body{}").unwrap();
            std::fs::write(root.join("empty.bin"), "").unwrap();
            std::fs::write(root.join("logo.svgz"), b"\x1f\x8b\x08\0").unwrap();
            std::fs::write(root.join("site.tar.gz"), b"\x1f\x8b\x08\0").unwrap();
            std::fs::write(root.join("sub/index.html"), "<p>sub</p>").unwrap();
            std::fs::write(outside.join("secret.txt"), "secret").unwrap();
            symlink(outside.join("secret.txt"), root.join("leak.txt")).unwrap();
            symlink(&outside, root.join("leakdir")).unwrap();
            symlink(outside.join("secret.txt"), root.join("bare/index.html")).unwrap();
            symlink(root.join("hello.txt"), root.join("alias.txt")).unwrap();
            let mount = Mount::new("/static/", &root).unwrap();
            Fixture { dir, mount }
        }

        fn get(&self, method: &str, target: &str, headers: &[(&str, &str)]) -> Reply {
            let head = request(method, target, headers);
            let rest = self.mount.strip(head.path()).expect("under the mount");
            self.mount.serve(&head, rest, &Serving::default())
        }

        fn meta(&self, name: &str) -> Metadata {
            std::fs::metadata(self.dir.path().join("root").join(name)).unwrap()
        }
    }

    /// The bytes a reply's file body would send.
    fn body(reply: &Reply) -> Vec<u8> {
        let Body::File { file, offset, len } = &reply.body else {
            panic!("not a file body: {:?}", reply.body);
        };
        let mut buf = vec![0; *len as usize];
        file.read_exact_at(&mut buf, *offset).unwrap();
        buf
    }

    #[test]
    fn get_serves_the_file_with_its_headers() {
        let f = Fixture::new("static-get");
        let reply = f.get("GET", "/static/hello.txt", &[]);
        assert_eq!(reply.status, 200);
        assert_eq!(body(&reply), HELLO.as_bytes());
        assert_eq!(
            header(&reply, "Content-Type"),
            Some("text/plain; charset=utf-8")
        );
        assert_eq!(header(&reply, "Content-Length"), Some("11"));
        assert_eq!(header(&reply, "Accept-Ranges"), Some("bytes"));
        let meta = f.meta("hello.txt");
        let mtime_ns = meta.mtime() as u128 * 1_000_000_000 + meta.mtime_nsec() as u128;
        assert_eq!(
            header(&reply, "ETag"),
            Some(&*format!("\"b-{mtime_ns:x}\""))
        );
        let modified = httpdate::fmt_http_date(meta.modified().unwrap());
        assert_eq!(header(&reply, "Last-Modified"), Some(&*modified));
        // The query is not part of the file name.
        assert_eq!(f.get("GET", "/static/hello.txt?v=2", &[]).status, 200);
    }

    #[test]
    fn head_has_the_get_headers_and_a_file_body_of_full_length() {
        let f = Fixture::new("static-head");
        let reply = f.get("HEAD", "/static/hello.txt", &[]);
        assert_eq!(reply.status, 200);
        assert_eq!(header(&reply, "Content-Length"), Some("11"));
        assert!(matches!(
            reply.body,
            Body::File {
                offset: 0,
                len: 11,
                ..
            }
        ));
    }

    #[test]
    fn an_svgz_is_gzip_encoded_svg_and_a_tarball_stays_compressed() {
        let f = Fixture::new("static-svgz");
        let reply = f.get("GET", "/static/logo.svgz", &[]);
        assert_eq!(reply.status, 200);
        assert_eq!(header(&reply, "Content-Type"), Some("image/svg+xml"));
        assert_eq!(header(&reply, "Content-Encoding"), Some("gzip"));
        let head = f.get("HEAD", "/static/logo.svgz", &[]);
        assert_eq!(header(&head, "Content-Encoding"), Some("gzip"));
        let reply = f.get("GET", "/static/site.tar.gz", &[]);
        assert_eq!(reply.status, 200);
        assert_eq!(header(&reply, "Content-Encoding"), None);
    }

    #[test]
    fn other_methods_get_405_with_allow() {
        let f = Fixture::new("static-405");
        for method in ["POST", "PUT", "DELETE", "OPTIONS"] {
            let reply = f.get(method, "/static/hello.txt", &[]);
            assert_eq!(reply.status, 405, "{method}");
            assert_eq!(header(&reply, "Allow"), Some("GET, HEAD"));
        }
    }

    #[test]
    fn path_is_percent_decoded() {
        let f = Fixture::new("static-decode");
        let reply = f.get("GET", "/static/a%20b.css", &[]);
        assert_eq!(reply.status, 200);
        assert_eq!(
            header(&reply, "Content-Type"),
            Some("text/css; charset=utf-8")
        );
        assert_eq!(f.get("GET", "/static/%68ello.txt", &[]).status, 200);
    }

    #[test]
    fn escapes_are_404() {
        let f = Fixture::new("static-escape");
        for target in [
            "/static/../outside/secret.txt",
            "/static/sub/../../outside/secret.txt",
            "/static/%2e%2e/outside/secret.txt",
            "/static/%2E%2e/outside/secret.txt",
            "/static/.%2E/outside/secret.txt",
            "/static/%2e%2e%2foutside%2fsecret.txt",
            "/static/..%5coutside%5csecret.txt",
            "/static/..\\outside\\secret.txt",
            "/static/hello.txt%00.png",
            // `..` is refused even where it would stay inside.
            "/static/sub/../hello.txt",
        ] {
            let reply = f.get("GET", target, &[]);
            assert_eq!(reply.status, 404, "{target}");
            assert!(matches!(reply.body, Body::Bytes(_)), "{target}");
        }
    }

    #[test]
    fn symlinks_out_of_the_root_are_404_and_inside_are_served() {
        let f = Fixture::new("static-symlink");
        assert_eq!(f.get("GET", "/static/leak.txt", &[]).status, 404);
        assert_eq!(f.get("GET", "/static/leakdir/secret.txt", &[]).status, 404);
        // An index.html that is a symlink out of the root is refused too.
        assert_eq!(f.get("GET", "/static/bare/", &[]).status, 404);
        let reply = f.get("GET", "/static/alias.txt", &[]);
        assert_eq!(reply.status, 200);
        assert_eq!(body(&reply), HELLO.as_bytes());
    }

    #[test]
    fn directories_serve_their_index_or_404() {
        let f = Fixture::new("static-dir");
        for target in ["/static/sub", "/static/sub/", "/static/sub//"] {
            let reply = f.get("GET", target, &[]);
            assert_eq!(reply.status, 200, "{target}");
            assert_eq!(
                header(&reply, "Content-Type"),
                Some("text/html; charset=utf-8")
            );
            assert_eq!(body(&reply), b"<p>sub</p>");
        }
        // The root itself has no index.html.
        assert_eq!(f.get("GET", "/static", &[]).status, 404);
        assert_eq!(f.get("GET", "/static/", &[]).status, 404);
        assert_eq!(f.get("GET", "/static/missing.txt", &[]).status, 404);
    }

    #[test]
    fn if_none_match_gives_304() {
        let f = Fixture::new("static-inm");
        let etag = header(&f.get("GET", "/static/hello.txt", &[]), "ETag")
            .unwrap()
            .to_string();
        let weak = format!("W/{etag}");
        let listed = format!("\"nope\", W/\"x,y\" ,{etag}");
        for inm in [etag.as_str(), &weak, &listed, "*"] {
            let reply = f.get("GET", "/static/hello.txt", &[("If-None-Match", inm)]);
            assert_eq!(reply.status, 304, "{inm}");
            assert!(matches!(reply.body, Body::Empty));
            assert_eq!(header(&reply, "ETag"), Some(etag.as_str()));
            assert_eq!(header(&reply, "Content-Length"), None);
        }
        let stale = f.get(
            "GET",
            "/static/hello.txt",
            &[("If-None-Match", "\"other\"")],
        );
        assert_eq!(stale.status, 200);
    }

    #[test]
    fn if_none_match_takes_precedence_over_if_modified_since() {
        let f = Fixture::new("static-precedence");
        let future =
            httpdate::fmt_http_date(SystemTime::now() + std::time::Duration::from_secs(3600));
        let headers = [
            ("If-None-Match", "\"other\""),
            ("If-Modified-Since", future.as_str()),
        ];
        assert_eq!(f.get("GET", "/static/hello.txt", &headers).status, 200);
    }

    #[test]
    fn if_modified_since_compares_whole_seconds() {
        let f = Fixture::new("static-ims");
        let modified = f.meta("hello.txt").modified().unwrap();
        // Last-Modified itself (sub-second part dropped) counts as not modified.
        let same = httpdate::fmt_http_date(modified);
        assert_eq!(
            f.get("GET", "/static/hello.txt", &[("If-Modified-Since", &same)])
                .status,
            304
        );
        let earlier = httpdate::fmt_http_date(modified - std::time::Duration::from_secs(2));
        let reply = f.get(
            "GET",
            "/static/hello.txt",
            &[("If-Modified-Since", &earlier)],
        );
        assert_eq!(reply.status, 200);
        let junk = f.get(
            "GET",
            "/static/hello.txt",
            &[("If-Modified-Since", "yesterday")],
        );
        assert_eq!(junk.status, 200);
    }

    #[test]
    fn single_ranges_give_206() {
        let f = Fixture::new("static-range");
        for (range, want, content_range) in [
            ("bytes=0-4", "hello", "bytes 0-4/11"),
            ("bytes=6-", "world", "bytes 6-10/11"),
            ("bytes=-5", "world", "bytes 6-10/11"),
            ("bytes=3-100", "lo world", "bytes 3-10/11"),
            ("bytes=-100", HELLO, "bytes 0-10/11"),
            ("Bytes = 10-10", "d", "bytes 10-10/11"),
        ] {
            let reply = f.get("GET", "/static/hello.txt", &[("Range", range)]);
            assert_eq!(reply.status, 206, "{range}");
            assert_eq!(body(&reply), want.as_bytes(), "{range}");
            assert_eq!(
                header(&reply, "Content-Range"),
                Some(content_range),
                "{range}"
            );
            assert_eq!(
                header(&reply, "Content-Length"),
                Some(&*want.len().to_string())
            );
        }
    }

    #[test]
    fn unsatisfiable_ranges_give_416() {
        let f = Fixture::new("static-416");
        for range in ["bytes=11-", "bytes=20-30", "bytes=-0"] {
            let reply = f.get("GET", "/static/hello.txt", &[("Range", range)]);
            assert_eq!(reply.status, 416, "{range}");
            assert_eq!(header(&reply, "Content-Range"), Some("bytes */11"));
            assert_eq!(header(&reply, "Content-Length"), Some("0"));
            assert!(matches!(reply.body, Body::Empty));
        }
        let empty = f.get("GET", "/static/empty.bin", &[("Range", "bytes=-5")]);
        assert_eq!(empty.status, 416);
        assert_eq!(header(&empty, "Content-Range"), Some("bytes */0"));
    }

    #[test]
    fn unusable_ranges_serve_the_whole_file() {
        let f = Fixture::new("static-whole");
        for range in [
            "bytes=0-1,3-4",
            "bytes=5-2",
            "items=0-1",
            "bytes=a-b",
            "bytes=+1-2",
            "bytes=5",
        ] {
            let reply = f.get("GET", "/static/hello.txt", &[("Range", range)]);
            assert_eq!(reply.status, 200, "{range}");
            assert_eq!(body(&reply), HELLO.as_bytes());
            assert_eq!(header(&reply, "Content-Range"), None);
        }
        // Range is defined for GET only.
        let head = f.get("HEAD", "/static/hello.txt", &[("Range", "bytes=0-4")]);
        assert_eq!(head.status, 200);
        assert_eq!(header(&head, "Content-Length"), Some("11"));
    }

    #[test]
    fn if_range_gates_the_range() {
        let f = Fixture::new("static-if-range");
        let full = f.get("GET", "/static/hello.txt", &[]);
        let etag = header(&full, "ETag").unwrap().to_string();
        let date = header(&full, "Last-Modified").unwrap().to_string();
        let weak = format!("W/{etag}");
        for (if_range, status) in [
            (etag.as_str(), 206),
            (date.as_str(), 206),
            ("\"old\"", 200),
            (weak.as_str(), 200),
        ] {
            let headers = [("Range", "bytes=0-4"), ("If-Range", if_range)];
            assert_eq!(
                f.get("GET", "/static/hello.txt", &headers).status,
                status,
                "{if_range}"
            );
        }
    }

    #[test]
    fn entity_tag_lists_parse() {
        let tags: Vec<_> = entity_tags(b" \"a\", W/\"b,c\",,\"\" ").collect();
        assert_eq!(
            tags,
            [(false, &b"\"a\""[..]), (true, b"\"b,c\""), (false, b"\"\"")]
        );
        assert_eq!(entity_tags(b"\"unterminated").count(), 0);
    }
}
