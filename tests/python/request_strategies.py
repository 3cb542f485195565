"""Hypothesis strategies for raw HTTP/1.1 request bytes, for the differential
test: well-formed requests built from the RFC 9112 grammar, the same with
smuggling-shaped deviations drawn for each part, and byte-level mutations.

Every part is drawn from a list that mixes what the grammar allows with what
parsers have been seen to disagree on (the HTTP Garden's findings, the
request-smuggling literature): framing headers, chunk syntax, line endings,
whitespace, versions, targets, control bytes.
"""

from __future__ import annotations

import random
from typing import List

from hypothesis import strategies as st

CRLF = b"\r\n"

TCHAR = b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
# Bytes that parsers treat differently wherever they appear.
ODD_BYTES = [b"\x00", b"\r", b"\n", b" ", b"\t", b"\x0b", b"\x0c", b"\x7f", b"\x80", b"\xff", b"\x1b"]


def part(good, odd):
    """A part of a request: `good` (what RFC 9112 allows) unless the part was
    picked to deviate, then `odd`."""
    return lambda deviate: odd if deviate else good


def tokens(alphabet: bytes, max_size: int = 8):
    return st.binary(min_size=1, max_size=max_size).map(lambda b: bytes(alphabet[x % len(alphabet)] for x in b))


token = tokens(TCHAR)
PCHAR = b"abcXYZ019-._~!$&'()*+,;=:@%2F"
segments = st.lists(st.binary(max_size=6).map(lambda b: bytes(PCHAR[x % len(PCHAR)] for x in b)), min_size=1, max_size=4)
origin_form = st.builds(
    lambda segs, q: b"/" + b"/".join(segs) + q, segments, st.sampled_from([b"", b"?a=1", b"?", b"?a=b&c=d/?", b"??x"])
)

PARTS = {
    "method": part(
        st.one_of(st.sampled_from([b"GET", b"POST", b"PUT", b"HEAD", b"DELETE", b"PATCH", b"OPTIONS"]), token),
        st.sampled_from([b"get", b"G(T", b"GE\x00T", b"GET\x80", b"", b"\x16\x03\x01", b"G:T", b"\xc3\xa9", b"CONNECT"]),
    ),
    "target": part(
        st.one_of(origin_form, st.sampled_from([b"http://h/p?q", b"HTTP://H:80/", b"https://h"])),
        st.sampled_from(
            [b"*", b"h:80", b"[::1]:8080", b"a/b", b"//x", b"/a#frag", b"/a\tb", b"/a b", b"/\x80\xff", b"/\xc3\xa9"]
            + [b"/\x00", b"/\x7f", b"/a\x0bb", b"", b"/%zz", b"?q", b"#", b"/a\\b", b'/"<>{}|^`', b"/a\rb"]
        ),
    ),
    "version": part(
        st.sampled_from([b"HTTP/1.1"] * 3 + [b"HTTP/1.0"]),
        st.sampled_from(
            [b"HTTP/1.2", b"HTTP/1.9", b"HTTP/2.0", b"HTTP/2", b"HTTP/3.0", b"HTTP/0.9", b"http/1.1", b"HTTP/1.1 "]
            + [b"HTTP/1.10", b"HTTP/11", b"HTTP/1", b"HTTP/1.", b"HTTP /1.1", b"HTTP/1.1\t", b"HTTP\\1.1"]
            + [b"HTTP/01.1", b"HTTP/1.01", b"HTTP/\xc2\xb9.1", b"", b"RTSP/1.0", b"ICE/1.0", b"HTTP/1.1\x00"]
        ),
    ),
    "line_end": part(st.just(CRLF), st.sampled_from([b"\n", b"\r", b"\r\r\n", b"\n\r"])),
    "sep": part(st.just(b" "), st.sampled_from([b"  ", b"\t", b"\x0b", b"\x0c", b"\r", b""])),
    "host": part(
        st.sampled_from([b"h", b"example.com", b"example.com:8080", b"127.0.0.1", b"[::1]:80", b"h:"]),
        st.sampled_from(
            [b"", b"a b", b"h:x", b"h:80:80", b"h/p", b"h@i", b"h,i", b"\xc3\xa9", b"h\x00", b"user@h", b"h?q"]
            + [b"h#f", b"[::1", b"_h", b"h:99999", b"h\t"]
        ),
    ),
    "host_count": part(st.just(1), st.sampled_from([0, 2])),
    "framing": part(
        st.sampled_from(["none", "length", "chunked"]), st.sampled_from(["both", "lengths", "te_twice", "length"])
    ),
    "te": part(
        st.sampled_from([b"chunked", b"Chunked", b"CHUNKED", b"chunked ", b" chunked", b"\tchunked", b",chunked"]),
        st.sampled_from(
            [b"xchunked", b"chunkedx", b"chunked, chunked", b"gzip, chunked", b"chunked, gzip", b"identity", b""]
            + [b"identity, chunked", b"chunked,", b"chunked;q=1", b'"chunked"', b"ch unked", b"chunk", b"\x0bchunked"]
            + [b"chunked\x00", b"gzip", b"chunked\r"]
        ),
    ),
    "cl": part(
        None,  # the body's length
        st.sampled_from(
            [b"+5", b"-1", b"05", b"0x5", b"5, 5", b"5,5", b"5 5", b"", b"5\x00", b"99999999999999999999", b"1e1"]
            + [b"\xd9\xa5", b"5;", b"5.0", b"0005", b"4", b"6", b"0"]
        ),
    ),
    "name": part(
        st.one_of(st.sampled_from([b"X-A", b"Foo", b"Accept", b"Cookie", b"Via", b"Te"]), token),
        st.sampled_from(
            [b"", b"X A", b"X\x00", b"X(", b"X\x80", b"X\t", b"\x0bX", b" X", b"X ", b"Host ", b"Content-Length "]
            + [b"Transfer_Encoding", b"Transfer-Encoding\x0b", b"Content\x00Length", b"Upgrade", b"Expect"]
        ),
    ),
    "value": part(
        st.binary(max_size=10).map(lambda b: bytes(32 + x % 95 for x in b).strip()),
        st.sampled_from(
            [b"\ta\t", b"a\x00b", b"a\rb", b"a\nb", b"a\x7fb", b"\x80\xff", b"a\x0bb", b"100-continue", b"close"]
            + [b"keep-alive", b"Upgrade", b"websocket", b"a\r\n b", b"a\r\n\tb", b"a \x01"]
        ),
    ),
    "colon": part(st.sampled_from([b": ", b":", b":\t", b": \t"]), st.sampled_from([b" : ", b" :", b"::", b":\x0b", b"\t:"])),
    "fold": part(st.just(None), st.sampled_from([b" folded", b"\tfolded", b""])),
    "chunk_size": part(
        st.sampled_from(["%x", "%X", "0%x"]),
        st.sampled_from(["00%x", "+%x", " %x", "%x ", "%x\t", "0x%x", "%x\x00", "-%x", "%x1", "%x;", ""]),
    ),
    "chunk_ext": part(
        st.sampled_from([b"", b"", b";a", b";a=b", b';a="q"', b';a="q\\"x"', b";a=b;c"]),
        st.sampled_from(
            [b"; a=b", b";a = b", b"\t;a", b" ;a", b";", b";=b", b";a=", b";a=\x00", b";a\rb", b";a=\x80"]
            + [b';a="\x7f"', b";a b", b";a=b c", b';a="unterminated', b";a\nb"]
        ),
    ),
    "last_chunk": part(st.just(b"0"), st.sampled_from([b"00", b"000", b"0 ", b" 0", b"+0", b"0x0", b"-0", b""])),
    "trailer": part(
        st.lists(st.sampled_from([b"X: y", b"Expires: 0", b"A:"]), max_size=2),
        st.lists(st.sampled_from([b"X y: z", b"XYZ", b" z", b"X: a\x00", b"Content-Length: 5", b": b"]), min_size=1, max_size=2),
    ),
}


@st.composite
def chunked_body(draw, deviate) -> bytes:
    """A chunked body: chunks, the last chunk and a trailer section."""
    out = b""
    for _ in range(draw(st.integers(0, 3))):
        data = draw(st.binary(min_size=1, max_size=12))
        size_format = draw(PARTS["chunk_size"](deviate("chunk_size")))
        size = (size_format % len(data)).encode() if "%" in size_format else size_format.encode()
        ext = draw(PARTS["chunk_ext"](deviate("chunk_ext")))
        out += size + ext + draw(PARTS["line_end"](deviate("line_end"))) + data + draw(PARTS["line_end"](deviate("line_end")))
    out += draw(PARTS["last_chunk"](deviate("last_chunk"))) + draw(PARTS["chunk_ext"](deviate("chunk_ext")))
    out += draw(PARTS["line_end"](deviate("line_end")))
    for field in draw(PARTS["trailer"](deviate("trailer"))):
        out += field + draw(PARTS["line_end"](deviate("line_end")))
    return out + draw(PARTS["line_end"](deviate("line_end")))


@st.composite
def request(draw) -> bytes:
    """One request: well-formed but for up to two parts picked to deviate, each
    deviation then drawn (with some chance) wherever that part occurs."""
    odd = draw(st.sets(st.sampled_from(sorted(PARTS)), max_size=2))

    def deviate(name: str) -> bool:
        return name in odd and draw(st.integers(0, 2)) > 0

    def get(name: str):
        return draw(PARTS[name](deviate(name)))

    sep, line_end = (lambda: get("sep")), (lambda: get("line_end"))
    line = get("method") + sep() + get("target") + sep() + get("version") + line_end()
    fields: List[bytes] = [b"Host" + get("colon") + get("host") for _ in range(get("host_count"))]
    framing = get("framing")
    body = b""
    if framing in ("length", "both", "lengths"):
        body = draw(st.binary(max_size=16))
        value = draw(PARTS["cl"](True)) if deviate("cl") else str(len(body)).encode()
        name = draw(st.sampled_from([b"Content-Length", b"content-length", b"CONTENT-LENGTH"]))
        fields.append(name + get("colon") + value)
        if framing == "lengths":
            fields.append(b"Content-Length" + get("colon") + draw(st.sampled_from([value, value + b"0", b"0"])))
    if framing in ("chunked", "both", "te_twice"):
        body = draw(chunked_body(deviate))
        fields.append(b"Transfer-Encoding" + get("colon") + get("te"))
        if framing == "te_twice":
            fields.append(b"Transfer-Encoding" + get("colon") + get("te"))
    for _ in range(draw(st.integers(0, 3))):
        fields.append(get("name") + get("colon") + get("value"))
    fold = get("fold")
    if fold is not None:
        fields.insert(draw(st.integers(0, len(fields))), fold)
    fields = draw(st.permutations(fields))
    return line + b"".join(f + line_end() for f in fields) + line_end() + body


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One byte-level edit: insert, replace or delete a byte at a random place."""
    at = rng.randrange(len(data) + 1)
    odd = rng.choice(ODD_BYTES + [b":", b";", b",", b"0", b"a", b'"', b"\r\n"])
    op = rng.randrange(3)
    if op == 0:
        return data[:at] + odd + data[at:]
    if op == 1:
        return data[:at] + odd + data[at + 1 :]
    return data[:at] + data[at + 1 :]


@st.composite
def connection(draw) -> bytes:
    """What a client sends on one connection: one to three requests, pipelined,
    sometimes with empty lines between them, sometimes mutated by a byte."""
    parts = draw(st.lists(request(), min_size=1, max_size=3))
    joiner = draw(st.sampled_from([b""] * 6 + [CRLF, CRLF * 2, b"\n", b"\r"]))
    data = joiner.join(parts)
    if draw(st.integers(0, 3)) == 0:
        data = mutate(data, random.Random(draw(st.integers(0, 2**32))))
    return data
