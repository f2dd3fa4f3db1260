"""The official client's real traffic (rivetkit 2.3.19) decodes, and we re-encode it.

The frames below are copied from the captures of the official client talking to the
original server (``rivetkit-wire-json.jsonl`` and ``rivetkit-wire-bare.jsonl`` in the
shared reference material). JSON captures were recorded as parsed objects, so they are
compared as objects. BARE captures are bytes: every frame is first taken apart by hand
here, independently of the implementation, then our encoder must reproduce the framing
byte for byte. Nested CBOR user values may differ in bytes only (cbor-x writes every
map with a 2-byte length, ``b9 00 02``; cbor2 writes the short form) and must decode to
the same value.
"""

from __future__ import annotations

import json
from typing import Any

import cbor2
import pytest

from perdure.protocol import (
    ActionRequest,
    ActionResponse,
    ActorInfo,
    Event,
    HttpActionRequest,
    HttpActionResponse,
    HttpQueueSendRequest,
    HttpQueueSendResponse,
    HttpResponseError,
    Init,
    SubscriptionRequest,
    decode_http,
    decode_to_client,
    decode_to_server,
    encode_http,
    encode_to_client,
    encode_to_server,
)

ACTOR_ID = "92v7a5sjpa02lfx50qrp7niqgwcl00"
CONN_ID = "df8a06fc-cc69-4b09-ac74-ab49f65311e3"

# -- JSON -------------------------------------------------------------------------------


def _same_json(encoded: str | bytes, expected: dict[str, Any]) -> None:
    assert json.loads(encoded) == expected


def test_json_http_action_request_and_response() -> None:
    request: dict[str, Any] = {"args": []}
    assert decode_http(json.dumps(request).encode(), "json", HttpActionRequest) == (
        HttpActionRequest(args=[])
    )
    _same_json(encode_http(HttpActionRequest(args=[]), "json"), request)

    response = {
        "output": {"progress": {"completed": 1, "stage": "completed", "total": 1}, "sum": 7}
    }
    message = decode_http(json.dumps(response).encode(), "json", HttpActionResponse)
    assert message == HttpActionResponse(output=response["output"])
    _same_json(encode_http(message, "json"), response)


def test_json_init_and_subscription_frames() -> None:
    init = {
        "body": {
            "tag": "Init",
            "val": {
                "actorId": "147sim00bd6bjtztoitck7jt1zbl00",
                "connectionId": "46ab9332-9367-4b10-8b7e-3ae6edcf02b7",
            },
        }
    }
    message = decode_to_client(json.dumps(init), "json")
    assert message == Init("147sim00bd6bjtztoitck7jt1zbl00", "46ab9332-9367-4b10-8b7e-3ae6edcf02b7")
    encoded = encode_to_client(message, "json")
    assert isinstance(encoded, str)  # a text frame
    _same_json(encoded, init)

    subscribe = {
        "body": {
            "tag": "SubscriptionRequest",
            "val": {"eventName": "progressUpdated", "subscribe": True},
        }
    }
    request = decode_to_server(json.dumps(subscribe), "json")
    assert request == SubscriptionRequest("progressUpdated", subscribe=True)
    _same_json(encode_to_server(request, "json"), subscribe)


def test_json_action_request_and_response_use_bigint_ids() -> None:
    # seq 46/47: the official client sends the id as ["$BigInt", "0"], the server echoes it.
    request = {
        "body": {
            "tag": "ActionRequest",
            "val": {"id": ["$BigInt", "0"], "name": "getState", "args": []},
        }
    }
    message = decode_to_server(json.dumps(request), "json")
    assert message == ActionRequest(id=0, name="getState", args=[])
    _same_json(encode_to_server(message, "json"), request)

    output = {"progress": {"completed": 1, "stage": "completed", "total": 1}, "sum": 2}
    response = {
        "body": {"tag": "ActionResponse", "val": {"id": ["$BigInt", "0"], "output": output}}
    }
    answer = decode_to_client(json.dumps(response), "json")
    assert answer == ActionResponse(id=0, output=output)
    _same_json(encode_to_client(answer, "json"), response)


def test_json_event_frames() -> None:
    for args in (
        [{"completed": 0, "stage": "running", "total": 1}],
        [{"completed": 1, "stage": "completed", "total": 1}],
    ):
        frame = {"body": {"tag": "Event", "val": {"args": args, "name": "progressUpdated"}}}
        message = decode_to_client(json.dumps(frame), "json")
        assert message == Event("progressUpdated", args)
        _same_json(encode_to_client(message, "json"), frame)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"body": {"value": 7}, "name": "jobs", "wait": False},
            HttpQueueSendRequest(body={"value": 7}, name="jobs", wait=False),
        ),
        (
            {"body": {"value": 2}, "name": "jobs", "wait": True, "timeout": 2000},
            HttpQueueSendRequest(body={"value": 2}, name="jobs", wait=True, timeout=2000),
        ),
    ],
)
def test_json_queue_send_request(body: dict[str, Any], expected: HttpQueueSendRequest) -> None:
    assert decode_http(json.dumps(body).encode(), "json", HttpQueueSendRequest) == expected
    _same_json(encode_http(expected, "json"), body)


@pytest.mark.parametrize("status", ["completed", "timedOut"])
def test_json_queue_send_response(status: str) -> None:
    body = {"status": status}
    message = decode_http(json.dumps(body).encode(), "json", HttpQueueSendResponse)
    assert message == HttpQueueSendResponse(status=status)
    _same_json(encode_http(message, "json"), body)


def test_json_error_bodies() -> None:
    not_found = {
        "group": "actor",
        "code": "not_found",
        "message": "The actor does not exist or was destroyed.",
    }
    message = decode_http(json.dumps(not_found).encode(), "json", HttpResponseError)
    assert message == HttpResponseError("actor", "not_found", not_found["message"])
    _same_json(encode_http(message, "json"), not_found)

    with_actor = {
        "actor": {
            "actorId": "1g0v9fxs1ewg4otry1e0fzznhgcl00",
            "generation": 1,
            "key": "tenant-1/a\\/b/c",
        },
        "code": "action_not_found",
        "group": "actor",
        "message": "Action `nope` was not found.",
    }
    message = decode_http(json.dumps(with_actor).encode(), "json", HttpResponseError)
    assert message == HttpResponseError(
        "actor",
        "action_not_found",
        "Action `nope` was not found.",
        actor=ActorInfo("1g0v9fxs1ewg4otry1e0fzznhgcl00", 1, "tenant-1/a\\/b/c"),
    )
    _same_json(encode_http(message, "json"), with_actor)


# -- BARE -------------------------------------------------------------------------------


class Cursor:
    """A by-hand BARE reader for the tests (single-byte varints are all the captures use)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        value = self.data[self.pos]
        self.pos += 1
        return value

    def take(self, count: int) -> bytes:
        chunk = self.data[self.pos : self.pos + count]
        assert len(chunk) == count
        self.pos += count
        return chunk

    def sized(self) -> bytes:
        length = self.byte()
        assert length < 0x80, "the captures only use one-byte lengths"
        return self.take(length)

    def done(self) -> None:
        assert self.pos == len(self.data)


def _version(cursor: Cursor) -> None:
    assert cursor.take(2) == b"\x04\x00"  # vbare: protocol version 4, little-endian u16


def test_bare_http_action_request_is_exact() -> None:
    capture = bytes.fromhex("04000180")
    cursor = Cursor(capture)
    _version(cursor)
    assert cursor.sized() == b"\x80"  # args: data(cbor([]))
    cursor.done()

    assert decode_http(capture, "bare", HttpActionRequest) == HttpActionRequest(args=[])
    assert encode_http(HttpActionRequest(args=[]), "bare") == capture


def test_bare_init_frame_is_exact() -> None:
    capture = bytes.fromhex(
        "0400001e393276376135736a706130326c66783530717270376e69716777636c3030"
        "2464663861303666632d636336392d346230392d616337342d616234396636353331316533"
    )
    cursor = Cursor(capture)
    _version(cursor)
    assert cursor.byte() == 0  # ToClientBody union tag 0: Init
    assert cursor.sized().decode() == ACTOR_ID
    assert cursor.sized().decode() == CONN_ID
    cursor.done()

    message = decode_to_client(capture, "bare")
    assert message == Init(ACTOR_ID, CONN_ID)
    assert encode_to_client(message, "bare") == capture


def test_bare_subscription_request_is_exact() -> None:
    capture = bytes.fromhex("0400010f70726f67726573735570646174656401")
    cursor = Cursor(capture)
    _version(cursor)
    assert cursor.byte() == 1  # ToServerBody union tag 1: SubscriptionRequest
    assert cursor.sized() == b"progressUpdated"
    assert cursor.byte() == 1  # subscribe: true
    cursor.done()

    message = decode_to_server(capture, "bare")
    assert message == SubscriptionRequest("progressUpdated", subscribe=True)
    assert encode_to_server(message, "bare") == capture


def test_bare_queue_send_response_is_exact() -> None:
    capture = bytes.fromhex("040009636f6d706c6574656400")
    cursor = Cursor(capture)
    _version(cursor)
    assert cursor.sized() == b"completed"
    assert cursor.byte() == 0  # response: none
    cursor.done()

    message = decode_http(capture, "bare", HttpQueueSendResponse)
    assert message == HttpQueueSendResponse(status="completed")
    assert encode_http(message, "bare") == capture


EVENT_FRAMES = [
    (
        "0400030f70726f6772657373557064617465642481b900036573746167656772756e6e696e67"
        "69636f6d706c657465640065746f74616c01",
        [{"stage": "running", "completed": 0, "total": 1}],
    ),
    (
        "0400030f70726f6772657373557064617465642681b9000365737461676569636f6d706c6574"
        "656469636f6d706c657465640165746f74616c01",
        [{"stage": "completed", "completed": 1, "total": 1}],
    ),
]


@pytest.mark.parametrize(("hex_frame", "args"), EVENT_FRAMES)
def test_bare_event_frames(hex_frame: str, args: list[Any]) -> None:
    capture = bytes.fromhex(hex_frame)
    cursor = Cursor(capture)
    _version(cursor)
    assert cursor.byte() == 3  # ToClientBody union tag 3: Event
    assert cursor.sized() == b"progressUpdated"
    nested = cursor.sized()  # args: ONE cbor-encoded array
    assert nested[:4] == bytes.fromhex("81b90003")  # cbor-x: array(1) of map16(3)
    assert cbor2.loads(nested) == args
    cursor.done()

    message = decode_to_client(capture, "bare")
    assert message == Event("progressUpdated", args)

    encoded = encode_to_client(message, "bare")
    assert isinstance(encoded, bytes)
    ours = Cursor(encoded)
    _version(ours)
    assert ours.byte() == 3
    assert ours.sized() == b"progressUpdated"
    assert cbor2.loads(ours.sized()) == args
    ours.done()


def test_bare_queue_send_request_framing() -> None:
    capture = bytes.fromhex("04000ab900016576616c75650701046a6f6273010000")
    cursor = Cursor(capture)
    _version(cursor)
    body = cursor.sized()
    assert body == bytes.fromhex("b900016576616c756507")  # cbor-x {"value": 7}
    assert cursor.byte() == 1  # name: some
    assert cursor.sized() == b"jobs"
    assert cursor.take(2) == b"\x01\x00"  # wait: some(false)
    assert cursor.byte() == 0  # timeout: none
    cursor.done()

    message = decode_http(capture, "bare", HttpQueueSendRequest)
    assert message == HttpQueueSendRequest(body={"value": 7}, name="jobs", wait=False)

    ours = encode_http(message, "bare")
    our_body = cbor2.dumps({"value": 7})
    after_body = capture[2 + 1 + len(body) :]  # name, wait and timeout, as captured
    assert ours == b"\x04\x00" + bytes([len(our_body)]) + our_body + after_body


@pytest.mark.parametrize(
    ("hex_body", "state"),
    [
        (
            "040031b900026870726f6772657373b900036573746167656469646c6569636f6d706c6574"
            "65640065746f74616c006373756d00",
            {"progress": {"stage": "idle", "completed": 0, "total": 0}, "sum": 0},
        ),
        (
            "040036b900026870726f6772657373b9000365737461676569636f6d706c6574656469636f"
            "6d706c657465640165746f74616c016373756d07",
            {"progress": {"stage": "completed", "completed": 1, "total": 1}, "sum": 7},
        ),
    ],
)
def test_bare_http_action_response(hex_body: str, state: dict[str, Any]) -> None:
    capture = bytes.fromhex(hex_body)
    cursor = Cursor(capture)
    _version(cursor)
    assert cbor2.loads(cursor.sized()) == state  # output: data(cbor(state))
    cursor.done()

    message = decode_http(capture, "bare", HttpActionResponse)
    assert message == HttpActionResponse(output=state)
    ours = Cursor(encode_http(message, "bare"))
    _version(ours)
    assert cbor2.loads(ours.sized()) == state
    ours.done()
