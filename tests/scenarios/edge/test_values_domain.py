"""Only values that round-trip (issue 16, deliverable 2), against a real ``perdure serve``.

A value is accepted only if perdure can send it back in JSON, CBOR and BARE; anything
else is refused with 400 naming where it sits, before the actor is created. A value
actor code stored that cannot be sent gets ``message.value_not_sendable``, not a 500,
also after a restart.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import ipaddress
import uuid
from typing import Any

import cbor2
import httpx
import pytest

from perdure.protocol.codec import decode_http
from perdure.protocol.messages import ActionResponse, ErrorMessage, HttpActionResponse
from tests.support.server import ServerProcess

from .values_support import (
    action_url,
    call,
    error_of,
    exists,
    new_key,
    next_message,
    open_socket,
    post,
)

JSON_REFUSED = [
    # (body, path in the message): JSON parses these, no encoding can send them back.
    (b'{"args":[1e400]}', "args[0]"),
    (b'{"args":[{"items":[1,2,3,-1e400]}]}', "args[0].items[3]"),
    # 10**4290: within the `$BigInt` text limit (4,300 digits), beyond 2**14240.
    (b'{"args":[["$BigInt","1' + b"0" * 4290 + b'"]]}', "args[0]"),
    (b'{"args":[1,{"a b":["\\ud800"]}]}', "args[1]['a b'][0]"),
]


@pytest.mark.parametrize(("body", "path"), JSON_REFUSED)
def test_json_values_that_cannot_go_back_are_refused(
    values_server: ServerProcess, body: bytes, path: str
) -> None:
    key = new_key()
    response = post(values_server, "put", key, body)
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert (error["group"], error["code"]) == ("actor", "unsupported_value"), error
    assert error["message"].startswith(f"Invalid {path}: "), error
    assert error["metadata"] == {"path": path}
    assert not exists(values_server, key)


def test_a_huge_json_integer_is_refused_without_python_internals(
    values_server: ServerProcess,
) -> None:
    key = new_key()
    response = post(values_server, "put", key, b'{"args":[' + b"7" * 100_000 + b"]}")
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "invalid_request"
    assert "more than 4300 digits" in error["message"]
    assert "sys." not in error["message"]
    assert not exists(values_server, key)


CBOR_REFUSED_TAGS: list[tuple[Any, int]] = [
    (uuid.UUID("12345678-1234-5678-1234-567812345678"), 37),
    (decimal.Decimal("1.5"), 4),
    (ipaddress.IPv4Address("127.0.0.1"), 52),
    (cbor2.CBORTag(9999, 1), 9999),
    (cbor2.CBORTag(2, b"\xff" * 100_000), 2),  # a 240,000-digit bignum
]


@pytest.mark.parametrize(("value", "tag"), CBOR_REFUSED_TAGS, ids=lambda v: type(v).__name__)
def test_cbor_tags_outside_the_domain_are_refused(
    values_server: ServerProcess, value: Any, tag: int
) -> None:
    key = new_key()
    response = post(values_server, "put", key, cbor2.dumps({"args": [value]}), "cbor")
    assert response.status_code == 400, response.content[:200]
    error = cbor2.loads(response.content)
    assert error["code"] == "invalid_request"
    assert f"CBOR tag {tag}" in error["message"] or "bignum" in error["message"], error
    assert not exists(values_server, key)


CBOR_REFUSED_VALUES: list[tuple[bytes, str]] = [
    (cbor2.dumps({"args": [cbor2.CBORSimpleValue(16)]}), "args[0]"),
    (cbor2.dumps({"args": [{"x": [float("nan")]}]}), "args[0].x[0]"),
    (cbor2.dumps({"args": [[float("inf")]]}), "args[0][0]"),
    (cbor2.dumps({"args": [{1: "int key"}]}), "args[0][1]"),
    # (A CBOR integer beyond the domain cannot arrive: the decoder takes bignums of at
    # most 1,780 bytes, which is the domain's bound; CBOR_REFUSED_TAGS tries a larger one.)
]


@pytest.mark.parametrize(("body", "path"), CBOR_REFUSED_VALUES)
@pytest.mark.parametrize("enc", ["cbor", "bare"])
def test_cbor_and_bare_values_outside_the_domain_name_their_path(
    values_server: ServerProcess, body: bytes, path: str, enc: str
) -> None:
    key = new_key()
    if enc == "bare":  # the same args, nested as CBOR in a BARE HttpActionRequest
        args = cbor2.dumps(cbor2.loads(body)["args"])
        body = b"\x04\x00" + _varint(len(args)) + args
    response = post(values_server, "put", key, body, enc)
    assert response.status_code == 400, response.content[:200]
    assert response.headers["x-rivet-error"] == "actor.unsupported_value"
    assert not exists(values_server, key)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    return bytes([*out, value])


ROUND_TRIP = {
    "big": [2**1000, -(2**1000), 2**64, -(2**63)],
    "float": 1.5,
    "bytes": b"\x00\xff",
    "set": {1, "a"},
    "text": "héllo ✓",
    "when": dt.datetime(2026, 12, 3, 10, 0, tzinfo=dt.UTC),
    "nested": {"a": [None, True, {"b": []}]},
}


@pytest.mark.parametrize("enc", ["json", "cbor", "bare"])
def test_values_in_the_domain_round_trip(values_server: ServerProcess, enc: str) -> None:
    key = new_key()
    assert call(values_server, "put", key, [ROUND_TRIP], enc).status_code == 200
    for read in ("json", "cbor", "bare"):
        response = call(values_server, "get", key, [], read)
        assert response.status_code == 200, response.content[:200]
        output = decode_http(response.content, read, HttpActionResponse).output
        expected = dict(ROUND_TRIP)
        if "json" in (enc, read):  # JSON carries a datetime as its ISO text
            expected["when"] = "2026-12-03T10:00:00.000Z"
        assert output == expected


def test_a_stored_value_that_cannot_be_sent_is_a_coded_error(
    values_server: ServerProcess,
) -> None:
    key = new_key()
    assert call(values_server, "poison", key, []).status_code == 200
    for attempt in ("before", "after"):
        if attempt == "after":
            values_server.kill()
            values_server.start()
        response = call(values_server, "get", key, [])
        assert response.status_code == 400, (attempt, response.text)
        error = error_of(response)
        assert (error["group"], error["code"]) == ("message", "value_not_sendable"), error
        assert "output" in error["message"]


def test_an_actor_input_outside_the_domain_is_refused(values_server: ServerProcess) -> None:
    key = new_key()
    encoded = base64.urlsafe_b64encode(cbor2.dumps({"limit": float("inf")})).decode().rstrip("=")
    url = action_url(values_server, "get", key) + "&rvt-input=" + encoded
    with httpx.Client(timeout=10) as client:
        response = client.post(url, json={"args": []})
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert error["code"] == "invalid_input"
    assert error["message"].startswith("Invalid input.limit: "), error
    assert not exists(values_server, key)


def test_connection_params_outside_the_domain_are_refused(values_server: ServerProcess) -> None:
    key = new_key()
    with httpx.Client(timeout=10) as client:
        response = client.post(
            action_url(values_server, "get", key),
            json={"args": []},
            headers={"x-rivet-conn-params": '{"n": [1e400]}'},
        )
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert error["code"] == "invalid_conn_params"
    assert error["message"].startswith("Invalid params.n[0]: "), error
    assert not exists(values_server, key)


async def test_over_a_websocket_an_unsendable_value_is_a_coded_error(
    values_server: ServerProcess,
) -> None:
    key = new_key()
    assert call(values_server, "poison", key, []).status_code == 200
    ws = await open_socket(values_server, key, "json")
    await ws.send('{"body":{"tag":"ActionRequest","val":{"id":1,"name":"get","args":[]}}}')
    answer = await next_message(ws, "json")
    assert isinstance(answer, ErrorMessage), answer
    assert (answer.group, answer.code, answer.action_id) == ("message", "value_not_sendable", 1)
    await ws.send('{"body":{"tag":"ActionRequest","val":{"id":2,"name":"echo","args":[5]}}}')
    assert await next_message(ws, "json") == ActionResponse(2, 5)  # the socket stays usable
    await ws.close()
