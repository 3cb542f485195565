use super::*;

fn h(lines: &[(&str, &str)]) -> Fields {
    lines.iter().copied().collect()
}

fn local() -> Trusted {
    Trusted::default()
}

fn proxies() -> Trusted {
    Trusted::parse("127.0.0.1,10.0.0.0/8,2001:db8::/32").unwrap()
}

fn client(f: &Forwarded) -> Option<String> {
    f.client.map(|a| a.to_string())
}

#[test]
fn x_forwarded_for_takes_the_right_most_untrusted_hop() {
    let f = resolve(
        &h(&[("X-Forwarded-For", "6.6.6.6, 1.2.3.4, 10.0.0.2")]),
        &proxies(),
    );
    assert_eq!(
        client(&f).as_deref(),
        Some("1.2.3.4:0"),
        "the spoofed 6.6.6.6 is left of an untrusted hop"
    );
    // Repeated lines are one list, in order.
    let f = resolve(
        &h(&[
            ("x-forwarded-for", "6.6.6.6"),
            ("X-Forwarded-For", "1.2.3.4,10.1.1.1"),
        ]),
        &proxies(),
    );
    assert_eq!(client(&f).as_deref(), Some("1.2.3.4:0"));
    // Every hop trusted: the left-most.
    let f = resolve(&h(&[("X-Forwarded-For", "10.0.0.9, 10.0.0.2")]), &proxies());
    assert_eq!(client(&f).as_deref(), Some("10.0.0.9:0"));
    // `*`: the left-most, as uvicorn.
    let f = resolve(
        &h(&[("X-Forwarded-For", "1.1.1.1, 2.2.2.2")]),
        &Trusted::parse("*").unwrap(),
    );
    assert_eq!(client(&f).as_deref(), Some("1.1.1.1:0"));
    let f = resolve(&h(&[("X-Forwarded-For", "2001:db8::1, ::1")]), &local());
    assert_eq!(client(&f).as_deref(), Some("[::1]:0"));
}

#[test]
fn x_forwarded_for_without_an_address_keeps_the_peer() {
    for value in [
        "",
        " , ",
        "1.2.3.4, garbage",
        "1.2.3.4, 5.6.7.8:80",
        "unknown",
        "1.2.3.4, [::1]",
    ] {
        let f = resolve(&h(&[("X-Forwarded-For", value)]), &proxies());
        assert_eq!(f.client, None, "{value:?}");
    }
}

#[test]
fn x_forwarded_proto_host_and_port() {
    let f = resolve(
        &h(&[
            ("X-Forwarded-Proto", " HTTPS "),
            ("X-Forwarded-Host", "example.com:8443"),
        ]),
        &local(),
    );
    assert_eq!(f.secure, Some(true));
    assert_eq!(f.host.as_deref(), Some("example.com"));
    assert_eq!(f.port, Some(8443));
    let f = resolve(
        &h(&[
            ("X-Forwarded-Host", "[2001:db8::1]:80"),
            ("X-Forwarded-Port", "443"),
        ]),
        &local(),
    );
    assert_eq!(
        (f.host.as_deref(), f.port),
        (Some("[2001:db8::1]"), Some(443))
    );
    assert_eq!(
        resolve(&h(&[("X-Forwarded-Proto", "wss")]), &local()).secure,
        Some(true)
    );
    assert_eq!(
        resolve(&h(&[("X-Forwarded-Proto", "ws")]), &local()).secure,
        Some(false)
    );
    for bad in ["ftp", "https, http", "", "h ttps"] {
        assert_eq!(
            resolve(&h(&[("X-Forwarded-Proto", bad)]), &local()).secure,
            None,
            "{bad:?}"
        );
    }
    let twice = h(&[
        ("X-Forwarded-Proto", "https"),
        ("X-Forwarded-Proto", "https"),
    ]);
    assert_eq!(
        resolve(&twice, &local()).secure,
        None,
        "a repeated line is ambiguous"
    );
    for bad in [
        "",
        "a b",
        "a,b",
        "a:99999",
        "a:",
        "[::1",
        "[nothost]",
        "a/b",
        "a:1:2",
        ":80",
    ] {
        assert_eq!(
            resolve(&h(&[("X-Forwarded-Host", bad)]), &local()).host,
            None,
            "{bad:?}"
        );
    }
    for bad in ["", "65536", "-1", "8 0", "123456"] {
        assert_eq!(
            resolve(&h(&[("X-Forwarded-Port", bad)]), &local()).port,
            None,
            "{bad:?}"
        );
    }
}

#[test]
fn forwarded_elements_per_rfc_7239() {
    let f = resolve(
        &h(&[(
            "Forwarded",
            r#"for=6.6.6.6;proto=http, For="[2001:DB8:cafe::17]:4711";PROTO=https;host="example.com:444";by=_proxy, for=10.0.0.1;proto=http"#,
        )]),
        &proxies(),
    );
    // The hop at 10.0.0.1 is trusted, so its element is not the client's;
    // [2001:db8:cafe::17] is trusted too (in 2001:db8::/32), so the walk goes on to 6.6.6.6.
    assert_eq!(client(&f).as_deref(), Some("6.6.6.6:0"));
    assert_eq!(f.secure, Some(false), "the chosen element's proto");
    assert_eq!(f.host, None);
    let f = resolve(
        &h(&[(
            "Forwarded",
            r#"for="[2001:db9::17]:4711";proto=https;host="example.com:444", for=10.0.0.1;proto=http"#,
        )]),
        &proxies(),
    );
    assert_eq!(client(&f).as_deref(), Some("[2001:db9::17]:4711"));
    assert_eq!(
        (f.secure, f.host.as_deref(), f.port),
        (Some(true), Some("example.com"), Some(444))
    );
    // Quoted-pairs unescape; lines join into one list.
    let f = resolve(
        &h(&[
            ("Forwarded", r#"for="1.2\.3.4""#),
            ("Forwarded", "for=10.0.0.3"),
        ]),
        &proxies(),
    );
    assert_eq!(client(&f).as_deref(), Some("1.2.3.4:0"));
}

#[test]
fn forwarded_opaque_nodes_keep_the_peer() {
    for value in [
        "for=unknown",
        "for=_hidden",
        r#"for="_hidden:_port""#,
        "for=1.2.3.4, for=unknown",
        "for=1.2.3.4, for=_gateway",
        "proto=https",
    ] {
        let f = resolve(&h(&[("Forwarded", value)]), &proxies());
        assert_eq!(f.client, None, "{value:?}");
    }
    // An obfuscated port: the address stands, port 0.
    let f = resolve(&h(&[("Forwarded", r#"for="1.2.3.4:_p1""#)]), &proxies());
    assert_eq!(client(&f).as_deref(), Some("1.2.3.4:0"));
    // The element without `for` still carries the hop's proto.
    assert_eq!(
        resolve(&h(&[("Forwarded", "proto=https")]), &local()).secure,
        Some(true)
    );
}

#[test]
fn malformed_forwarded_changes_nothing_and_shadows_x_forwarded() {
    for value in [
        "for=[::1]", // IPv6 must be quoted
        "for=::1",
        r#"for="::1""#,            // and bracketed
        "for=1.2.3.4;for=5.6.7.8", // a parameter twice in one element
        "for = 1.2.3.4",
        "for=1.2.3.4 ;proto=https",
        r#"for="1.2.3.4"#, // unterminated
        "for=1.2.3.4:99999",
        "for=01.2.3.4",
        "for",
        "=x",
        "for=1.2.3.4 x",
        "",
        ",,",
        "for=\"a\u{7f}\"",
    ] {
        let headers = h(&[
            ("Forwarded", value),
            ("X-Forwarded-For", "9.9.9.9"),
            ("X-Forwarded-Proto", "https"),
        ]);
        assert!(resolve(&headers, &local()).is_empty(), "{value:?}");
    }
}

#[test]
fn forwarded_wins_over_x_forwarded_without_mixing() {
    let headers = h(&[
        ("X-Forwarded-For", "9.9.9.9"),
        ("X-Forwarded-Proto", "https"),
        ("X-Forwarded-Host", "evil.example"),
        ("Forwarded", "for=1.2.3.4"),
    ]);
    let f = resolve(&headers, &local());
    assert_eq!(client(&f).as_deref(), Some("1.2.3.4:0"));
    assert_eq!(
        (f.secure, f.host),
        (None, None),
        "nothing taken from X-Forwarded-*"
    );
}

#[test]
fn arbitrary_bytes_never_panic() {
    // A cheap stand-in for the fuzzer: every short value over a small alphabet.
    let alphabet = b"f=or;,\"\\[]:1._ ";
    let mut value = Vec::new();
    for n in 0..(alphabet.len().pow(4)) {
        value.clear();
        let mut k = n;
        for _ in 0..4 {
            value.push(alphabet[k % alphabet.len()]);
            k /= alphabet.len();
        }
        let both: Fields = vec![("Forwarded", &value), ("X-Forwarded-For", &value)].into();
        let xff: Fields = vec![("X-Forwarded-For", &value)].into();
        resolve(&both, &proxies());
        resolve(&xff, &proxies());
    }
}

#[test]
fn origin_from_host_and_port() {
    let f = |host: Option<&str>, port, secure| Forwarded {
        client: None,
        secure,
        host: host.map(str::to_owned),
        port,
    };
    let o = f(Some("example.com"), None, Some(true))
        .origin(Some(b"inner:8000"))
        .unwrap();
    assert_eq!(
        (o.name.as_deref(), o.port, o.http_host.as_deref()),
        (Some("example.com"), 443, Some("example.com"))
    );
    let o = f(Some("example.com"), Some(8443), None)
        .origin(None)
        .unwrap();
    assert_eq!(
        (o.name.as_deref(), o.port, o.http_host.as_deref()),
        (Some("example.com"), 8443, Some("example.com:8443"))
    );
    let o = f(None, Some(8443), None)
        .origin(Some(b"inner:8000"))
        .unwrap();
    assert_eq!(
        (o.name, o.port, o.http_host.as_deref()),
        (None, 8443, Some("inner:8443"))
    );
    let o = f(None, Some(8443), None).origin(Some(b"bad host")).unwrap();
    assert_eq!((o.port, o.http_host), (8443, None));
    assert_eq!(f(None, None, Some(true)).origin(Some(b"inner")), None);
}
