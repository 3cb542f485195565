"""TLS end to end, with real clients: httpx and curl over HTTPS (keep-alive,
uploads, streaming), openssl s_client for versions and ALPN, the websockets
client over WSS, mutual TLS, the key formats, bad input on the TLS port,
configuration errors, and certificates reloaded by a SIGHUP roll.

Certificates are made here by trustme (and cryptography, which it brings),
never committed."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path

import httpx
import pytest
import trustme
from cryptography.hazmat.primitives import serialization
from websockets.sync.client import connect as ws_connect

from helpers import run_m0serve

APPS = {
    "wsgi": ("tls_echo:wsgi",),
    "asgi": ("tls_echo:asgi", "--interface=asgi"),
}
PASSWORD = "correct horse"


class Pki:
    """A CA, a server certificate for localhost and 127.0.0.1 in every key
    format, a client certificate, and a second CA the server does not trust."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ca = trustme.CA()
        self.ca_pem = self.path("ca.pem", self.ca.cert_pem.bytes())
        self.server = self.ca.issue_cert("localhost", "127.0.0.1")
        self.cert = self.path("cert.pem", b"".join(b.bytes() for b in self.server.cert_chain_pems))
        self.key = self.path("key.pem", self.server.private_key_pem.bytes())  # SEC1 (EC)
        key = serialization.load_pem_private_key(self.server.private_key_pem.bytes(), None)
        self.key_pkcs8 = self.path("key8.pem", key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        self.key_encrypted = self.path("key8-enc.pem", key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(PASSWORD.encode())))
        rsa_ca = trustme.CA(key_type=trustme.KeyType.RSA)
        rsa = rsa_ca.issue_cert("localhost", "127.0.0.1")
        self.rsa_ca_pem = self.path("rsa-ca.pem", rsa_ca.cert_pem.bytes())
        self.rsa_cert = self.path("rsa-cert.pem", rsa.cert_chain_pems[0].bytes())
        self.rsa_key = self.path("rsa-key.pem", rsa.private_key_pem.bytes())  # PKCS#1
        self.combined = self.path("combined.pem", self.server.private_key_and_cert_chain_pem.bytes())
        self.client = self.ca.issue_cert("client@example.org")
        self.stranger = trustme.CA().issue_cert("client@example.org")
        self.leaf_pem = self.server.cert_chain_pems[0].bytes().decode()

    def path(self, name: str, data: bytes) -> Path:
        p = self.root / name
        p.write_bytes(data)
        return p

    def flags(self, *more: str) -> tuple:
        return ("--ssl-certfile", str(self.cert), "--ssl-keyfile", str(self.key)) + more

    def context(self, client=None) -> ssl.SSLContext:
        ctx = ssl.create_default_context()
        self.ca.configure_trust(ctx)
        if client is not None:
            client.configure_cert(ctx)
        return ctx


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(params=sorted(APPS))
def interface(request):
    return request.param


def start(serve, interface, pki, *flags):
    app, *rest = APPS[interface]
    server = serve(app, *rest, *pki.flags(*flags))
    assert server.url.startswith("https://"), server.url
    return server


def tls_socket(server, ctx: ssl.SSLContext, hostname="localhost") -> ssl.SSLSocket:
    return ctx.wrap_socket(server.connect(), server_hostname=hostname)


def get_over(sock, target="/") -> bytes:
    sock.sendall(f"GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
    chunks = []
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def get_kept(sock, target="/") -> bytes:
    """One request on a connection left open: the answer, read by its length."""
    sock.sendall(f"GET {target} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed mid-head: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?im)^content-length:\s*(\d+)", head).group(1))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "closed mid-body"
        body += chunk
    return head + b"\r\n\r\n" + body


def test_httpx_keep_alive_uploads_and_streaming(serve, interface, pki):
    server = start(serve, interface, pki)
    with httpx.Client(verify=pki.context(), base_url=server.url, timeout=10) as client:
        first = client.get("/").json()
        assert first["scheme"] == "https"
        again = [client.get("/").json() for _ in range(3)]
        assert {tuple(r["client"]) for r in again} == {tuple(first["client"])}, "not kept alive"
        body = bytes(range(256)) * 12289  # ~3 MiB
        up = client.post("/upload", content=body).json()
        assert up["length"] == len(body)
        assert up["sha256"] == hashlib.sha256(body).hexdigest()
        streamed = client.get("/stream")
        assert streamed.status_code == 200
        lines = streamed.content.split(b"\n")[:-1]
        assert lines == [b"%06d" % i for i in range(20000)]
        assert client.get("/healthz").status_code == 200  # a native route over TLS


def test_asgi_tls_extension(serve, pki):
    server = start(serve, "asgi", pki)
    with httpx.Client(verify=pki.context(), base_url=server.url, timeout=10) as client:
        tls = client.get("/").json()["tls"]
    assert tls["tls_version"] in (0x0303, 0x0304)
    assert isinstance(tls["cipher_suite"], int) and tls["cipher_suite"] > 0
    assert tls["server_cert"] == pki.leaf_pem
    assert tls["client_cert_chain"] == []
    assert tls["client_cert_name"] is None
    assert tls["client_cert_error"] is None


@pytest.mark.parametrize("http, version, alpn", [("auto", "2", "h2"), ("1", "1.1", "http/1.1")])
def test_curl_over_https(serve, pki, tmp_path, http, version, alpn):
    server = start(serve, "wsgi", pki, f"--http={http}")
    upload = tmp_path / "upload.bin"
    upload.write_bytes(b"x" * 1_000_000)
    done = subprocess.run(
        ["curl", "-sS", "-v", "--cacert", str(pki.ca_pem), "--data-binary", f"@{upload}",
         "-w", "\n%{http_code} %{http_version}", f"{server.url}/upload"],
        capture_output=True, text=True, timeout=20)
    assert done.returncode == 0, done.stderr
    body, status = done.stdout.rsplit("\n", 1)
    assert status == f"200 {version}"
    assert json.loads(body)["length"] == 1_000_000
    assert f"ALPN: server accepted {alpn}" in done.stderr or f"ALPN, server accepted to use {alpn}" in done.stderr


def s_client(server, *args: str, request: bytes = b"") -> subprocess.CompletedProcess:
    host, port = server.address
    return subprocess.run(
        ["openssl", "s_client", "-connect", f"{host}:{port}", "-servername", "localhost", "-ign_eof", *args],
        input=request, capture_output=True, timeout=20)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl command")
def test_openssl_s_client_versions_and_alpn(serve, pki):
    server = start(serve, "wsgi", pki)
    ask = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    for version, name in (("-tls1_2", b"TLSv1.2"), ("-tls1_3", b"TLSv1.3")):
        done = s_client(server, version, "-alpn", "http/1.1", "-CAfile", str(pki.ca_pem), request=ask)
        out = done.stdout
        assert b"Protocol  : " + name in out or b"New, " + name in out, out.decode(errors="replace")
        assert b"ALPN protocol: http/1.1" in out
        assert b"Verify return code: 0 (ok)" in out
        assert b"HTTP/1.1 200 OK" in out
    # Both offered: HTTP/2 is the server's choice.
    done = s_client(server, "-alpn", "h2,http/1.1")
    assert b"ALPN protocol: h2" in done.stdout


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl command")
def test_http_1_refuses_a_client_that_offers_only_h2(serve, pki):
    server = start(serve, "wsgi", pki, "--http=1")
    ask = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    # RFC 7301 §3.2: no protocol in common fails the handshake (no_application_protocol).
    done = s_client(server, "-alpn", "h2", request=ask)
    assert b"HTTP/1.1 200" not in done.stdout
    assert b"no application protocol" in done.stderr or done.returncode != 0


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl command")
def test_a_tls_1_3_minimum_refuses_tls_1_2(serve, pki):
    server = start(serve, "wsgi", pki, "--ssl-protocol-min=tls1.3")
    ask = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    refused = s_client(server, "-tls1_2", request=ask)
    assert b"HTTP/1.1 200" not in refused.stdout
    served = s_client(server, "-tls1_3", request=ask)
    assert b"HTTP/1.1 200 OK" in served.stdout


def test_websocket_over_wss(serve, pki):
    server = start(serve, "asgi", pki)
    url = server.url.replace("https://", "wss://") + "/ws"
    with ws_connect(url, ssl=pki.context(), open_timeout=10) as ws:
        hello = json.loads(ws.recv(timeout=10))
        assert hello["scheme"] == "wss"
        assert hello["tls"]["server_cert"] == pki.leaf_pem
        for message in ("one", "two" * 10000):
            ws.send(message)
            assert ws.recv(timeout=10) == message
        ws.send(b"\x00\x01binary")
        assert ws.recv(timeout=10) == b"\x00\x01binary"


def test_plain_http_on_the_tls_port_is_answered_400_while_others_are_served(serve, pki):
    server = start(serve, "wsgi", pki, "--access-log")
    sent = time.monotonic()
    answer = server.exchange(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", timeout=5)
    assert time.monotonic() - sent < 2, "not answered at once"
    assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer
    assert b"plain HTTP request was sent to HTTPS port" in answer
    with tls_socket(server, pki.context()) as s:
        assert get_over(s).startswith(b"HTTP/1.1 200 OK")


def test_garbage_and_a_stalled_hello_never_reach_the_app(serve, pki):
    server = start(serve, "wsgi", pki, "--header-read-timeout=1", "--access-log")
    # A record header, then a ClientHello that cannot be decoded: an alert, a close.
    garbage = server.exchange(b"\x16\x03\x01\x00\x05\x01\x00\x00\x01\xff", timeout=5)
    assert garbage[:1] == b"\x15", garbage
    # Half a ClientHello, then silence: closed at the header read timeout.
    with server.connect(timeout=10) as stalled:
        stalled.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
        started = time.monotonic()
        assert stalled.recv(100) == b""
        took = time.monotonic() - started
    assert 0.5 < took < 5, f"closed after {took:.1f}s with a 1 s timeout"
    # A bystander is served throughout, and it is the only request the app saw.
    with tls_socket(server, pki.context()) as s:
        assert get_over(s).startswith(b"HTTP/1.1 200 OK")
    server.wait_for(r'"GET / HTTP/1.1" 200', 5)
    assert server.output.count('"GET / HTTP/1.1"') == 1, server.output


def handshake_refused(server, ctx) -> bool:
    """Whether a TLS client with `ctx` fails to get an answer (TLS 1.3
    reports a refused client certificate on the first read)."""
    try:
        with tls_socket(server, ctx) as s:
            return not get_over(s).startswith(b"HTTP/1.1 200")
    except (ssl.SSLError, ConnectionError):
        return True


def test_mutual_tls_required(serve, pki):
    server = start(serve, "asgi", pki, "--ssl-ca-certs", str(pki.ca_pem), "--ssl-cert-reqs=required")
    assert handshake_refused(server, pki.context()), "served a client without a certificate"
    assert handshake_refused(server, pki.context(pki.stranger)), "served an untrusted certificate"
    with httpx.Client(verify=pki.context(pki.client), base_url=server.url, timeout=10) as client:
        tls = client.get("/").json()["tls"]
    assert len(tls["client_cert_chain"]) >= 1
    assert tls["client_cert_chain"][0] == pki.client.cert_chain_pems[0].bytes().decode()
    assert "O=trustme" in tls["client_cert_name"], tls["client_cert_name"]


def test_mutual_tls_optional(serve, pki):
    server = start(serve, "asgi", pki, "--ssl-ca-certs", str(pki.ca_pem), "--ssl-cert-reqs=optional")
    with httpx.Client(verify=pki.context(), base_url=server.url, timeout=10) as client:
        assert client.get("/").json()["tls"]["client_cert_chain"] == []
    with httpx.Client(verify=pki.context(pki.client), base_url=server.url, timeout=10) as client:
        assert len(client.get("/").json()["tls"]["client_cert_chain"]) >= 1
    assert handshake_refused(server, pki.context(pki.stranger)), "served an untrusted certificate"


@pytest.mark.parametrize("which", ["pkcs8", "encrypted", "pkcs1", "combined"])
def test_key_formats(serve, pki, which):
    flags = {
        "pkcs8": ("--ssl-certfile", str(pki.cert), "--ssl-keyfile", str(pki.key_pkcs8)),
        "encrypted": ("--ssl-certfile", str(pki.cert), "--ssl-keyfile", str(pki.key_encrypted),
                      "--ssl-keyfile-password", PASSWORD),
        "pkcs1": ("--ssl-certfile", str(pki.rsa_cert), "--ssl-keyfile", str(pki.rsa_key)),
        "combined": ("--ssl-certfile", str(pki.combined)),
    }[which]
    server = serve("tls_echo:wsgi", *flags)
    ctx = ssl.create_default_context(cafile=str(pki.rsa_ca_pem if which == "pkcs1" else pki.ca_pem))
    with tls_socket(server, ctx) as s:
        assert get_over(s).startswith(b"HTTP/1.1 200 OK")


def refused_to_start(*flags: str) -> str:
    done = run_m0serve("--port=0", "--app-dir", str(Path(__file__).parent / "apps"), *flags, "tls_echo:wsgi")
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = [l for l in done.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, done.stderr
    assert "listening" not in done.stderr
    return lines[0]


def test_bad_files_exit_2_with_one_line_naming_the_file(pki, tmp_path):
    missing = tmp_path / "missing.pem"
    line = refused_to_start("--ssl-certfile", str(missing), "--ssl-keyfile", str(pki.key))
    assert str(missing) in line and "--ssl-certfile" in line
    junk = pki.path("junk.pem", b"-----BEGIN CERTIFICATE-----\nnot base64 at all!\n-----END CERTIFICATE-----\n")
    line = refused_to_start("--ssl-certfile", str(junk), "--ssl-keyfile", str(pki.key))
    assert str(junk) in line
    line = refused_to_start("--ssl-certfile", str(pki.cert), "--ssl-keyfile", str(pki.rsa_key))
    assert str(pki.rsa_key) in line and "does not match" in line
    line = refused_to_start("--ssl-certfile", str(pki.cert), "--ssl-keyfile", str(pki.key_encrypted))
    assert str(pki.key_encrypted) in line and "password" in line
    line = refused_to_start("--ssl-certfile", str(pki.cert), "--ssl-keyfile", str(pki.key_encrypted),
                            "--ssl-keyfile-password", "wrong")
    assert str(pki.key_encrypted) in line and "wrong password" in line
    line = refused_to_start(*pki.flags("--ssl-cert-reqs=required"))
    assert "--ssl-ca-certs" in line
    line = refused_to_start("--ssl-keyfile", str(pki.key))
    assert "--ssl-certfile" in line
    directory = tmp_path  # unreadable as a file, whoever runs the test (root reads any mode)
    line = refused_to_start("--ssl-certfile", str(directory), "--ssl-keyfile", str(pki.key))
    assert str(directory) in line


def served_leaf(server) -> bytes:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with tls_socket(server, ctx) as s:
        return s.getpeercert(binary_form=True)


def test_sighup_reloads_the_certificate_and_a_broken_one_leaves_the_old_served(serve, pki, tmp_path):
    cert, key = tmp_path / "live-cert.pem", tmp_path / "live-key.pem"
    cert.write_bytes(pki.cert.read_bytes())
    key.write_bytes(pki.key.read_bytes())
    server = serve("tls_echo:wsgi", "--workers=2", "--ssl-certfile", str(cert), "--ssl-keyfile", str(key))
    server.wait_for(r"2 worker\(s\) ready", 20)
    first = served_leaf(server)
    assert first == ssl.PEM_cert_to_DER_cert(pki.leaf_pem)

    renewed = pki.ca.issue_cert("localhost", "127.0.0.1")
    cert.write_bytes(b"".join(b.bytes() for b in renewed.cert_chain_pems))
    key.write_bytes(renewed.private_key_pem.bytes())
    server.proc.send_signal(signal.SIGHUP)
    server.wait_for(r"rolling restart done", 30)
    # The roll is done once the old workers are told to drain; until they
    # have exited, one may still take a connection off the shared listener.
    deadline = time.monotonic() + 30
    while server.output.count(") stopped: ") < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    new = ssl.PEM_cert_to_DER_cert(renewed.cert_chain_pems[0].bytes().decode())
    assert {served_leaf(server) for _ in range(6)} == {new}

    cert.write_bytes(b"garbage\n")
    server.proc.send_signal(signal.SIGHUP)
    server.wait_for(r"rolling restart stopped", 30)
    assert "live-cert.pem" in server.output
    assert {served_leaf(server) for _ in range(6)} == {new}, "the old workers stopped serving"


def test_static_files_and_ranges_over_https(serve, pki, tmp_path):
    """A file body is read and encrypted in chunks (no zero-copy under TLS)."""
    data = bytes(range(256)) * 16384  # 4 MiB
    (tmp_path / "big.bin").write_bytes(data)
    server = serve("tls_echo:wsgi", *pki.flags("--static-path-route=/static", f"--static-path-mount={tmp_path}"))
    with httpx.Client(verify=pki.context(), base_url=server.url, timeout=20) as client:
        whole = client.get("/static/big.bin")
        assert whole.status_code == 200 and whole.content == data
        part = client.get("/static/big.bin", headers={"Range": "bytes=1000000-1999999"})
        assert part.status_code == 206 and part.content == data[1000000:2000000]
        assert client.get("/").json()["scheme"] == "https", "the connection was not kept alive and usable"


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl command")
def test_tls_1_2_renegotiation_is_refused(serve, pki):
    """s_client's `R` asks for a renegotiation: refused with the
    no_renegotiation alert (rustls implements none)."""
    server = start(serve, "wsgi", pki)
    host, port = server.address
    proc = subprocess.Popen(
        ["openssl", "s_client", "-connect", f"{host}:{port}", "-tls1_2"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        time.sleep(1)  # the handshake
        proc.stdin.write(b"R\n")
        proc.stdin.flush()
        time.sleep(1.5)  # the refusal
        proc.stdin.close()
        proc.wait(timeout=10)
        out = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert b"RENEGOTIATING" in out, out.decode(errors="replace")
    assert b"no renegotiation" in out, out.decode(errors="replace")


def test_a_proxy_protocol_preamble_before_the_handshake(serve, interface, pki):
    """AWS NLB's TLS passthrough with the PROXY protocol: the preamble comes in
    the clear, then the ClientHello; the app sees the preamble's client."""
    from test_proxy import v1, v2

    server = start(serve, interface, pki, "--proxy-protocol")
    for preamble, client in ((v1("203.0.113.7", 40123), ["203.0.113.7", 40123]),
                             (v2(), ["198.51.100.4", 5555])):
        raw = server.connect()
        raw.sendall(preamble)
        with pki.context().wrap_socket(raw, server_hostname="localhost") as s:
            head, _, body = get_over(s).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK"), head
        got = json.loads(body)
        assert got["client"] == client and got["scheme"] == "https", got
    # A trusted peer that owes a preamble and sends a ClientHello is closed unanswered.
    assert handshake_refused(server, pki.context())


def test_a_client_resumes_its_session_at_either_worker(serve, pki):
    """The workers seal tickets with keys from one supervisor secret: every
    connection after the first resumes, whichever worker issued its ticket
    (with keys of each worker's own, a ticket from the other one meant a full
    handshake)."""
    server = serve("tls_echo:wsgi", "--workers=2", *pki.flags())
    server.wait_for(r"2 worker\(s\) ready", 20)
    ctx = pki.context()
    session, issuer = None, None
    crossed, resumed = 0, []
    # Each connection stays open to the end: one at a time and closed, they
    # may all go to the worker whose CPU this client leaves idle; held, the
    # workers' connection tally moves the next one to the other worker.
    held = []
    try:
        for _ in range(80):
            s = ctx.wrap_socket(server.connect(), server_hostname="localhost", session=session)
            held.append(s)
            head, _, body = get_kept(s).partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200 OK"), head
            pid = json.loads(body)["pid"]
            if session is not None:
                resumed.append(s.session_reused)
                crossed += pid != issuer
            session, issuer = s.session, pid
            if crossed >= 3:
                break
    finally:
        for s in held:
            s.close()
    # Three crossings end the loop early; one is already the proof.
    assert crossed >= 1, "the connections never moved between the workers: inconclusive"
    assert all(resumed), f"{resumed.count(False)} of {len(resumed)} full handshakes after the first"
