//! Content-Type by file extension: a fixed table of the common web types.
//!
//! A table rather than a sniffing library: static files are answered on the
//! core thread, so the lookup must be cheap and predictable.

use std::path::Path;

/// What a file with no known extension is served as: opaque bytes, which
/// browsers download rather than render.
pub const DEFAULT: &str = "application/octet-stream";

/// Extensions (lowercase) and their types. Text types carry `charset=utf-8`
/// so browsers do not guess an encoding.
const TABLE: &[(&str, &str)] = &[
    ("html", "text/html; charset=utf-8"),
    ("htm", "text/html; charset=utf-8"),
    ("css", "text/css; charset=utf-8"),
    ("js", "text/javascript; charset=utf-8"),
    ("mjs", "text/javascript; charset=utf-8"),
    ("json", "application/json"),
    ("map", "application/json"),
    ("webmanifest", "application/manifest+json"),
    ("txt", "text/plain; charset=utf-8"),
    ("md", "text/markdown; charset=utf-8"),
    ("csv", "text/csv; charset=utf-8"),
    ("xml", "application/xml"),
    ("svg", "image/svg+xml"),
    ("png", "image/png"),
    ("jpg", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("gif", "image/gif"),
    ("webp", "image/webp"),
    ("avif", "image/avif"),
    ("ico", "image/x-icon"),
    ("bmp", "image/bmp"),
    ("woff", "font/woff"),
    ("woff2", "font/woff2"),
    ("ttf", "font/ttf"),
    ("otf", "font/otf"),
    ("wasm", "application/wasm"),
    ("pdf", "application/pdf"),
    ("zip", "application/zip"),
    ("gz", "application/gzip"),
    ("mp4", "video/mp4"),
    ("webm", "video/webm"),
    ("mp3", "audio/mpeg"),
    ("ogg", "audio/ogg"),
    ("wav", "audio/wav"),
];

/// The Content-Type to serve `path` with, from its extension (case-insensitive).
pub fn content_type(path: &Path) -> &'static str {
    let Some(ext) = path.extension().and_then(|e| e.to_str()) else {
        return DEFAULT;
    };
    TABLE
        .iter()
        .find(|(known, _)| known.eq_ignore_ascii_case(ext))
        .map_or(DEFAULT, |(_, ty)| ty)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(name: &str) -> &'static str {
        content_type(Path::new(name))
    }

    #[test]
    fn common_web_types() {
        assert_eq!(ty("index.html"), "text/html; charset=utf-8");
        assert_eq!(ty("a/b/site.css"), "text/css; charset=utf-8");
        assert_eq!(ty("app.js"), "text/javascript; charset=utf-8");
        assert_eq!(ty("mod.mjs"), "text/javascript; charset=utf-8");
        assert_eq!(ty("data.json"), "application/json");
        assert_eq!(ty("app.js.map"), "application/json");
        assert_eq!(ty("notes.txt"), "text/plain; charset=utf-8");
        assert_eq!(ty("logo.svg"), "image/svg+xml");
        assert_eq!(ty("p.png"), "image/png");
        assert_eq!(ty("p.jpg"), "image/jpeg");
        assert_eq!(ty("p.jpeg"), "image/jpeg");
        assert_eq!(ty("p.gif"), "image/gif");
        assert_eq!(ty("p.webp"), "image/webp");
        assert_eq!(ty("favicon.ico"), "image/x-icon");
        assert_eq!(ty("f.woff"), "font/woff");
        assert_eq!(ty("f.woff2"), "font/woff2");
        assert_eq!(ty("m.wasm"), "application/wasm");
        assert_eq!(ty("d.pdf"), "application/pdf");
        assert_eq!(ty("feed.xml"), "application/xml");
        assert_eq!(ty("v.mp4"), "video/mp4");
    }

    #[test]
    fn extension_case_is_ignored() {
        assert_eq!(ty("INDEX.HTML"), "text/html; charset=utf-8");
        assert_eq!(ty("Photo.JpG"), "image/jpeg");
    }

    #[test]
    fn unknown_or_missing_extension_is_octet_stream() {
        assert_eq!(ty("archive.xyz"), DEFAULT);
        assert_eq!(ty("Makefile"), DEFAULT);
        assert_eq!(ty(".bashrc"), DEFAULT);
        // Only the last extension counts.
        assert_eq!(ty("page.html.bak"), DEFAULT);
    }
}
