"""Every error in perdure's shape (issue 16, deliverable 3), against a real ``perdure serve``.

The HTTP parser's limits answer with perdure's JSON error body and ``x-rivet-error``
(not uvicorn's plain text), and no message shows Python internals.
"""

from __future__ import annotations

import json
import socket

import cbor2

from tests.support.server import ServerProcess

from .values_support import (
    error_of,
    exists,
    new_key,
    post,
)


def _raw(values_server: ServerProcess, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send ``request`` on a fresh connection; the status, headers and body."""
    with socket.create_connection(("127.0.0.1", values_server.port), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


def _perdure_error(headers: dict[str, str], body: bytes) -> dict[str, object]:
    assert headers["content-type"] == "application/json", headers
    assert int(headers["content-length"]) == len(body)
    error = json.loads(body)
    assert headers["x-rivet-error"] == f"{error['group']}.{error['code']}"
    return error  # type: ignore[no-any-return]


def test_a_url_over_the_limit_is_414_in_perdures_shape(values_server: ServerProcess) -> None:
    target = b"/gateway/box/action/get?rvt-key=" + b"a" * 70_000
    status, headers, body = _raw(values_server, b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 414
    error = _perdure_error(headers, body)
    assert (error["group"], error["code"]) == ("request", "uri_too_long")
    assert error["metadata"] == {"limit": 65536}


def test_headers_over_the_limit_are_431_in_perdures_shape(values_server: ServerProcess) -> None:
    one_big = b"X-Big: " + b"a" * 70_000 + b"\r\n"
    many = b"".join(b"X-%d: a\r\n" % i for i in range(300))
    for extra in (one_big, many):
        request = b"GET /health HTTP/1.1\r\nHost: x\r\n" + extra + b"\r\n"
        status, headers, body = _raw(values_server, request)
        assert status == 431
        error = _perdure_error(headers, body)
        assert (error["group"], error["code"]) == ("request", "headers_too_large")


def test_a_websocket_upgrade_with_huge_headers_is_refused_the_same_way(
    values_server: ServerProcess,
) -> None:
    request = (
        b"GET /gateway/box/connect HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
        b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n"
    )
    status, headers, body = _raw(values_server, request)
    assert status == 431
    assert _perdure_error(headers, body)["code"] == "headers_too_large"


def test_an_unparsable_request_is_400_in_perdures_shape(values_server: ServerProcess) -> None:
    status, headers, body = _raw(values_server, b"NOT HTTP AT ALL\r\n\r\n")
    assert status == 400
    error = _perdure_error(headers, body)
    assert (error["group"], error["code"]) == ("request", "malformed")


def test_requests_within_the_limits_are_served(values_server: ServerProcess) -> None:
    target = b"/health?pad=" + b"a" * 60_000
    headers = b"".join(b"X-%d: %s\r\n" % (i, b"b" * 200) for i in range(200))
    request = (
        b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n" + headers + b"Connection: close\r\n\r\n"
    )
    status, _headers, body = _raw(values_server, request)
    assert status == 200, body[:200]


INTERNALS = (b"sys.", b"Errno", b"recursion", b"Traceback", b"set_int_max_str_digits")


def test_decoding_errors_show_no_python_internals(values_server: ServerProcess) -> None:
    key = new_key()
    cases = [
        ("json", b'{"args":[' + b"9" * 5000 + b"]}"),
        ("json", b'{"args":' + b"[" * 3000 + b"]" * 3000 + b"}"),
        ("cbor", cbor2.dumps({"args": [cbor2.CBORTag(1, 2**62)]})),  # epoch far past year 9999
        ("cbor", cbor2.dumps({"args": [cbor2.CBORTag(1, float("inf"))]})),
        ("cbor", cbor2.dumps({"args": [cbor2.CBORTag(0, "not a date")]})),
        ("cbor", b"\xa1\x64args\x81\xd9\x01\x02\x81\x80"),  # a set holding an array
        ("cbor", b"\xa1\x64args\x81\x9a\x10\x00\x00\x00"),  # 268 M elements announced, none sent
    ]
    for enc, body in cases:
        response = post(values_server, "put", key, body, enc)
        assert response.status_code == 400, (body[:40], response.content[:300])
        for internal in INTERNALS:
            assert internal not in response.content, (body[:40], response.content)
        error = error_of(response) if enc == "json" else cbor2.loads(response.content)
        assert error["group"] == "actor", error
        assert error["code"] in ("invalid_request", "unsupported_value"), error
    assert not exists(values_server, key)


def test_an_unknown_route_with_undecodable_bytes_still_gets_perdures_error(
    values_server: ServerProcess,
) -> None:
    """A path whose percent-escapes are not UTF-8, and a long one: the 404 body still
    encodes (no 500), and the path it quotes is bounded."""
    status, headers, body = _raw(
        values_server,
        b"GET /nowhere/%ff%fe" + b"a" * 4000 + b" HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    assert status == 404
    error = _perdure_error(headers, body)
    assert error["code"] == "route_not_found"
    assert len(str(error["message"])) < 600


async def test_the_not_found_handler_survives_lone_surrogates() -> None:
    """Other ASGI servers may decode a path with surrogate escapes: the message quotes it
    readable (replacement characters, not escapes) and bounded (called directly, as
    Starlette would)."""
    from starlette.exceptions import HTTPException
    from starlette.requests import Request

    from perdure.server.app import _http_exception

    scope = {
        "type": "http",
        "method": "GET",
        "path": "/x\udcff" + "a" * 1000,
        "raw_path": b"/x%ff",
        "query_string": b"",
        "headers": [],
    }
    response = await _http_exception(Request(scope), HTTPException(404))
    assert response.status_code == 404
    error = json.loads(bytes(response.body))
    assert error["code"] == "route_not_found"
    assert "\udcff" not in error["message"]
    assert len(error["message"]) < 600
