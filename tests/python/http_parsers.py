"""Three HTTP/1.1 request parsers behind one interface, for the differential
test: m0serve's own (``ServerConn``, through examples/parse_requests.rs), h11
and llhttp (the ``httptools`` package).

Each turns an input (all the bytes a client sent on one connection) into a
``Parsed``: the requests read, in order, and how the input ended. Every
complete request is answered before the next is read, as a server does, so
pipelined requests show where each parser thinks the next one starts.

What the parsers report differently without meaning anything different is
normalized here, so a difference left is one of substance:
- header names are compared lowercased (RFC 9110 §5.1: case-insensitive);
- field values without leading and trailing SP/HTAB (RFC 9110 §5.5: that
  whitespace is not part of the value; llhttp keeps the trailing one);
- Transfer-Encoding values lowercased (RFC 9112 §7: coding names are
  case-insensitive; h11 reports them lowercased);
- a version ``HTTP/1.x`` with x > 1 as ``1.1`` (RFC 9110 §2.5: served as the
  highest minor version the recipient supports, which m0serve reports);
- an absolute-form target as its origin-form, with its authority as the
  Host field's value (RFC 9112 §3.2.2: the server MUST use the target's
  authority and ignore Host; m0serve hands the application that request).
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import h11
import httptools

REPO = Path(__file__).resolve().parents[2]
PARSE_REQUESTS = REPO / "target" / "debug" / "examples" / "parse_requests"

# How an input ended, after the requests it held:
ERROR = "error"  # refused (m0serve: with `status`)
CLOSED = "closed"  # a request ended the connection; what follows is not read
INCOMPLETE = "incomplete"  # waiting for more bytes
IDLE = "idle"  # everything read, between requests
UPGRADE = "upgrade"  # llhttp only: the connection would leave HTTP/1.1 here
CRASH = "crash"  # the parser's process died (m0serve only)

Header = Tuple[bytes, bytes]


@dataclass
class Request:
    method: bytes
    target: bytes
    version: bytes
    headers: List[Header]
    body: bytes = b""
    complete: bool = False


@dataclass
class Parsed:
    requests: List[Request] = field(default_factory=list)
    outcome: str = IDLE
    # m0serve: the status and reason of a refusal; others: their error message.
    status: Optional[int] = None
    reason: str = ""
    # m0serve: feeding the input a byte at a time gave another result.
    split_differs: bool = False


def header(name: bytes, value: bytes) -> Header:
    name, value = name.lower(), value.strip(b" \t")
    if name == b"transfer-encoding":
        value = value.lower()  # h11 lowercases it
    return (name, value)


ABSOLUTE = re.compile(rb"(?i)https?://([^/?]*)(.*)", re.DOTALL)


def request(method: bytes, target: bytes, version: bytes, headers: List[Header]) -> Request:
    """Another parser's request head, normalized (see the module docs)."""
    absolute = ABSOLUTE.fullmatch(target)
    if absolute:
        authority, target = absolute.group(1), absolute.group(2) or b"/"
        hosts = [i for i, (n, _) in enumerate(headers) if n == b"host"]
        if hosts:
            headers[hosts[0]] = (b"host", authority)
        else:
            headers.append((b"host", authority))
    return Request(method=method, target=target, version=normalize_version(version), headers=headers)


def normalize_version(raw: bytes) -> bytes:
    return b"1.1" if re.fullmatch(rb"1\.[1-9]", raw) else raw


# --- m0serve ---------------------------------------------------------------


def m0serve_parse(inputs: Sequence[bytes], program: Path = PARSE_REQUESTS) -> List[Parsed]:
    """All `inputs` through one parse_requests process; where it dies, the
    input it died on is a CRASH and a new process goes on with the next."""
    results: List[Parsed] = []
    while len(results) < len(inputs):
        rest = inputs[len(results) :]
        stdin = b"".join(base64.b64encode(data) + b"\n" for data in rest)
        proc = subprocess.run(
            [str(program)],
            input=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=300,
        )
        lines = proc.stdout.splitlines()
        results.extend(_m0serve_result(json.loads(line)) for line in lines)
        if len(lines) < len(rest):
            tail = proc.stderr.decode("utf-8", "replace")[-400:]
            results.append(Parsed(outcome=CRASH, reason=f"exit {proc.returncode}: {tail}"))
        elif proc.returncode != 0:
            raise AssertionError(f"parse_requests exited {proc.returncode}: {proc.stderr[-400:]!r}")
    return results


def _m0serve_result(doc: dict) -> Parsed:
    b64 = base64.b64decode
    requests = [
        Request(
            method=b64(r["method"]),
            target=b64(r["target"]),
            version=r["version"].encode(),
            headers=[header(b64(n), b64(v)) for n, v in r["headers"]],
            body=b64(r["body"]),
            complete=r["complete"],
        )
        for r in doc["requests"]
    ]
    return Parsed(
        requests=requests,
        outcome=doc["outcome"],
        status=doc["status"],
        reason=doc["reason"] or "",
        split_differs=doc["split_differs"],
    )


def m0serve_program() -> Optional[Path]:
    """The parse_requests program, if it was built (`cargo build --examples`)."""
    override = os.environ.get("M0_PARSE_REQUESTS")
    program = Path(override) if override else PARSE_REQUESTS
    return program if program.exists() else None


# --- h11 -------------------------------------------------------------------


def h11_parse(data: bytes) -> Parsed:
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(data)
    parsed = Parsed()
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError as e:
            parsed.outcome, parsed.reason = ERROR, str(e)
            return parsed
        if isinstance(event, h11.Request):
            parsed.requests.append(
                request(
                    bytes(event.method),
                    bytes(event.target),
                    bytes(event.http_version),
                    [header(bytes(n), bytes(v)) for n, v in event.headers.raw_items()],
                )
            )
        elif isinstance(event, h11.Data):
            parsed.requests[-1].body += bytes(event.data)
        elif isinstance(event, h11.EndOfMessage):
            parsed.requests[-1].complete = True
            # Not 2xx: h11 takes a 2xx to CONNECT as the switch to a tunnel.
            conn.send(h11.Response(status_code=404, headers=[("Content-Length", "0")]))
            conn.send(h11.EndOfMessage())
            if conn.our_state is h11.MUST_CLOSE:
                parsed.outcome = CLOSED
                return parsed
            conn.start_next_cycle()
        elif event is h11.NEED_DATA:
            idle = conn.their_state is h11.IDLE and not conn.trailing_data[0]
            parsed.outcome = IDLE if idle else INCOMPLETE
            return parsed
        else:
            raise AssertionError(f"h11: unexpected {event!r} in {conn.states}")


# --- llhttp (httptools) ----------------------------------------------------


class _Llhttp:
    """httptools' callbacks, collecting a Parsed."""

    def __init__(self) -> None:
        self.parser = httptools.HttpRequestParser(self)
        self.parsed = Parsed()
        self.url = b""
        self.headers: List[Header] = []
        self.in_message = self.in_head = False
        self.keep_alive = True

    def on_message_begin(self) -> None:
        self.url, self.headers, self.in_message, self.in_head = b"", [], True, True

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        # After the head, these are trailer fields: dropped, as m0serve and h11 do.
        if self.in_head:
            self.headers.append(header(name, value))

    def on_headers_complete(self) -> None:
        self.in_head = False
        self.parsed.requests.append(
            request(self.parser.get_method(), self.url, self.parser.get_http_version().encode(), self.headers)
        )

    def on_body(self, body: bytes) -> None:
        self.parsed.requests[-1].body += body

    def on_message_complete(self) -> None:
        self.parsed.requests[-1].complete = True
        self.in_message = False
        self.keep_alive = self.parser.should_keep_alive()


def llhttp_parse(data: bytes) -> Parsed:
    p = _Llhttp()
    parsed = p.parsed
    try:
        p.parser.feed_data(data)
        parsed.outcome = INCOMPLETE if p.in_message else IDLE
    except httptools.HttpParserUpgrade:
        parsed.outcome = UPGRADE
    except httptools.HttpParserError as e:
        parsed.outcome, parsed.reason = ERROR, str(e)
    if not p.keep_alive and parsed.requests and parsed.requests[-1].complete:
        # llhttp refuses the bytes after a closing request; the others leave them unread.
        parsed.outcome, parsed.reason = CLOSED, ""
    return parsed


# --- comparing -------------------------------------------------------------


@dataclass
class Difference:
    """How another parser's reading of an input differs from m0serve's.

    `kind` is one of: ``m0serve refuses`` (m0serve refused request `index`,
    which the other read, or is still reading), ``m0serve accepts`` (the
    reverse), ``ends`` (both read the same requests but disagree on how the
    input ends: idle, incomplete, closed), or a field name (both read request
    `index`, with another method, target, version, headers, body or
    completeness)."""

    kind: str
    index: int = 0


HEAD_FIELDS = ("method", "target", "version", "headers")


def refused_at(p: Parsed) -> Optional[int]:
    """The index of the request a parser refused (its head or its body)."""
    if p.outcome != ERROR:
        return None
    if p.requests and not p.requests[-1].complete:
        return len(p.requests) - 1
    return len(p.requests)


def compare(m0: Parsed, other: Parsed) -> Optional[Difference]:
    """The first way `other` differs from `m0`, or None. Where llhttp stops at
    an upgrade, the requests up to its head are compared."""
    mine, theirs = m0.requests, other.requests
    r0, r1 = refused_at(m0), refused_at(other)
    if other.outcome == UPGRADE:
        n = len(theirs)
        if r0 is not None and r0 < n:
            return Difference("m0serve refuses", r0)
        mine = mine[:n]
    for i, (a, b) in enumerate(zip(mine, theirs)):
        fields = HEAD_FIELDS
        if i not in (r0, r1) and not (other.outcome == UPGRADE and i == len(theirs) - 1):
            fields += ("body", "complete")
        for name in fields:
            if getattr(a, name) != getattr(b, name):
                return Difference(name, i)
    if other.outcome == UPGRADE:
        return None
    if r0 is not None and (r1 is None or r0 < r1):
        return Difference("m0serve refuses", r0)
    if r1 is not None and (r0 is None or r1 < r0):
        return Difference("m0serve accepts", r1)
    if r0 is None and (len(mine) != len(theirs) or m0.outcome != other.outcome):
        return Difference("ends", min(len(mine), len(theirs)))
    return None
