"""Bad input of every kind is InvalidRequest with a message saying what is wrong — never
another exception, whatever the bytes (a seeded fuzz loop checks the last part)."""

from __future__ import annotations

import contextlib
import functools
import json
import random
from collections.abc import Callable
from typing import Any

import cbor2
import pytest

from perdure.errors import InvalidRequest
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
    HttpQueueSendRequest,
    HttpQueueSendResponse,
    HttpResolveResponse,
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

HTTP_KINDS: list[type[Any]] = [
    HttpActionRequest,
    HttpActionResponse,
    HttpQueueSendRequest,
    HttpQueueSendResponse,
    HttpResponseError,
    HttpResolveResponse,
]


def rejects(call: Callable[[], object], *fragments: str) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as info:
        call()
    error = info.value
    assert error.code == "invalid_request"
    assert error.status == 400
    for fragment in fragments:
        assert fragment in error.message, error.message
    return error


def request(val: dict[str, Any], tag: str = "ActionRequest") -> dict[str, Any]:
    return {"body": {"tag": tag, "val": val}}


GOOD_REQUEST = {"id": ["$BigInt", "0"], "name": "getState", "args": []}


# -- Shape errors, shared by json and cbor ------------------------------------------------

SHAPE_CASES: list[tuple[Any, tuple[str, ...]]] = [
    ([], ("expected an object, got an array",)),
    (None, ("expected an object, got null",)),
    ({}, ("missing field `body`",)),
    ({"body": 1}, ("`body`", "expected an object, got a number")),
    ({"body": {"val": {}}}, ("missing field `tag`",)),
    ({"body": {"tag": "Nope", "val": {}}}, ("unknown `body.tag` 'Nope'", "ActionRequest")),
    ({"body": {"tag": "ActionRequest"}}, ("missing field `val`",)),
    (request({**GOOD_REQUEST, "id": None} | {}), ("`id` must be an unsigned integer",)),
    (request({k: v for k, v in GOOD_REQUEST.items() if k != "id"}), ("missing field `id`",)),
    (request({**GOOD_REQUEST, "id": -1}), ("`id` is out of range",)),
    (request({**GOOD_REQUEST, "id": 2**64}), ("`id` is out of range",)),
    (request({**GOOD_REQUEST, "id": 1.5}), ("`id` must be an unsigned integer",)),
    (request({**GOOD_REQUEST, "id": True}), ("`id` must be an unsigned integer",)),
    (request({**GOOD_REQUEST, "id": ["$BigInt", "x"]}), ("`id` must be an unsigned integer",)),
    (request({**GOOD_REQUEST, "id": ["$BigInt", "-1"]}), ("`id` must be an unsigned integer",)),
    (request({**GOOD_REQUEST, "name": 5}), ("`name` must be a string, got a number",)),
    (request({**GOOD_REQUEST, "args": {}}), ("`args` must be an array, got an object",)),
    (request({**GOOD_REQUEST, "args": None}), ("`args` must be an array, got null",)),
    (request({**GOOD_REQUEST, "args": ["$BigInt", "1"]}), ("`args` must be an array",)),
    (request({**GOOD_REQUEST, "args": [["$Oops", 1]]}), ("unknown tag '$Oops'",)),
    (
        request({"eventName": "e", "subscribe": "yes"}, "SubscriptionRequest"),
        ("`subscribe` must be a boolean, got a string",),
    ),
    (request({"subscribe": True}, "SubscriptionRequest"), ("missing field `eventName`",)),
]


def _as_json(obj: Any) -> str:
    return json.dumps(obj)


def _as_cbor(obj: Any) -> bytes:
    return cbor2.dumps(obj)


@pytest.mark.parametrize(("enc", "dump"), [("json", _as_json), ("cbor", _as_cbor)])
@pytest.mark.parametrize(("obj", "fragments"), SHAPE_CASES)
def test_bad_shapes(
    enc: Encoding, dump: Callable[[Any], str | bytes], obj: Any, fragments: tuple[str, ...]
) -> None:
    rejects(lambda: decode_to_server(dump(obj), enc), *fragments)


@pytest.mark.parametrize(("enc", "dump"), [("json", _as_json), ("cbor", _as_cbor)])
def test_bad_to_client_shapes(enc: Encoding, dump: Callable[[Any], str | bytes]) -> None:
    def bad(tag: str, val: dict[str, Any], *fragments: str) -> None:
        rejects(lambda: decode_to_client(dump(request(val, tag)), enc), *fragments)

    bad("Init", {"actorId": "a"}, "missing field `connectionId`")
    bad("Error", {"group": "g", "code": "c"}, "missing field `message`")
    bad("Error", {"group": "g", "code": "c", "message": "m", "actionId": "1"}, "`actionId`")
    bad("Error", {"group": "g", "code": 1, "message": "m"}, "`code` must be a string")
    bad(
        "Error",
        {"group": "g", "code": "c", "message": "m", "actor": {"actorId": "a"}},
        "missing field `generation`",
    )
    bad("ActionResponse", {"output": 1}, "missing field `id`")
    bad("Event", {"name": "e", "args": 1}, "`args` must be an array")
    bad("Event", {"args": []}, "missing field `name`")


@pytest.mark.parametrize(("enc", "dump"), [("json", _as_json), ("cbor", _as_cbor)])
def test_bad_http_shapes(enc: Encoding, dump: Callable[[Any], str | bytes]) -> None:
    def bad(kind: type[Any], obj: Any, *fragments: str) -> None:
        data = dump(obj)
        raw = data.encode() if isinstance(data, str) else data
        rejects(lambda: decode_http(raw, enc, kind), *fragments)

    bad(HttpActionRequest, [], "expected an object, got an array")
    bad(HttpActionRequest, {}, "missing field `args`")
    bad(HttpActionRequest, {"args": "x"}, "`args` must be an array, got a string")
    bad(HttpQueueSendRequest, {"body": 1, "wait": "no"}, "`wait` must be a boolean")
    bad(HttpQueueSendRequest, {"body": 1, "name": 3}, "`name` must be a string")
    bad(HttpQueueSendRequest, {"body": 1, "timeout": -5}, "`timeout` is out of range")
    bad(HttpQueueSendResponse, {}, "missing field `status`")
    bad(HttpResponseError, {"group": "g", "message": "m"}, "missing field `code`")
    bad(HttpResponseError, {"group": "g", "code": "c", "message": "m", "actor": 1}, "`actor`")
    bad(HttpResolveResponse, {"actorId": None}, "`actorId` must be a string, got null")


def test_lenient_where_javascript_drops_undefined() -> None:
    # JSON.stringify drops `undefined` properties: absent user values read as None.
    assert decode_http(b"{}", "json", HttpActionResponse) == HttpActionResponse(output=None)
    assert decode_http(b'{"args":null}', "json", HttpActionRequest) == HttpActionRequest([])
    assert decode_http(b'{"name":"jobs"}', "json", HttpQueueSendRequest) == (
        HttpQueueSendRequest(body=None, name="jobs")
    )
    frame = request({"id": 3}, "ActionResponse")
    assert decode_to_client(json.dumps(frame), "json") == ActionResponse(3, None)
    # Unknown fields are ignored: a newer peer may add some.
    extra = request({**GOOD_REQUEST, "future": 1})
    assert decode_to_server(json.dumps(extra), "json") == ActionRequest(0, "getState", [])
    # cbor-x writes `undefined` for a JavaScript undefined property.
    val = {"group": "g", "code": "c", "message": "m", "metadata": cbor2.undefined}
    assert decode_to_client(cbor2.dumps(request(val, "Error")), "cbor") == (
        ErrorMessage("g", "c", "m")
    )


# -- Syntax errors per encoding --------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "fragments"),
    [
        ("", ("Malformed JSON",)),
        ("{", ("Malformed JSON",)),
        ('{"body": NaN}', ("NaN is not valid JSON",)),
        (b"\xff\xfe", ("not valid UTF-8",)),
        ("[" * 100_000 + "]" * 100_000, ("Malformed JSON",)),
        ('{"a":1} x', ("Malformed JSON", "Extra data")),
    ],
)
def test_bad_json(data: str | bytes, fragments: tuple[str, ...]) -> None:
    rejects(lambda: decode_to_server(data, "json"), *fragments)
    rejects(lambda: decode_to_client(data, "json"), *fragments)
    raw = data.encode() if isinstance(data, str) else data
    rejects(lambda: decode_http(raw, "json", HttpActionRequest), *fragments)


@pytest.mark.parametrize(
    ("data", "fragments"),
    [
        (b"", ("Malformed CBOR", "premature end")),
        (b"\xa1", ("Malformed CBOR",)),
        (cbor2.dumps(request(GOOD_REQUEST)) + b"\x00", ("1 trailing byte(s)",)),
        (cbor2.dumps(request(GOOD_REQUEST))[:-3], ("Malformed CBOR",)),
        (b"\x81" * 1000, ("Malformed CBOR",)),
    ],
)
def test_bad_cbor(data: bytes, fragments: tuple[str, ...]) -> None:
    rejects(lambda: decode_to_server(data, "cbor"), *fragments)
    rejects(lambda: decode_http(data, "cbor", HttpActionRequest), *fragments)


@pytest.mark.parametrize("enc", ["cbor", "bare"])
def test_binary_encodings_refuse_text_frames(enc: Encoding) -> None:
    rejects(lambda: decode_to_server("hello", enc), "needs a binary frame")
    rejects(lambda: decode_to_client("hello", enc), "needs a binary frame")


def _bare(*parts: str) -> bytes:
    return bytes.fromhex("".join(parts))


@pytest.mark.parametrize(
    ("data", "fragments"),
    [
        (b"", ("unexpected end of data reading the protocol version",)),
        (b"\x04", ("unexpected end of data reading the protocol version",)),
        (_bare("0300", "00"), ("Unsupported client protocol version 3", "speaks version 4")),
        (_bare("0500", "00"), ("Unsupported client protocol version 5",)),
        (_bare("0400"), ("unexpected end of data reading the message tag",)),
        (_bare("0400", "07"), ("unknown client message tag 7",)),
        (_bare("0400", "80"), ("unexpected end of data reading the message tag",)),
        (_bare("0400", "ffffffffffffffffffff01"), ("longer than 10 bytes",)),
        (_bare("0400", "ffffffffffffffffff7f"), ("not a valid 64-bit varint",)),
        (_bare("0400", "8000"), ("not a valid 64-bit varint",)),  # overlong zero
        (
            _bare("0400", "00", "00"),
            ("unexpected end of data reading the length of ActionRequest.name",),
        ),
        (_bare("0400", "00", "00", "05", "6162"), ("needs 5 byte(s), 2 left",)),
        (
            _bare("0400", "00", "00", "02", "fffe", "0180"),
            ("ActionRequest.name is not valid UTF-8",),
        ),
        (_bare("0400", "00", "00", "01", "61"), ("ActionRequest.args",)),
        (
            _bare("0400", "00", "00", "01", "61", "0101"),
            ("ActionRequest.args must be a CBOR array",),
        ),
        (_bare("0400", "00", "00", "01", "61", "00"), ("ActionRequest.args must be a CBOR array",)),
        (_bare("0400", "00", "00", "01", "61", "01ff"), ("Malformed CBOR in ActionRequest.args",)),
        (_bare("0400", "00", "00", "01", "61", "028001"), ("1 trailing byte(s)",)),
        (
            _bare("0400", "00", "00", "01", "61", "0180", "00"),
            ("1 trailing byte(s) after the message",),
        ),
        (_bare("0400", "01", "01", "61", "02"), ("SubscriptionRequest.subscribe must be 0 or 1",)),
    ],
)
def test_bad_bare_to_server(data: bytes, fragments: tuple[str, ...]) -> None:
    error = rejects(lambda: decode_to_server(data, "bare"), *fragments)
    assert "BARE" in error.message or "CBOR" in error.message or "version" in error.message


def test_bad_bare_to_client_and_http() -> None:
    rejects(lambda: decode_to_client(_bare("0400", "04"), "bare"), "unknown server message tag 4")
    # Error with a presence byte that is neither 0 nor 1.
    error = _bare("0400", "01", "0167", "0163", "016d", "02")
    rejects(lambda: decode_to_client(error, "bare"), "presence byte of Error.metadata")
    # Event args that are not an array.
    event = _bare("0400", "03", "0165", "0101")
    rejects(lambda: decode_to_client(event, "bare"), "Event.args must be a CBOR array")
    # Queue send with a truncated u64 timeout.
    queue = _bare("0400", "0101", "00", "00", "01", "0102")
    rejects(lambda: decode_http(queue, "bare", HttpQueueSendRequest), "needs 8 byte(s), 2 left")
    rejects(lambda: decode_http(_bare("0400"), "bare", HttpResolveResponse), "unexpected end")


# -- Fuzzing ----------------------------------------------------------------------------------

SAMPLES = {
    "to_server": [
        ActionRequest(id=7, name="increment", args=[5, {"by": b"\x01", "big": 2**70}]),
        SubscriptionRequest(event_name="progressUpdated", subscribe=True),
    ],
    "to_client": [
        Init(actor_id="actor", connection_id="conn"),
        ErrorMessage("user", "c", "m", {"x": [1, {2, 3}]}, 4, ActorInfo("a", 1, "k")),
        ActionResponse(id=9, output={"progress": ["$x", 1.5, None, -(2**40)]}),
        Event(name="e", args=[{"a": "b"}, "$y"]),
    ],
    "http": [
        HttpActionRequest(args=[1, "two", [3]]),
        HttpActionResponse(output={"state": {"n": 1}}),
        HttpQueueSendRequest(body={"value": 7}, name="jobs", wait=True, timeout=2000),
        HttpQueueSendResponse(status="completed", response=[1, 2]),
        HttpResponseError("actor", "not_found", "gone", {"m": 1}, ActorInfo("a", 2, None)),
        HttpResolveResponse(actor_id="abc"),
    ],
}


def _encoded_samples(enc: Encoding) -> list[bytes]:
    out: list[bytes] = []
    for message in SAMPLES["to_server"]:
        frame = encode_to_server(message, enc)  # type: ignore[arg-type]
        out.append(frame.encode() if isinstance(frame, str) else frame)
    for message in SAMPLES["to_client"]:
        frame = encode_to_client(message, enc)  # type: ignore[arg-type]
        out.append(frame.encode() if isinstance(frame, str) else frame)
    out += [encode_http(message, enc) for message in SAMPLES["http"]]  # type: ignore[arg-type]
    return out


def _mutate(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        choice = rng.random()
        if choice < 0.3 and buf:
            buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        elif choice < 0.5 and buf:
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        elif choice < 0.65:
            del buf[rng.randrange(len(buf) + 1) :]
        elif choice < 0.8:
            at = rng.randrange(len(buf) + 1)
            buf[at:at] = rng.randbytes(rng.randint(1, 6))
        elif choice < 0.9 and buf:
            at = rng.randrange(len(buf))
            del buf[at : at + rng.randint(1, 4)]
        else:
            # Interesting bytes: CBOR heads, varint continuations, tags, JSON punctuation.
            at = rng.randrange(len(buf) + 1)
            buf[at:at] = bytes(
                [rng.choice(b'\x00\x01\x1b\x3b\x5b\x7b\x80\x9f\xbf\xd8\xf7\xfb\xff"$[]{}')]
            )
    return bytes(buf)


def _decode_http(data: bytes, enc: Encoding, kind: type[Any]) -> object:
    return decode_http(data, enc, kind)


def _decoders(enc: Encoding) -> list[Callable[[bytes], object]]:
    decoders: list[Callable[[bytes], object]] = [
        lambda data: decode_to_server(data, enc),
        lambda data: decode_to_client(data, enc),
    ]
    for kind in HTTP_KINDS:
        decoders.append(functools.partial(_decode_http, enc=enc, kind=kind))
    if enc == "json":
        # Text frames reach the decoder as str.
        decoders.append(lambda data: decode_to_server(data.decode("utf-8", "replace"), enc))
    return decoders


@pytest.mark.parametrize("enc", ENCODINGS)
def test_fuzz_never_raises_anything_but_invalid_request(enc: Encoding) -> None:
    rng = random.Random(f"perdure-protocol-{enc}")
    seeds = _encoded_samples(enc)
    decoders = _decoders(enc)
    outcomes = {"decoded": 0, "rejected": 0}
    for round_ in range(3000):
        if round_ % 5 == 0:
            data = rng.randbytes(rng.randint(0, 40))
            if enc == "bare" and rng.random() < 0.7:
                data = b"\x04\x00" + data  # get past the version check
        else:
            data = _mutate(rng, rng.choice(seeds))
        for decode in decoders:
            try:
                decode(data)
            except InvalidRequest:
                outcomes["rejected"] += 1
            else:
                outcomes["decoded"] += 1
    # The loop must have exercised both paths, or it proves nothing.
    assert outcomes["rejected"] > 1000
    assert outcomes["decoded"] > 50


def test_fuzz_random_json_documents() -> None:
    """Structurally valid JSON with random shapes reaches the field checks."""
    rng = random.Random("perdure-protocol-json-shapes")
    atoms: list[Any] = [None, True, 0, -1, 2**64, 1.5, "", "$BigInt", "$Set", "$$x", "Init"]

    def value(depth: int) -> Any:
        roll = rng.random()
        if depth > 4 or roll < 0.4:
            return rng.choice(atoms)
        if roll < 0.7:
            return [value(depth + 1) for _ in range(rng.randint(0, 3))]
        keys = ["body", "tag", "val", "id", "name", "args", "output", "actorId", "x"]
        return {rng.choice(keys): value(depth + 1) for _ in range(rng.randint(0, 4))}

    tags = ["ActionRequest", "SubscriptionRequest", "Init", "Error", "ActionResponse", "Event"]
    for _ in range(2000):
        doc = value(0)
        if rng.random() < 0.5:
            doc = request({"id": value(3), "name": value(3), "args": value(2)}, rng.choice(tags))
        text = json.dumps(doc)
        for decode in _decoders("json"):
            with contextlib.suppress(InvalidRequest):
                decode(text.encode())
