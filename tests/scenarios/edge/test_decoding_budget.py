"""Bounded decoding (issue 16, deliverable 1), against a real ``perdure serve``.

Each defect the adversary suite found is provoked here: CBOR string references (tags 25
and 256) that expand a small request into tens of megabytes (and a 1 MB one into a 4 GB
response that aborted the process), in CBOR and in BARE (which nests CBOR), over HTTP
and WebSocket; nesting and element counts over budget; and an answer far over the
outgoing limit, refused before any encoder runs.
"""

from __future__ import annotations

import time

import cbor2
import httpx

from perdure.protocol.messages import ActionResponse, ErrorMessage
from tests.support.server import ServerProcess

from .values_support import (
    call,
    error_of,
    exists,
    new_key,
    next_message,
    open_socket,
    post,
    refused_with,
)

# One 2,000-byte string and 10,000 references to it: 32 KB on the wire, 20 MB decoded.
STRING = "s" * 2000
REFERENCES = 10_000


def _expanding_value() -> cbor2.CBORTag:
    return cbor2.CBORTag(256, [STRING, *[cbor2.CBORTag(25, 0)] * REFERENCES])


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _bare_action_body(args_cbor: bytes) -> bytes:
    return b"\x04\x00" + _varint(len(args_cbor)) + args_cbor


def _refused_as_tag(response: httpx.Response, tag: int) -> None:
    assert response.status_code == 400, response.text[:300]
    assert response.headers["content-type"] == "application/json"
    body = error_of(response)
    assert (body["group"], body["code"]) == ("actor", "invalid_request"), body
    assert f"CBOR tag {tag} is not accepted" in body["message"], body


def test_string_references_over_http_cbor_are_refused(values_server: ServerProcess) -> None:
    key = new_key()
    body = cbor2.dumps({"args": [_expanding_value()]})
    assert len(body) < 40_000
    response = post(values_server, "put", key, body, "cbor")
    assert response.status_code == 400, response.content[:200]
    decoded = cbor2.loads(response.content)
    assert decoded["code"] == "invalid_request"
    assert "CBOR tag 25 is not accepted" in decoded["message"]
    assert not exists(values_server, key)


def test_string_references_over_http_bare_are_refused(values_server: ServerProcess) -> None:
    key = new_key()
    response = post(
        values_server, "put", key, _bare_action_body(cbor2.dumps([_expanding_value()])), "bare"
    )
    assert response.status_code == 400, response.content[:200]
    assert response.headers["x-rivet-error"] == "actor.invalid_request"
    assert not exists(values_server, key)


def test_a_bare_reference_alone_is_refused(values_server: ServerProcess) -> None:
    # Tag 25 outside a namespace, and shared references (28/29): refused by number.
    cases = (
        (25, cbor2.CBORTag(25, 0)),
        (256, cbor2.CBORTag(256, ["abc"])),
        (28, cbor2.CBORTag(28, [1])),
    )
    for tag, value in cases:
        response = post(values_server, "put", new_key(), cbor2.dumps({"args": [value]}), "cbor")
        assert response.status_code == 400
        assert f"CBOR tag {tag} is not accepted" in cbor2.loads(response.content)["message"]


async def test_string_references_in_websocket_frames_are_refused(
    values_server: ServerProcess,
) -> None:
    key = new_key()
    cbor_frame = cbor2.dumps(
        {
            "body": {
                "tag": "ActionRequest",
                "val": {"id": 0, "name": "put", "args": [_expanding_value()]},
            }
        }
    )
    args = cbor2.dumps([_expanding_value()])
    bare_frame = b"\x04\x00\x00\x00\x03put" + _varint(len(args)) + args
    for enc, frame in (("cbor", cbor_frame), ("bare", bare_frame)):
        assert len(frame) < 40_000
        ws = await open_socket(values_server, key, enc)
        started = time.monotonic()
        await ws.send(frame)
        error, code, reason = await refused_with(ws, enc)
        assert time.monotonic() - started < 2.0
        assert (error.code, error.action_id) == ("invalid_request", None)
        assert "CBOR tag 25 is not accepted" in error.message
        assert (code, reason) == (1011, "actor.invalid_request")
    # The connections created the actor, but nothing was stored.
    assert call(values_server, "get", key, []).json() == {"output": None}


def test_nesting_over_budget_is_refused_with_a_plain_message(values_server: ServerProcess) -> None:
    key = new_key()
    deep_json = b'{"args":[' + b"[" * 5000 + b"]" * 5000 + b"]}"
    deep_cbor = b"\xa1\x64args\x81" + b"\x81" * 1000 + b"\x01"
    for enc, body in (("json", deep_json), ("cbor", deep_cbor)):
        response = post(values_server, "put", key, body, enc)
        assert response.status_code == 400, response.content[:200]
        assert response.headers["x-rivet-error"] == "actor.invalid_request"
        assert b"recursion" not in response.content
        assert b"nest" in response.content
    assert not exists(values_server, key)


def test_element_count_over_budget_is_413(values_server: ServerProcess) -> None:
    key = new_key()
    body = b'{"args":[[' + b",".join([b"0"] * 1_000_001) + b"]]}"
    response = post(values_server, "put", key, body)
    assert response.status_code == 413, response.text[:300]
    error = error_of(response)
    assert (error["group"], error["code"]) == ("actor", "value_too_large")
    assert error["metadata"] == {"path": "args[0]"}
    assert not exists(values_server, key)


def test_an_answer_far_over_the_limit_is_refused_before_encoding(
    values_server: ServerProcess,
) -> None:
    # 4 million references to one 1 KB string: a 4 GB response if it were encoded.
    started = time.monotonic()
    response = call(values_server, "big", new_key(), ["x" * 1024, 4_000_000], "cbor")
    assert time.monotonic() - started < 5.0
    assert response.status_code == 400
    assert response.headers["x-rivet-error"] == "message.outgoing_too_long"
    # An HTTP answer is bounded by max_outgoing_message_size, as a frame (values_app's).
    assert cbor2.loads(response.content)["metadata"] == {"limit": 262144}
    with httpx.Client(timeout=5) as client:
        assert client.get(f"{values_server.url}/health").status_code == 200


async def test_a_frame_far_over_the_limit_is_refused_before_encoding(
    values_server: ServerProcess,
) -> None:
    ws = await open_socket(values_server, new_key(), "json")
    frame = (
        '{"body":{"tag":"ActionRequest","val":'
        '{"id":["$BigInt","7"],"name":"big","args":["%s",4000000]}}}'
    )
    await ws.send(frame % ("x" * 1024))
    answer = await next_message(ws, "json")
    assert isinstance(answer, ErrorMessage), answer
    assert (answer.code, answer.action_id) == ("outgoing_too_long", 7)
    # The connection stays usable.
    await ws.send(frame.replace('"7"', '"8"').replace("4000000", "2") % "y")
    again = await next_message(ws, "json")
    assert again == ActionResponse(8, ["y", "y"])
    await ws.close()
