use std::net::SocketAddr;

use super::*;
use crate::http::BodyKind;

const GUNICORN: &str = r#"%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s""#;

fn head(headers: &[(&str, &[u8])]) -> RequestHead {
    RequestHead {
        method: "GET".into(),
        target: "/a/b?x=1&y=2".into(),
        version: Version::Http11,
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_vec()))
            .collect(),
        body: BodyKind::Empty,
        keep_alive: true,
        expect_continue: false,
    }
}

fn line(spec: &str, head: &RequestHead, bytes: u64, response: &Fields) -> String {
    let peer = Peer::Tcp("10.1.2.3:5555".parse::<SocketAddr>().unwrap());
    let record = Record {
        peer: &peer,
        head,
        status: 404,
        bytes,
        response_headers: response,
        duration: Duration::from_micros(2_003_456),
        started_us: 971_186_136_000_123,
        pid: 42,
    };
    let mut out = String::new();
    Format::parse(spec).unwrap().render(&record, &mut out);
    out
}

#[test]
fn gunicorns_default_format() {
    let h = head(&[
        ("Referer", b"http://r.example/"),
        ("User-Agent", b"curl/8.0"),
    ]);
    assert_eq!(
        line(GUNICORN, &h, 9, &Fields::default()),
        r#"10.1.2.3 - - [10/Oct/2000:13:55:36 +0000] "GET /a/b?x=1&y=2 HTTP/1.1" 404 9 "http://r.example/" "curl/8.0""#
    );
    // No body: `b` is `-` (and `B` is 0); absent headers are `-`.
    assert_eq!(
        line(GUNICORN, &head(&[]), 0, &Fields::default()),
        r#"10.1.2.3 - - [10/Oct/2000:13:55:36 +0000] "GET /a/b?x=1&y=2 HTTP/1.1" 404 - "-" "-""#
    );
}

#[test]
fn the_default_is_m0serves_line_of_before() {
    assert_eq!(
        line(DEFAULT, &head(&[]), 0, &Fields::default()),
        r#"10.1.2.3 - - [10/Oct/2000:13:55:36 +0000] "GET /a/b?x=1&y=2 HTTP/1.1" 404 0"#
    );
}

#[test]
fn every_atom() {
    let h = head(&[("X-Trace", b"t1"), ("x-trace", b"t2")]);
    let response: Fields = vec![("X-Cache", "hit")].into();
    assert_eq!(
        line("%(m)s|%(U)s|%(q)s|%(H)s|%(s)s|%(B)s", &h, 7, &response),
        "GET|/a/b|x=1&y=2|HTTP/1.1|404|7"
    );
    assert_eq!(
        line("%(T)s %(D)s %(M)s %(L)s %(p)s", &h, 7, &response),
        "2 2003456 2003 2.003456 <42>"
    );
    assert_eq!(
        line(
            "%({x-trace}i)s %({X-Cache}o)s %({missing}i)s 100%%",
            &h,
            7,
            &response
        ),
        "t1, t2 hit - 100%"
    );
}

#[test]
fn client_values_cannot_forge_fields_or_lines() {
    // A user agent that closes the quoted field and starts a new line with a
    // forged entry: escaped, the line stays one line and the field one field.
    let evil =
        b"x\" 200 1 \"-\"\n10.0.0.1 - - [01/Jan/2000:00:00:00 +0000] \"GET /admin\\ \x1b[31m\xff";
    let out = line(
        r#""%(a)s""#,
        &head(&[("User-Agent", evil)]),
        0,
        &Fields::default(),
    );
    assert_eq!(
        out,
        r#""x\" 200 1 \"-\"\x0a10.0.0.1 - - [01/Jan/2000:00:00:00 +0000] \"GET /admin\\ \x1b[31m\xff""#
    );
    assert!(!out.contains('\n') && !out.contains('\r'));
    // Only the two delimiting quotes are unescaped.
    let bare = out
        .match_indices('"')
        .filter(|(i, _)| !out[..*i].ends_with('\\') || out[..*i].ends_with("\\\\"))
        .count();
    assert_eq!(bare, 2, "{out}");
    // JSON: the same value stays inside its string.
    let json = line(
        "json",
        &head(&[("User-Agent", evil)]),
        0,
        &Fields::default(),
    );
    assert!(!json.contains('\n'));
    assert!(
        json.contains(r#""user_agent":"x\" 200 1 \"-\"\n10.0.0.1"#),
        "{json}"
    );
    assert!(json.contains("\\u001b[31m\u{fffd}"), "{json}");
}

#[test]
fn json_lines() {
    let h = head(&[("Referer", b"http://r/"), ("User-Agent", b"ua")]);
    assert_eq!(
        line("json", &h, 12, &Fields::default()),
        concat!(
            r#"{"time":"2000-10-10T13:55:36.000123Z","remote_addr":"10.1.2.3","remote_port":5555,"#,
            r#""method":"GET","path":"/a/b","query":"x=1&y=2","protocol":"HTTP/1.1","status":404,"#,
            r#""bytes":12,"referer":"http://r/","user_agent":"ua","duration_us":2003456,"pid":42}"#
        )
    );
    assert!(line("json", &head(&[]), 0, &Fields::default())
        .contains(r#""referer":null,"user_agent":null"#));
}

#[test]
fn a_unix_peer() {
    let record = Record {
        peer: &Peer::Unix,
        head: &head(&[]),
        status: 200,
        bytes: 0,
        response_headers: &Fields::default(),
        duration: Duration::ZERO,
        started_us: 0,
        pid: 1,
    };
    let mut text = String::new();
    Format::parse("%(h)s").unwrap().render(&record, &mut text);
    assert_eq!(text, "unix");
    let mut json = String::new();
    Format::Json.render(&record, &mut json);
    assert!(
        json.contains(r#""remote_addr":null,"remote_port":null"#),
        "{json}"
    );
}

#[test]
fn bad_formats_name_the_problem() {
    let err = |spec: &str| Format::parse(spec).unwrap_err();
    assert!(
        err("%(z)s").contains("unknown atom %(z)s"),
        "{}",
        err("%(z)s")
    );
    assert!(err("%(hh)s").contains("unknown atom %(hh)s"));
    assert!(err("100% sure").contains("'%'"));
    assert!(err("%(h)d").contains("not closed by )s"));
    assert!(err("%({HOME}e)s").contains("environment atoms"));
    assert!(err("%({a b}i)s").contains("not a header name"));
    assert!(err("%({x}z)s").contains("%({NAME}i)s"));
    assert!(err("%({}i)s").contains("not a header name"));
}

#[test]
fn parsing_compiles_pieces() {
    assert_eq!(Format::parse("json").unwrap(), Format::Json);
    assert_eq!(
        Format::parse("a %(s)s%%").unwrap(),
        Format::Atoms(vec![
            Piece::Text("a ".into()),
            Piece::Atom(Atom::Status),
            Piece::Text("%".into()),
        ])
    );
    assert_eq!(
        Format::parse("%({X-Id}i)s").unwrap(),
        Format::Atoms(vec![Piece::Atom(Atom::RequestHeader("x-id".into()))])
    );
}
