"""Every message round-trips in every encoding, with every kind of user value."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from perdure.errors import InternalError, InvalidRequest
from perdure.protocol import (
    ENCODINGS,
    ActionRequest,
    ActionResponse,
    ActorInfo,
    Encoding,
    ErrorMessage,
    Event,
    HttpActionRequest,
    HttpActionResponse,
    HttpMessage,
    HttpQueueSendRequest,
    HttpQueueSendResponse,
    HttpResolveResponse,
    HttpResponseError,
    Init,
    SubscriptionRequest,
    ToClient,
    ToServer,
    content_type,
    decode_http,
    decode_to_client,
    decode_to_server,
    encode_http,
    encode_to_client,
    encode_to_server,
    is_binary,
    parse_encoding,
)

# A value exercising everything the wire value model holds, including the edges of the
# integer ranges where JSON and CBOR change representation.
RICH: dict[str, Any] = {
    "none": None,
    "bools": [True, False],
    "ints": [0, -1, 23, 24, 255, 2**31 - 1, -(2**31), -(2**31) - 1, 2**32 - 1, 2**32],
    "js_edges": [2**53 - 1, -(2**53 - 1), 2**53, -(2**53), 2**63, 2**64 - 1, 2**64, -(2**64) - 1],
    "huge": 10**40,
    "floats": [0.5, -1.25, 1e300, 3.0],
    "text": "héllo \u2603 \U0001f600",
    "bytes": b"\x00\x01\xfe\xff",
    "empty": {"list": [], "dict": {}, "bytes": b"", "text": ""},
    "set": {1, "two", 3.5},
    "frozen": frozenset({"a"}),
    "dollar": ["$BigInt", "not a tag"],
    "double_dollar": ["$$x", 1],
    "lone_dollar": ["$", 2],
    "not_a_pair": ["$x", 1, 2],
    "nested": [[["$Set", []], {"k": ["$Undefined", 0]}]],
    "deep": {"a": {"b": {"c": [1, [2, [3]]]}}},
}

ID = 2**63 + 5  # beyond JavaScript's safe integers: ids are always BigInt on the wire

TO_SERVER: list[ToServer] = [
    ActionRequest(id=0, name="getState", args=[]),
    ActionRequest(id=ID, name="users.add", args=[RICH, "x", 1]),
    ActionRequest(id=1, name="pair", args=["$tricky", 1]),  # args array itself looks like a tag
    SubscriptionRequest(event_name="progressUpdated", subscribe=True),
    SubscriptionRequest(event_name="", subscribe=False),
]

TO_CLIENT: list[ToClient] = [
    Init(actor_id="abc", connection_id="def"),
    ErrorMessage(group="user", code="insufficient_funds", message="Need more", metadata=RICH),
    ErrorMessage(group="actor", code="internal_error", message="Oops", action_id=0),
    ErrorMessage(
        group="actor",
        code="action_not_found",
        message="Action `nope` was not found.",
        action_id=ID,
        actor=ActorInfo(actor_id="a1", generation=3, key="tenant/x"),
    ),
    ErrorMessage(group="g", code="c", message="m", actor=ActorInfo("a2", 0, None)),
    ActionResponse(id=ID, output=RICH),
    ActionResponse(id=0, output=None),
    ActionResponse(id=1, output=["$x", 1]),
    Event(name="progressUpdated", args=[{"stage": "running"}]),
    Event(name="e", args=[]),
    Event(name="e2", args=["$x", {"y": b"z"}]),
]

HTTP: list[HttpMessage] = [
    HttpActionRequest(args=[]),
    HttpActionRequest(args=[RICH, None]),
    HttpActionResponse(output=RICH),
    HttpActionResponse(output=None),
    HttpQueueSendRequest(body={"value": 7}, name="jobs"),
    HttpQueueSendRequest(body=RICH, name=None, wait=True, timeout=2000),
    HttpQueueSendRequest(body=None, name="jobs", wait=True, timeout=2**40),
    HttpQueueSendResponse(status="completed"),
    HttpQueueSendResponse(status="timedOut", response=RICH),
    HttpResponseError(group="actor", code="not_found", message="The actor does not exist."),
    HttpResponseError(
        group="user",
        code="bad",
        message="Bad",
        metadata={"need": 5},
        actor=ActorInfo(actor_id="a", generation=2**40, key=None),
    ),
    HttpResolveResponse(actor_id="92v7a5sjpa02lfx50qrp7niqgwcl00"),
]


@pytest.mark.parametrize("enc", ENCODINGS)
@pytest.mark.parametrize("message", TO_SERVER, ids=repr)
def test_to_server_round_trip(enc: Encoding, message: ToServer) -> None:
    encoded = encode_to_server(message, enc)
    assert isinstance(encoded, bytes) == is_binary(enc)
    assert decode_to_server(encoded, enc) == message


@pytest.mark.parametrize("enc", ENCODINGS)
@pytest.mark.parametrize("message", TO_CLIENT, ids=repr)
def test_to_client_round_trip(enc: Encoding, message: ToClient) -> None:
    encoded = encode_to_client(message, enc)
    assert isinstance(encoded, bytes) == is_binary(enc)
    assert decode_to_client(encoded, enc) == message


@pytest.mark.parametrize("enc", ENCODINGS)
@pytest.mark.parametrize("message", HTTP, ids=repr)
def test_http_round_trip(enc: Encoding, message: HttpMessage) -> None:
    encoded = encode_http(message, enc)
    assert isinstance(encoded, bytes)
    assert decode_http(encoded, enc, type(message)) == message


@pytest.mark.parametrize("enc", ENCODINGS)
def test_round_trip_keeps_types(enc: Encoding) -> None:
    sent = ActionResponse(id=1, output=RICH)
    output = decode_to_client(encode_to_client(sent, enc), enc)
    assert isinstance(output, ActionResponse)
    got = output.output
    for key, value in RICH.items():
        assert got[key] == value, key
    assert type(got["bytes"]) is bytes
    assert type(got["set"]) is set
    assert all(type(n) is int for n in got["ints"] + got["js_edges"])
    assert type(got["floats"][3]) is float  # 3.0 stays a float (outside the band)


@pytest.mark.parametrize("enc", ENCODINGS)
def test_tuples_and_bytes_likes_arrive_as_lists_and_bytes(enc: Encoding) -> None:
    message = ActionRequest(id=1, name="a", args=(1, (2, 3), bytearray(b"x"), memoryview(b"y")))  # type: ignore[arg-type]
    decoded = decode_to_server(encode_to_server(message, enc), enc)
    assert decoded == ActionRequest(id=1, name="a", args=[1, [2, 3], b"x", b"y"])


def test_datetimes_travel_as_instants() -> None:
    moment = dt.datetime(2026, 12, 2, 10, 46, 13, 698000, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    # JSON: the ISO string JavaScript's Date.toJSON writes, in UTC with milliseconds.
    text = encode_http(HttpActionResponse(output=moment), "json")
    assert text == b'{"output":"2026-12-02T08:46:13.698Z"}'
    # CBOR/BARE: tag 1 (epoch seconds), which cbor-x reads as a Date.
    for enc in ("cbor", "bare"):
        back = decode_http(
            encode_http(HttpActionResponse(output=moment), enc), enc, HttpActionResponse
        )
        assert back.output == moment


@pytest.mark.parametrize("enc", ENCODINGS)
@pytest.mark.parametrize(
    ("value", "where"),
    [
        (object(), "action output"),
        ({"a": [1, {"b": object()}]}, "action output['a'][1]['b']"),
        (dt.datetime(2026, 1, 1), "action output"),  # naive
    ],
)
def test_unsendable_values_raise_internal_error(enc: Encoding, value: Any, where: str) -> None:
    with pytest.raises(InternalError) as info:
        encode_to_client(ActionResponse(id=1, output=value), enc)
    assert info.value.message.startswith(f"Cannot send {where}")


def test_nan_is_not_json() -> None:
    with pytest.raises(InternalError, match="JSON"):
        encode_to_client(ActionResponse(id=1, output=float("nan")), "json")
    back = decode_to_client(encode_to_client(ActionResponse(1, float("inf")), "cbor"), "cbor")
    assert back == ActionResponse(1, float("inf"))


@pytest.mark.parametrize("enc", ENCODINGS)
@pytest.mark.parametrize("bad_id", [-1, 2**64])
def test_ids_must_be_u64(enc: Encoding, bad_id: int) -> None:
    with pytest.raises(InternalError):
        encode_to_server(ActionRequest(id=bad_id, name="a", args=[]), enc)
    with pytest.raises(InternalError):
        encode_to_client(ActionResponse(id=bad_id, output=None), enc)


@pytest.mark.parametrize("enc", ENCODINGS)
def test_wrong_message_type_is_a_programming_error(enc: Encoding) -> None:
    with pytest.raises(TypeError):
        encode_to_client(ActionRequest(1, "a", []), enc)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        encode_to_server(Init("a", "b"), enc)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        encode_http(Init("a", "b"), enc)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        decode_http(b"", enc, Init)


def test_parse_encoding() -> None:
    assert parse_encoding(None) == "json"
    assert parse_encoding("") == "json"
    assert parse_encoding(None, default="bare") == "bare"
    for enc in ENCODINGS:
        assert parse_encoding(enc) == enc
    for bad in ("xml", "JSON", " json", "cbor2"):
        with pytest.raises(InvalidRequest) as info:
            parse_encoding(bad)
        assert info.value.code == "invalid_encoding"
        assert info.value.identifier == "actor.invalid_encoding"
        assert "json, cbor, bare" in info.value.message


def test_content_types() -> None:
    assert content_type("json") == "application/json"
    assert content_type("cbor") == "application/octet-stream"
    assert content_type("bare") == "application/octet-stream"
