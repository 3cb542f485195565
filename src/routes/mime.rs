//! Content-Type by file extension, from `mime_guess`'s table (the one
//! Granian serves from; a search of a sorted table, cheap enough for the
//! core thread), with `charset=utf-8` added to text so browsers do not
//! guess an encoding.

use std::borrow::Cow;
use std::path::Path;

/// What a file with no known extension is served as: opaque bytes, which
/// browsers download rather than render.
pub const DEFAULT: &str = "application/octet-stream";

/// The Content-Type to serve `path` with, from its extension (case-insensitive).
pub fn content_type(path: &Path) -> Cow<'static, str> {
    let Some(ty) = path
        .extension()
        .and_then(|e| e.to_str())
        .and_then(|ext| mime_guess::from_ext(ext).first_raw())
    else {
        return Cow::Borrowed(DEFAULT);
    };
    // Not XML: on text/xml a charset overrides the document's own
    // encoding declaration (RFC 7303 §3.2), which is the one to trust.
    let text = ty.starts_with("text/") || ty == "application/javascript";
    if text && !ty.ends_with("xml") {
        Cow::Owned(format!("{ty}; charset=utf-8"))
    } else {
        Cow::Borrowed(ty)
    }
}

/// The Content-Encoding a file's extension names: `gzip` for `.svgz`, else
/// none. An `.svgz` is SVG compressed with gzip (SVG 1.1 §1.2), served as
/// `image/svg+xml` that user agents decode and render, as SVG viewers must
/// (SVG 1.1 Appendix G); without the field a browser reads gzip bytes as
/// XML and shows nothing. Other compressed files (`.gz`, `.tgz`) are
/// archives, served as what they are, for the client to keep compressed.
pub fn content_encoding(path: &Path) -> Option<&'static str> {
    let ext = path.extension()?.to_str()?;
    ext.eq_ignore_ascii_case("svgz").then_some("gzip")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_svgz_names_a_content_encoding() {
        let enc = |name: &str| content_encoding(Path::new(name));
        assert_eq!(ty("logo.svgz"), "image/svg+xml");
        assert_eq!(enc("logo.svgz"), Some("gzip"));
        assert_eq!(enc("a/LOGO.SVGZ"), Some("gzip"));
        for plain in [
            "logo.svg",
            "site.tar.gz",
            "a.tgz",
            "svgz",
            "a.svgz.txt",
            "noext",
        ] {
            assert_eq!(enc(plain), None, "{plain}");
        }
    }

    fn ty(name: &str) -> String {
        content_type(Path::new(name)).into_owned()
    }

    #[test]
    fn common_web_types() {
        assert_eq!(ty("index.html"), "text/html; charset=utf-8");
        assert_eq!(ty("a/b/site.css"), "text/css; charset=utf-8");
        assert_eq!(ty("app.js"), "text/javascript; charset=utf-8");
        assert_eq!(ty("mod.mjs"), "application/javascript; charset=utf-8");
        assert_eq!(ty("data.json"), "application/json");
        assert_eq!(ty("app.js.map"), "text/plain; charset=utf-8");
        assert_eq!(ty("notes.txt"), "text/plain; charset=utf-8");
        assert_eq!(ty("logo.svg"), "image/svg+xml");
        assert_eq!(ty("p.png"), "image/png");
        assert_eq!(ty("p.jpg"), "image/jpeg");
        assert_eq!(ty("p.jpeg"), "image/jpeg");
        assert_eq!(ty("p.gif"), "image/gif");
        assert_eq!(ty("p.webp"), "image/webp");
        assert_eq!(ty("favicon.ico"), "image/x-icon");
        assert_eq!(ty("f.woff"), "application/font-woff");
        assert_eq!(ty("f.woff2"), "font/woff2");
        assert_eq!(ty("m.wasm"), "application/wasm");
        assert_eq!(ty("d.pdf"), "application/pdf");
        assert_eq!(
            ty("feed.xml"),
            "text/xml",
            "its own declaration names its encoding"
        );
        assert_eq!(ty("cert.pem"), "application/x-x509-ca-cert");
        assert_eq!(ty("v.mp4"), "video/mp4");
    }

    #[test]
    fn extension_case_is_ignored() {
        assert_eq!(ty("INDEX.HTML"), "text/html; charset=utf-8");
        assert_eq!(ty("Photo.JpG"), "image/jpeg");
    }

    #[test]
    fn unknown_or_missing_extension_is_octet_stream() {
        assert_eq!(ty("archive.m0serve-unknown"), DEFAULT);
        assert_eq!(ty("Makefile"), DEFAULT);
        assert_eq!(ty(".bashrc"), DEFAULT);
        // Only the last extension counts.
        assert_eq!(ty("page.html.bak"), DEFAULT);
    }
}
