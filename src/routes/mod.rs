//! Rust-native routes, answered on the core thread with no Python: a health
//! path, a ready path and static files.
//!
//! A liveness probe must answer even while every Python thread is busy, and
//! static files are cheaper to send from the core thread (zero-copy, see
//! [`Body::File`](crate::reply::Body::File)) than through an application.
//!
//! [`Router::route`] answers `None` for a request that is not its own; the
//! caller hands it on (to the application, or a 404). A static mount owns
//! every path under its route: a missing file there is this router's 404.

mod health;
pub mod mime;
mod ready;
mod static_files;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use crate::http::RequestHead;
use crate::reply::Reply;

pub use ready::Readiness;
use static_files::{Mount, Serving};

/// How long static files may be cached by default: a day (Granian's).
pub const DEFAULT_STATIC_MAX_AGE: u64 = 86400;

/// The Rust-native routes of one server, built once and shared by the core threads.
#[derive(Debug, Default)]
pub struct Router {
    /// Answered with 200 "OK" on GET and HEAD.
    health: Option<String>,
    /// Answered with 200 or 503 ([`ready`]), and what it answers from.
    ready: Option<(String, Arc<Readiness>)>,
    /// Longest route first, so `/static/img` wins over `/static`.
    mounts: Vec<Mount>,
    /// How the mounts serve their files.
    serving: Serving,
}

/// A router configuration that cannot be served (a bad route, a missing directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

impl Router {
    /// A router with an optional health path and static mounts, each a
    /// (route prefix, directory) pair. Every directory must exist; it is
    /// canonicalized now, so later symlink checks compare real paths.
    pub fn new(
        health_path: Option<String>,
        mounts: Vec<(String, PathBuf)>,
    ) -> Result<Router, ConfigError> {
        if let Some(path) = &health_path {
            check_route("health path", path)?;
        }
        let mut built: Vec<Mount> = Vec::with_capacity(mounts.len());
        for (route, dir) in mounts {
            check_route("static route", &route)?;
            let mount = Mount::new(&route, &dir)?;
            if built.iter().any(|m| m.route() == mount.route()) {
                return Err(ConfigError(format!(
                    "static route '{route}' is mounted twice"
                )));
            }
            built.push(mount);
        }
        built.sort_by_key(|m| std::cmp::Reverse(m.route().len()));
        Ok(Router {
            health: health_path,
            ready: None,
            mounts: built,
            serving: Serving::default(),
        })
    }

    /// This router with a ready path (None: none), which must not be the health path.
    pub fn with_ready_path(mut self, ready_path: Option<String>) -> Result<Router, ConfigError> {
        if let Some(path) = &ready_path {
            check_route("ready path", path)?;
            if self.health.as_ref() == Some(path) {
                return Err(ConfigError(format!(
                    "ready path '{path}' is the health path too; they answer different questions"
                )));
            }
        }
        self.ready = ready_path.map(|path| (path, Arc::default()));
        Ok(self)
    }

    /// This router with static files (their 206s and 304s too) sent with
    /// `Cache-Control: max-age=<secs>` (the command line's default:
    /// [`DEFAULT_STATIC_MAX_AGE`], Granian's); 0: without one (caches then judge
    /// freshness themselves, from Last-Modified: RFC 9111 §4.2.2).
    pub fn with_static_max_age(mut self, secs: u64) -> Router {
        // RFC 9111 §1.2.2: a delta-seconds past 2^31 is sent as 2^31.
        self.serving.cache_control = (secs > 0).then(|| format!("max-age={}", secs.min(1 << 31)));
        self
    }

    /// This router with a static directory standing for its file `name`
    /// (`index.html` unless given), which must be one plain file name.
    pub fn with_static_index(mut self, name: &str) -> Result<Router, ConfigError> {
        if matches!(name, "" | "." | "..") || name.contains(['/', '\\', '\0']) {
            return Err(ConfigError(format!(
                "static directory file '{name}' must be one file name, without '/'"
            )));
        }
        self.serving.index = name.into();
        Ok(self)
    }

    /// What the ready path answers from, when there is one.
    pub fn readiness(&self) -> Option<Arc<Readiness>> {
        self.ready.as_ref().map(|(_, r)| r.clone())
    }

    /// The answer to `head` if one of these routes owns its path, else `None`.
    pub fn route(&self, head: &RequestHead) -> Option<Reply> {
        let path = head.path();
        if self.health.as_deref() == Some(path) {
            return Some(health::answer(head));
        }
        if let Some((_, readiness)) = self.ready.as_ref().filter(|(p, _)| p == path) {
            return Some(ready::answer(head, readiness));
        }
        self.mounts.iter().find_map(|mount| {
            let rest = mount.strip(path)?;
            Some(mount.serve(head, rest, &self.serving))
        })
    }
}

/// Routes are compared with the request path as sent, so they must look like one.
fn check_route(what: &str, route: &str) -> Result<(), ConfigError> {
    if !route.starts_with('/') {
        return Err(ConfigError(format!("{what} '{route}' must start with '/'")));
    }
    if route
        .bytes()
        .any(|b| b == b'?' || b == b'#' || b.is_ascii_whitespace() || b.is_ascii_control())
    {
        return Err(ConfigError(format!(
            "{what} '{route}' must not contain '?', '#', spaces or control characters"
        )));
    }
    Ok(())
}

/// These routes only read: GET and HEAD.
fn is_get_or_head(head: &RequestHead) -> bool {
    head.method == "GET" || head.method == "HEAD"
}

/// 405 for a method other than GET or HEAD on a path these routes own.
fn method_not_allowed() -> Reply {
    let mut reply = Reply::text(405, "Method Not Allowed");
    reply.headers.push(("Allow".into(), "GET, HEAD".into()));
    reply
}

fn not_found() -> Reply {
    Reply::text(404, "Not Found")
}

/// Helpers shared by the route tests: request heads, header look-up, temp dirs.
#[cfg(test)]
pub(crate) mod testing {
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicUsize, Ordering};

    use crate::http::{BodyKind, RequestHead, Version};
    use crate::reply::Reply;

    pub fn request(method: &str, target: &str, headers: &[(&str, &str)]) -> RequestHead {
        RequestHead {
            method: method.into(),
            target: target.into(),
            version: Version::Http11,
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
                .collect(),
            body: BodyKind::Empty,
            keep_alive: true,
            expect_continue: false,
        }
    }

    /// The value of the only header `name` in `reply` (panics on duplicates).
    pub fn header<'a>(reply: &'a Reply, name: &str) -> Option<&'a str> {
        let mut found = reply
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name));
        let first = found.next().map(|(_, v)| v.as_str());
        assert!(found.next().is_none(), "header {name} appears twice");
        first
    }

    /// A fresh directory under the system temp dir, removed on drop.
    pub struct TempDir(PathBuf);

    impl TempDir {
        pub fn new(tag: &str) -> TempDir {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let dir =
                std::env::temp_dir().join(format!("m0serve-{tag}-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }

        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{header, request, TempDir};
    use super::*;

    fn router_with(dir: &TempDir) -> Router {
        let root = dir.path();
        std::fs::create_dir_all(root.join("img")).unwrap();
        std::fs::write(root.join("a.txt"), "top").unwrap();
        std::fs::write(root.join("img/a.txt"), "img").unwrap();
        Router::new(
            Some("/healthz".into()),
            vec![
                ("/static".into(), root.into()),
                ("/static/img".into(), root.join("img")),
            ],
        )
        .unwrap()
    }

    #[test]
    fn health_answers_ok_on_get_and_head() {
        let router = Router::new(Some("/healthz".into()), vec![]).unwrap();
        for method in ["GET", "HEAD"] {
            let reply = router.route(&request(method, "/healthz", &[])).unwrap();
            assert_eq!(reply.status, 200);
            assert!(matches!(&reply.body, crate::reply::Body::Bytes(b) if b == b"OK"));
        }
        // The query is not part of the path.
        assert_eq!(
            router
                .route(&request("GET", "/healthz?probe=1", &[]))
                .unwrap()
                .status,
            200
        );
    }

    #[test]
    fn health_refuses_other_methods_with_allow() {
        let router = Router::new(Some("/healthz".into()), vec![]).unwrap();
        let reply = router.route(&request("POST", "/healthz", &[])).unwrap();
        assert_eq!(reply.status, 405);
        assert_eq!(header(&reply, "Allow"), Some("GET, HEAD"));
    }

    #[test]
    fn ready_answers_for_itself_until_its_drain_then_for_the_shared_flag() {
        let router = Router::new(Some("/healthz".into()), vec![])
            .unwrap()
            .with_ready_path(Some("/readyz".into()))
            .unwrap();
        let status = |method| {
            router
                .route(&request(method, "/readyz", &[]))
                .unwrap()
                .status
        };
        let readiness = router.readiness().unwrap();
        assert_eq!((status("GET"), status("HEAD")), (200, 200));
        readiness.drain();
        assert_eq!((status("GET"), status("HEAD")), (503, 503));
        let reply = router.route(&request("GET", "/readyz", &[])).unwrap();
        assert_eq!(header(&reply, "Cache-Control"), Some("no-store"));
        assert_eq!(status("POST"), 405);
        // The health path is not the ready path: a draining server is alive.
        let health = router.route(&request("GET", "/healthz", &[])).unwrap();
        assert_eq!(health.status, 200);
        #[cfg(target_os = "linux")]
        {
            use crate::ipc::ready_flag::{self, ReadyFlag};
            let fd = ready_flag::create().unwrap();
            let supervisor = ReadyFlag::map(&fd).unwrap();
            readiness.share(ReadyFlag::map(&fd).unwrap());
            assert_eq!(status("GET"), 503, "the shared flag starts cleared");
            supervisor.set(true);
            assert_eq!(
                status("GET"),
                200,
                "the supervisor's word wins over the drain"
            );
            supervisor.set(false);
            assert_eq!(status("GET"), 503);
        }
    }

    #[test]
    fn other_paths_are_not_ours() {
        let dir = TempDir::new("router-none");
        let router = router_with(&dir);
        assert!(router.route(&request("GET", "/", &[])).is_none());
        assert!(router.route(&request("GET", "/healthz/x", &[])).is_none());
        // A route prefix matches whole segments only.
        assert!(router
            .route(&request("GET", "/staticfoo/a.txt", &[]))
            .is_none());
        assert!(Router::default()
            .route(&request("GET", "/healthz", &[]))
            .is_none());
    }

    #[test]
    fn static_files_and_their_304s_carry_the_max_age() {
        let dir = TempDir::new("router-max-age");
        let router = router_with(&dir).with_static_max_age(86400);
        let get = |headers: &[(&str, &str)]| {
            router
                .route(&request("GET", "/static/a.txt", headers))
                .unwrap()
        };
        let full = get(&[]);
        assert_eq!(full.status, 200);
        assert_eq!(header(&full, "Cache-Control"), Some("max-age=86400"));
        let etag = header(&full, "ETag").unwrap().to_string();
        let not_modified = get(&[("If-None-Match", &etag)]);
        assert_eq!(not_modified.status, 304);
        assert_eq!(
            header(&not_modified, "Cache-Control"),
            Some("max-age=86400")
        );
        let part = get(&[("Range", "bytes=0-0")]);
        assert_eq!(part.status, 206);
        assert_eq!(header(&part, "Cache-Control"), Some("max-age=86400"));
        // A refused range is not the file.
        let refused = get(&[("Range", "bytes=99-")]);
        assert_eq!(refused.status, 416);
        assert_eq!(header(&refused, "Cache-Control"), None);
        // A miss is not a file: nothing to keep.
        let miss = router.route(&request("GET", "/static/nope", &[])).unwrap();
        assert_eq!(miss.status, 404);
        assert_eq!(header(&miss, "Cache-Control"), None);
        // The health answer is not a static file: it keeps its own.
        let health = router.route(&request("GET", "/healthz", &[])).unwrap();
        assert_eq!(header(&health, "Cache-Control"), Some("no-store"));

        // 0 (and a router built without it): no Cache-Control at all.
        for router in [router_with(&dir).with_static_max_age(0), router_with(&dir)] {
            let reply = router.route(&request("GET", "/static/a.txt", &[])).unwrap();
            assert_eq!(reply.status, 200);
            assert_eq!(header(&reply, "Cache-Control"), None);
        }
        // RFC 9111 §1.2.2: past 2^31 it is sent as 2^31.
        let router = router_with(&dir).with_static_max_age(u64::MAX);
        let reply = router.route(&request("GET", "/static/a.txt", &[])).unwrap();
        assert_eq!(header(&reply, "Cache-Control"), Some("max-age=2147483648"));
    }

    #[test]
    fn longest_mount_wins() {
        let dir = TempDir::new("router-longest");
        let router = router_with(&dir);
        let reply = router
            .route(&request("GET", "/static/img/a.txt", &[]))
            .unwrap();
        assert_eq!(header(&reply, "Content-Length"), Some("3"));
        let crate::reply::Body::File { file, .. } = reply.body else {
            panic!("not a file body")
        };
        let mut text = String::new();
        std::io::Read::read_to_string(&mut &file, &mut text).unwrap();
        assert_eq!(text, "img");
        // The shorter mount still owns its other paths, including misses.
        assert_eq!(
            router
                .route(&request("GET", "/static/a.txt", &[]))
                .unwrap()
                .status,
            200
        );
        assert_eq!(
            router
                .route(&request("GET", "/static/nope", &[]))
                .unwrap()
                .status,
            404
        );
    }

    #[test]
    fn root_mount_owns_every_path() {
        let dir = TempDir::new("router-root");
        std::fs::write(dir.path().join("a.txt"), "x").unwrap();
        let router = Router::new(None, vec![("/".into(), dir.path().into())]).unwrap();
        assert_eq!(
            router.route(&request("GET", "/a.txt", &[])).unwrap().status,
            200
        );
        assert_eq!(
            router.route(&request("GET", "/b.txt", &[])).unwrap().status,
            404
        );
    }

    #[test]
    fn bad_configurations_are_refused_with_a_message() {
        let dir = TempDir::new("router-config");
        let file = dir.path().join("file.txt");
        std::fs::write(&file, "x").unwrap();
        let missing = dir.path().join("missing");

        let err = Router::new(None, vec![("/s".into(), missing.clone())]).unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
        assert!(
            err.to_string().contains(&*missing.to_string_lossy()),
            "{err}"
        );

        let err = Router::new(None, vec![("/s".into(), file)]).unwrap_err();
        assert!(err.to_string().contains("not a directory"), "{err}");

        let err = Router::new(None, vec![("s".into(), dir.path().into())]).unwrap_err();
        assert!(err.to_string().contains("must start with '/'"), "{err}");

        let err = Router::new(Some("healthz".into()), vec![]).unwrap_err();
        assert!(err.to_string().contains("health path"), "{err}");

        let err = Router::new(Some("/h?x".into()), vec![]).unwrap_err();
        assert!(err.to_string().contains("must not contain"), "{err}");

        let with_ready = |health: &str, ready: &str| {
            Router::new(Some(health.into()), vec![])
                .unwrap()
                .with_ready_path(Some(ready.into()))
                .unwrap_err()
        };
        let err = with_ready("/h", "readyz");
        assert!(err.to_string().contains("ready path"), "{err}");
        let err = with_ready("/h", "/h");
        assert!(err.to_string().contains("health path too"), "{err}");

        let twice = vec![
            ("/s".into(), dir.path().into()),
            ("/s/".into(), dir.path().into()),
        ];
        let err = Router::new(None, twice).unwrap_err();
        assert!(err.to_string().contains("mounted twice"), "{err}");
    }
}
