"""gunicorn's own request corpus, sent to m0serve: a peer's test suite run
against the server, as the project is judged.

gunicorn's sdist (the version ../shared/bench-peers.txt pins, its hash checked)
carries tests/requests/: `valid/*.http`, requests its parser must read, each
with a `.py` saying what it must read (method, target, version, fields in
order, body), and `invalid/*.http`, requests it must refuse. Each file is
sent on its own connection, decoded as gunicorn's tests decode it, to
apps/request_echo.py, which answers with what it was given.

- valid: every request is answered 200 with what gunicorn reads. An HTTP/1.1
  request without Host is answered 400 (RFC 9112 §3.2, a MUST gunicorn does
  not apply), and then sent again with a Host field added, so the rest of it
  is checked too.
- invalid: no request gets a 2xx answer.

Where m0serve reads a file otherwise, the file is in KNOWN with the outcome it
gets and the reason, an RFC's or a configuration gunicorn's file sets. An
unlisted difference fails the test, and so does a listed file that no longer
differs (the entry no longer describes the server). Files whose `.py` turns
on gunicorn's `proxy_protocol` go to a server with `--proxy-protocol`.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import importlib.machinery
import json
import os
import re
import socket
import subprocess
import sys
import tarfile
import types
import urllib.parse
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest

from helpers import Server, start_server, stop_cleanly

GUNICORN = "27.0.1"
SDIST_SHA256 = "b1514965361c8b7e8107a80aa2a92636878df1ccfac6dd204a676426e04d9e3e"
CACHE = Path(__file__).resolve().parents[2] / "target" / "peer-corpora"

# File -> (the outcome m0serve gives, why that is right).
# Outcomes: "statuses [..]" (the answers' statuses), "no answer", or the
# first field that differs ("method", "headers", ...).
KNOWN: Dict[str, Tuple[str, str]] = {
    "valid/005": ("statuses [400]", "a fragment ('#') in the request-target: origin-form has none (RFC 9112 §3.2.1)"),
    "valid/012": ("statuses [400]", "Content-Type in the trailer section: fields that say how to read the content are refused there (proto/src/http/chunked.rs, RFC 9110 §6.5.1)"),
    "valid/025": ("statuses [501]", "Transfer-Encoding gzip, chunked: a coding the server does not implement (RFC 9112 §6.1)"),
    "valid/025_line": ("statuses [501]", "Transfer-Encoding gzip, chunked (RFC 9112 §6.1)"),
    "valid/029": ("statuses [501]", "Transfer-Encoding identity, chunked: identity is no transfer coding (RFC 9112 §6.1, §7)"),
    "valid/030": ("statuses [501]", "Transfer-Encoding identity, chunked (RFC 9112 §6.1, §7)"),
    "valid/rfc9112_smuggle_gzip_chunked_01": ("statuses [501]", "Transfer-Encoding gzip, chunked (RFC 9112 §6.1)"),
    "valid/rfc9112_smuggle_te_identity_chunked_01": ("statuses [501]", "Transfer-Encoding identity, chunked (RFC 9112 §6.1, §7)"),
    "valid/028": ("statuses [400]", "whitespace between a field name and its colon: a server MUST answer 400 (RFC 9112 §5.1); gunicorn's file opts into strip_header_spaces"),
    "valid/compat_obs_fold": ("statuses [400]", "obs-fold: 400 is the strict one of the two answers allowed (RFC 9112 §5.2); gunicorn's file opts into permit_obsolete_folding"),
    "valid/compat_obs_fold_huge": ("statuses [400]", "obs-fold (RFC 9112 §5.2); gunicorn's file opts into permit_obsolete_folding"),
    "valid/031compat": ("method", "methods are case-sensitive (RFC 9110 §9.1): kept as sent; gunicorn's file opts into casefold_http_method"),
    "valid/040": ("headers", "field names with underscores reach an ASGI app as sent (its headers are raw, nothing collides; the WSGI environ drops them, as gunicorn does)"),
    "valid/099": ("no answer", "the file's body is shorter than its Content-Length (its lines end in bare newlines, which the decoding drops): the request never ends"),
    "valid/pp_03": ("no answer", "no PROXY preamble from a peer the server expects one from: closed, as the PROXY protocol's spec says (a receiver MUST NOT guess whether the header is present); gunicorn detects it"),
    "valid/rfc9112_target_absolute_userinfo_01": ("statuses [400]", "userinfo in an http URI used as a request-target (RFC 9110 §4.2.4: treat it as an error)"),
    "valid/rfc9112_target_authority_connect_01": ("statuses [501]", "CONNECT: m0serve is not a proxy"),
    "valid/rfc9112_target_authority_ipv6_01": ("statuses [501]", "CONNECT: m0serve is not a proxy"),
    "invalid/006": ("statuses [200]", "a 4,112-byte request line: gunicorn's limit is 4,094, m0serve bounds the whole head (414 past it)"),
    "invalid/007": ("statuses [200]", "an 8,203-byte field line: gunicorn's limit is 8,190, m0serve bounds the whole head (431 past it)"),
    "invalid/008": ("statuses [200]", "field lines over gunicorn's 8,190-byte limit, within m0serve's head bound"),
    "invalid/011": ("statuses [200]", "gunicorn's file sets limit_request_fields 2"),
    "invalid/012": ("statuses [200]", "gunicorn's file sets limit_request_field_size 98"),
    "invalid/040": ("statuses [200]", "gunicorn's file sets header_map refuse (underscores in names: see valid/040)"),
    "invalid/limit_header_default_01": ("statuses [200]", "gunicorn's file sets limit_request_field_size 0 (its default then), a field over 8,190 bytes"),
    "invalid/rfc9112_leading_crlf_02": ("statuses [200]", "two empty lines before the request line: a server SHOULD ignore at least one (RFC 9112 §2.2), m0serve ignores them all"),
}


def sdist() -> Path:
    """gunicorn's pinned sdist, downloaded once into target/peer-corpora."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"gunicorn-{GUNICORN}.tar.gz"
    if not path.exists():
        done = subprocess.run(
            # Only its test files are read: the sdist is fetched for a Python
            # gunicorn supports (3.10+), whichever runs the suite.
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
             "--python-version", "3.13", f"gunicorn=={GUNICORN}", "-d", str(CACHE)],
            capture_output=True, text=True, timeout=300,
        )
        if done.returncode != 0 or not path.exists():
            why = f"pip download gunicorn=={GUNICORN} failed: {done.stderr.strip()[-300:]}"
            if os.environ.get("CI"):
                pytest.fail(why)
            pytest.skip(why)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert digest == SDIST_SHA256, f"{path} is not the pinned sdist (sha256 {digest})"
    return path


@pytest.fixture(scope="module")
def corpus() -> Path:
    """tests/requests/ of the sdist, extracted beside it."""
    path = sdist()
    root = CACHE / f"gunicorn-{GUNICORN}"
    requests = root / "tests" / "requests"
    if not requests.is_dir():
        prefix = f"gunicorn-{GUNICORN}/tests/requests/"
        with tarfile.open(path) as tar:
            members = [m for m in tar.getmembers()
                       if m.name.startswith(prefix) and m.isfile() and ".." not in m.name.split("/")]
            for member in members:
                target = CACHE / member.name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(tar.extractfile(member).read())  # type: ignore[union-attr]
    return requests


# --- gunicorn's test files, read as its tests read them ----------------------


class _Errors(types.ModuleType):
    """gunicorn.http.errors: each name an exception class (the invalid files
    name the one they expect)."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        error = type(name, (Exception,), {})
        setattr(self, name, error)
        return error


class _Config:
    """gunicorn.config.Config: records what a file sets."""

    def __init__(self) -> None:
        self.settings: Dict[str, object] = {}

    def set(self, name: str, value: object) -> None:
        self.settings[name] = value


@contextlib.contextmanager
def stand_in_gunicorn() -> Iterator[None]:
    """The gunicorn modules the expectation files import, for as long as
    they are read (any real gunicorn is put back after)."""
    package, http, config = (types.ModuleType(n) for n in ("gunicorn", "gunicorn.http", "gunicorn.config"))
    errors = _Errors("gunicorn.http.errors")
    config.Config = _Config  # type: ignore[attr-defined]
    package.http, package.config, http.errors = http, config, errors  # type: ignore[attr-defined]
    stand_ins = {"gunicorn": package, "gunicorn.http": http,
                 "gunicorn.http.errors": errors, "gunicorn.config": config}
    saved = {name: sys.modules.get(name) for name in stand_ins}
    sys.modules.update(stand_ins)
    try:
        yield
    finally:
        for name, was in saved.items():
            if was is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = was


def _uri(raw: str) -> dict:
    # A target starting "//" is a path, not a network-path reference (RFC 9112 §3.2.1).
    parts = urllib.parse.urlsplit("." + raw) if raw.startswith("//") else urllib.parse.urlsplit(raw)
    path = parts.path[1:] if raw.startswith("//") else parts.path
    return {"raw": raw, "path": path, "query": parts.query}


def expectation(py: str) -> dict:
    """What a `.py` file expects (read within `stand_in_gunicorn`)."""
    module = types.ModuleType("gunicorn_case")
    module.uri = _uri  # type: ignore[attr-defined]
    module.cfg = _Config()  # type: ignore[attr-defined]
    importlib.machinery.SourceFileLoader("gunicorn_case", py).exec_module(module)
    return vars(module)


def request_bytes(http: str) -> bytes:
    """The file's bytes as gunicorn's treq.request decodes them."""
    data = Path(http).read_bytes()
    data = data.replace(b"\n", b"").replace(b"\\r\\n", b"\r\n")
    data = data.replace(b"\\0", b"\000").replace(b"\\n", b"\n").replace(b"\\t", b"\t")
    return re.sub(rb"\\x([0-9A-Fa-f]{2})", lambda m: bytes([int(m.group(1), 16)]), data)


def with_host(data: bytes, expected: List[dict]) -> bytes:
    """`data` with `Host: h` after the request line of each HTTP/1.1 request
    that has none (the request lines in order, as the expectations are)."""
    lines = list(re.finditer(rb"[!-~]+ [!-~]+ HTTP/1\.[01]\r\n", data))
    assert len(lines) >= len(expected), "a request line for each expected request"
    out, at = b"", 0
    for line, request in zip(lines, expected):
        out += data[at:line.end()]
        at = line.end()
        if needs_host(request):
            out += b"Host: h\r\n"
    return out + data[at:]


def needs_host(request: dict) -> bool:
    return request["version"] == (1, 1) and not any(k.lower() == "host" for k, _ in request["headers"])


# --- sending -----------------------------------------------------------------


def exchange(server: Server, data: bytes) -> List[Tuple[int, bytes]]:
    """Send `data`, half-close, and read the answers (status, body) until the
    server closes."""
    sock = socket.create_connection(server.address, timeout=5)
    received = b""
    try:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        while True:
            piece = sock.recv(65536)
            if not piece:
                break
            received += piece
    except ConnectionResetError:
        pass
    finally:
        sock.close()
    answers = []
    while received.startswith(b"HTTP/"):
        head, _, rest = received.partition(b"\r\n\r\n")
        length = re.search(rb"(?im)^content-length: *(\d+)", head)
        n = int(length.group(1)) if length else 0
        answers.append((int(head.split()[1]), rest[:n]))
        received = rest[n:]
    return answers


def read_as_expected(answers: List[Tuple[int, bytes]], expected: List[dict]) -> str:
    """"ok", or the first way the answers differ from what gunicorn reads."""
    statuses = [status for status, _ in answers]
    if not answers:
        return "no answer"
    if len(answers) < len(expected) or any(s != 200 for s in statuses):
        return f"statuses {statuses}"
    for (_, body), want in zip(answers, expected):
        seen = json.loads(body)
        if seen["method"] != want["method"]:
            return "method"
        if seen["version"] != "%d.%d" % want["version"]:
            return "version"
        if (seen["raw_path"], seen["query"]) != (want["uri"]["path"], want["uri"]["query"]):
            return "target"
        if [tuple(h) for h in seen["headers"]] != [(k.lower(), v) for k, v in want["headers"]]:
            return "headers"
        body = want.get("body", b"")
        if seen["body"].encode("latin-1") != (body.encode("latin-1") if isinstance(body, str) else body):
            return "body"
    return "ok"


# --- the test ----------------------------------------------------------------


@pytest.fixture(scope="module")
def servers(backend: str) -> Iterator[Dict[str, Server]]:
    """A plain server, and one that reads a PROXY preamble from loopback."""
    plain = start_server(backend, "request_echo:app", "--interface", "asgi", "--lifespan", "off")
    proxied = start_server(backend, "request_echo:app", "--interface", "asgi", "--lifespan", "off",
                           "--proxy-protocol", "--forwarded-allow-ips", "127.0.0.1")
    yield {"plain": plain, "proxied": proxied}
    stop_cleanly(plain)
    stop_cleanly(proxied)


def outcomes(corpus: Path, servers: Dict[str, Server]) -> Dict[str, str]:
    got = {}
    with stand_in_gunicorn():
        cases = {http: expectation(http[: -len(".http")] + ".py")
                 for http in sorted(glob.glob(str(corpus / "*" / "*.http")))}
    for http, case in cases.items():
        kind = Path(http).parent.name
        name = f"{kind}/{Path(http).stem}"
        proxy = bool(case["cfg"].settings.get("proxy_protocol"))
        server = servers["proxied" if proxy else "plain"]
        data = request_bytes(http)
        if kind == "invalid":
            statuses = [s for s, _ in exchange(server, data)]
            got[name] = "ok" if all(s >= 400 for s in statuses) else f"statuses {statuses}"
            continue
        expected = case["request"] if isinstance(case["request"], list) else [case["request"]]
        missing = [i for i, request in enumerate(expected) if needs_host(request)]
        if missing:
            # RFC 9112 §3.2: a server MUST answer 400 to an HTTP/1.1 request without Host.
            statuses = [s for s, _ in exchange(server, data)]
            if statuses[missing[0]:missing[0] + 1] != [400]:
                got[name] = f"without Host: statuses {statuses}"
                continue
            data = with_host(data, expected)
            expected = [dict(r, headers=[("HOST", "h"), *r["headers"]]) if needs_host(r) else r for r in expected]
        got[name] = read_as_expected(exchange(server, data), expected)
    return got


def test_gunicorn_request_corpus(corpus: Path, servers: Dict[str, Server]) -> None:
    got = outcomes(corpus, servers)
    assert len(got) > 130, f"only {len(got)} files in {corpus}"
    unlisted = {name: outcome for name, outcome in got.items() if outcome != "ok" and name not in KNOWN}
    stale = {name: got.get(name, "(no such file)") for name, (outcome, _) in KNOWN.items()
             if not got.get(name, "").startswith(outcome)}
    assert not unlisted, f"gunicorn's corpus read otherwise, not in KNOWN: {unlisted}"
    assert not stale, f"KNOWN entries that no longer describe the outcome: {stale}"
