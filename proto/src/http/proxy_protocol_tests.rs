use super::*;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// A v2 header: command (0 LOCAL, 1 PROXY), family byte, address block, TLVs.
fn v2_header(command: u8, family: u8, addresses: &[u8], tlvs: &[u8]) -> Vec<u8> {
    let mut h = V2_SIGNATURE.to_vec();
    h.push(0x20 | command);
    h.push(family);
    h.extend_from_slice(&((addresses.len() + tlvs.len()) as u16).to_be_bytes());
    h.extend_from_slice(addresses);
    h.extend_from_slice(tlvs);
    h
}

fn inet4(src: [u8; 4], sport: u16) -> Vec<u8> {
    let mut a = src.to_vec();
    a.extend_from_slice(&[10, 0, 0, 1]);
    a.extend_from_slice(&sport.to_be_bytes());
    a.extend_from_slice(&80u16.to_be_bytes());
    a
}

#[test]
fn v1_tcp4_tcp6_and_unknown() {
    let line = b"PROXY TCP4 192.0.2.7 10.0.0.1 56324 443\r\nGET / HTTP/1.1\r\n";
    assert_eq!(
        parse(line),
        Ok(Some((Preamble::Proxied(addr("192.0.2.7:56324")), 41)))
    );
    let line = b"PROXY TCP6 2001:db8::7 ::1 1 65535\r\n";
    assert_eq!(
        parse(line),
        Ok(Some((
            Preamble::Proxied(addr("[2001:db8::7]:1")),
            line.len()
        )))
    );
    assert_eq!(parse(b"PROXY UNKNOWN\r\n"), Ok(Some((Preamble::Local, 15))));
    assert_eq!(
        parse(b"PROXY UNKNOWN ffff::1 ::1 1 2\r\n"),
        Ok(Some((Preamble::Local, 31)))
    );
}

#[test]
fn v1_incomplete_waits_every_prefix() {
    let line = b"PROXY TCP4 192.0.2.7 10.0.0.1 56324 443\r\n";
    for n in 0..line.len() {
        assert_eq!(parse(&line[..n]), Ok(None), "prefix of {n}");
    }
}

#[test]
fn v1_malformed() {
    for bad in [
        &b"GET / HTTP/1.1\r\n"[..],
        b"PROXY  TCP4 1.2.3.4 1.2.3.4 1 2\r\n",
        b"PROXY TCP4 1.2.3.4 1.2.3.4 1 2 \r\n",
        b"PROXY TCP4 1.2.3.4 1.2.3.4 1\r\n",
        b"PROXY TCP4 ::1 1.2.3.4 1 2\r\n",
        b"PROXY TCP6 1.2.3.4 ::1 1 2\r\n",
        b"PROXY TCP4 01.2.3.4 1.2.3.4 1 2\r\n",
        b"PROXY TCP4 1.2.3.4 1.2.3.4 65536 2\r\n",
        b"PROXY TCP4 1.2.3.4 1.2.3.4 01 2\r\n",
        b"PROXY TCP4 1.2.3.4 1.2.3.4 +1 2\r\n",
        b"PROXY UDP4 1.2.3.4 1.2.3.4 1 2\r\n",
        b"PROXY TCP4 1.2.3.4 1.2.3.4 1 2\rX",
        b"PROXY TCP4 1.2.3.4\t1.2.3.4 1 2\r\n",
        b"PROXY \r\n",
        b"proxy TCP4 1.2.3.4 1.2.3.4 1 2\r\n",
        b"\x16\x03\x01",
    ] {
        assert_eq!(
            parse(bad),
            Err(Malformed),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    // 106 bytes with no CR: too long (the CRLF would end past 107), however it goes on.
    let mut long = b"PROXY UNKNOWN ".to_vec();
    long.resize(106, b'a');
    assert_eq!(parse(&long), Err(Malformed));
    assert_eq!(parse(&long[..105]), Ok(None));
    // Exactly 107 bytes with the CRLF: the longest line.
    let mut longest = long[..105].to_vec();
    longest.extend_from_slice(b"\r\n");
    assert_eq!(parse(&longest), Ok(Some((Preamble::Local, 107))));
    let mut over = long.clone();
    over.extend_from_slice(b"\r\n");
    assert_eq!(parse(&over), Err(Malformed), "108 bytes");
}

#[test]
fn v2_proxy_inet_and_inet6_with_tlvs() {
    let tlvs = [0x01, 0x00, 0x02, b'h', b'2', 0x04, 0x00, 0x00];
    let h = v2_header(1, 0x11, &inet4([192, 0, 2, 7], 4242), &tlvs);
    let mut stream = h.clone();
    stream.extend_from_slice(b"GET / HTTP/1.1\r\n");
    assert_eq!(
        parse(&stream),
        Ok(Some((Preamble::Proxied(addr("192.0.2.7:4242")), h.len())))
    );
    let mut a6 = [0u8; 36];
    a6[..16].copy_from_slice(&"2001:db8::9".parse::<Ipv6Addr>().unwrap().octets());
    a6[32..34].copy_from_slice(&9u16.to_be_bytes());
    let h = v2_header(1, 0x21, &a6, &[]);
    assert_eq!(
        parse(&h),
        Ok(Some((Preamble::Proxied(addr("[2001:db8::9]:9")), 52)))
    );
    // Every prefix waits.
    for n in 0..h.len() {
        assert_eq!(parse(&h[..n]), Ok(None), "prefix of {n}");
    }
}

#[test]
fn v2_local_unspec_and_unix_keep_the_peer() {
    let local = v2_header(0, 0x00, &[], &[]);
    assert_eq!(parse(&local), Ok(Some((Preamble::Local, 16))));
    // LOCAL with addresses: they are ignored.
    let local = v2_header(0, 0x11, &inet4([6, 6, 6, 6], 1), &[]);
    assert_eq!(parse(&local), Ok(Some((Preamble::Local, 28))));
    assert_eq!(
        parse(&v2_header(1, 0x00, &[], &[])),
        Ok(Some((Preamble::Local, 16)))
    );
    let unix = v2_header(1, 0x31, &[0u8; 216], &[]);
    assert_eq!(parse(&unix), Ok(Some((Preamble::Local, 232))));
}

#[test]
fn v2_malformed() {
    let good = v2_header(1, 0x11, &inet4([1, 2, 3, 4], 1), &[]);
    let mut bad_version = good.clone();
    bad_version[12] = 0x11;
    let mut bad_command = good.clone();
    bad_command[12] = 0x22;
    let mut bad_family = good.clone();
    bad_family[13] = 0x41;
    let dgram = v2_header(1, 0x12, &inet4([1, 2, 3, 4], 1), &[]);
    let unspec_transport = v2_header(1, 0x10, &inet4([1, 2, 3, 4], 1), &[]);
    let short = v2_header(1, 0x11, &inet4([1, 2, 3, 4], 1)[..11], &[]);
    let overrun_tlv = v2_header(1, 0x11, &inet4([1, 2, 3, 4], 1), &[0x01, 0x00, 0x05, b'x']);
    let torn_tlv = v2_header(1, 0x11, &inet4([1, 2, 3, 4], 1), &[0x01, 0x00]);
    for (name, bad) in [
        ("version", bad_version),
        ("command", bad_command),
        ("family", bad_family),
        ("dgram", dgram),
        ("unspec transport", unspec_transport),
        ("short", short),
        ("overrun tlv", overrun_tlv),
        ("torn tlv", torn_tlv),
    ] {
        assert_eq!(parse(&bad), Err(Malformed), "{name}");
    }
    // A bad version is refused as soon as its byte is here.
    assert_eq!(
        parse(&[&V2_SIGNATURE[..], &[0x31]].concat()),
        Err(Malformed)
    );
    // Not the signature: refused at the first wrong byte.
    assert_eq!(parse(b"\r\n\r\n\0\r\nQUIX"), Err(Malformed));
    assert_eq!(parse(b"\r\n\r\n\0\r\n"), Ok(None));
}

#[test]
fn arbitrary_bytes_never_panic() {
    let good = v2_header(1, 0x11, &inet4([1, 2, 3, 4], 1), &[1, 0, 1, 0]);
    for i in 12..good.len() {
        for b in [0u8, 1, 0x10, 0x21, 0x31, 0xff] {
            let mut v = good.clone();
            v[i] = b;
            for n in 0..=v.len() {
                let _ = parse(&v[..n]);
            }
        }
    }
}
