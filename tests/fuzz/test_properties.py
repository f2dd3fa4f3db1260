"""Property tests of the three decoders and the value checks (hypothesis).

(1) Arbitrary bytes never make a decoder raise anything but a coded perdure error, and
never take long; (2) every value in the domain round-trips server → client in every
encoding; (3) values outside the domain are refused with the documented code and a path.
"""

from __future__ import annotations

import math
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perdure.errors import PerdureError
from perdure.protocol import (
    ENCODINGS,
    ActionResponse,
    Encoding,
    HttpActionRequest,
    HttpActionResponse,
    decode_http,
    decode_to_client,
    encode_http,
    encode_to_client,
)
from perdure.protocol._budget import MAX_INT_BITS
from perdure.protocol.codec import check_value
from tests.fuzz.strategies import TEXT, VALUES
from tests.fuzz.targets import decode_anything

# Fast enough for the suite: every test here stays within a few seconds. More examples
# for a longer local run: PERDURE_FUZZ_EXAMPLES=20000 (docs/edge.md, "Fuzzing").
FAST = settings(
    database=None,
    max_examples=int(os.environ.get("PERDURE_FUZZ_EXAMPLES", "100")),
    deadline=2000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# -- (1) arbitrary bytes ----------------------------------------------------------------

# Bytes that look like each encoding, so the search gets past the first byte.
_JSON_LIKE = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), TEXT),
    lambda c: st.one_of(st.lists(c, max_size=4), st.dictionaries(TEXT, c, max_size=4)),
    max_leaves=12,
)


@pytest.mark.parametrize("enc", ENCODINGS)
@FAST
@given(data=st.binary(max_size=300))
def test_arbitrary_bytes_only_raise_coded_errors(enc: Encoding, data: bytes) -> None:
    decode_anything(data, enc)


@pytest.mark.parametrize("enc", ENCODINGS)
@FAST
@given(value=VALUES, cut=st.integers(0, 400), flip=st.integers(0, 255))
def test_mangled_messages_only_raise_coded_errors(
    enc: Encoding, value: Any, cut: int, flip: int
) -> None:
    """A valid request body, truncated and with one byte changed: near-valid input."""
    body = encode_http(HttpActionRequest(args=[value]), enc)
    for data in (body[:cut], _flip(body, cut, flip), body + bytes([flip])):
        decode_anything(data, enc)


@FAST
@given(shape=_JSON_LIKE, tag=st.sampled_from(["$BigInt", "$Uint8Array", "$Set", "$Date", "$x"]))
def test_json_tags_with_any_payload_only_raise_coded_errors(shape: Any, tag: str) -> None:
    import json

    body = json.dumps({"args": [[tag, shape]]}).encode()
    decode_anything(body, "json")


def _flip(body: bytes, at: int, value: int) -> bytes:
    if not body:
        return body
    at %= len(body)
    return body[:at] + bytes([value]) + body[at + 1 :]


# -- (2) the value domain round-trips ---------------------------------------------------


def same(sent: Any, got: Any) -> bool:
    """Equal as a client sees it: lists for tuples, an integral float may come back as int
    (and back), bytes stay bytes, bools stay bools."""
    if isinstance(sent, bool) or isinstance(got, bool):
        return type(sent) is type(got) and sent == got
    if isinstance(sent, (int, float)) and isinstance(got, (int, float)):
        if sent != got:
            return False
        both_floats = isinstance(sent, float) and isinstance(got, float)
        return not both_floats or math.copysign(1, sent) == math.copysign(1, got)
    if isinstance(sent, (list, tuple)):
        return type(got) is list and len(sent) == len(got) and all(map(same, sent, got))
    if isinstance(sent, dict):
        return (
            type(got) is dict
            and sent.keys() == got.keys()
            and all(same(sent[k], got[k]) for k in sent)
        )
    return type(sent) is type(got) and sent == got


@pytest.mark.parametrize("enc", ENCODINGS)
@FAST
@given(value=VALUES)
def test_domain_values_are_accepted_and_round_trip(enc: Encoding, value: Any) -> None:
    check_value([value], "`args`")  # accepted
    # As a client sends it and the server reads it.
    request = decode_http(encode_http(HttpActionRequest(args=[value]), enc), enc, HttpActionRequest)
    assert same([value], request.args)
    # As the server answers, over HTTP and over a WebSocket.
    http = decode_http(encode_http(HttpActionResponse(output=value), enc), enc, HttpActionResponse)
    assert same(value, http.output)
    frame = decode_to_client(encode_to_client(ActionResponse(id=1, output=value), enc), enc)
    assert isinstance(frame, ActionResponse)
    assert same(value, frame.output)


# -- (3) values outside the domain are refused ------------------------------------------

_OUTSIDE = st.one_of(
    st.sampled_from([math.inf, -math.inf, math.nan]).map(lambda f: ("float", f)),
    st.integers(MAX_INT_BITS, MAX_INT_BITS + 64).map(lambda b: ("int", 2**b)),
    st.integers(MAX_INT_BITS, MAX_INT_BITS + 64).map(lambda b: ("int", -(2**b))),
    st.sampled_from(["\ud800", "a\udfff", "\udc00b"]).map(lambda s: ("surrogate", s)),
    st.sampled_from([1, 2.5, None, b"k"]).map(lambda k: ("key", {k: 1})),
    st.sampled_from([object(), 1j, range(2)]).map(lambda v: ("type", v)),
)


@st.composite
def _buried(draw: st.DrawFn) -> tuple[Any, str, str]:
    """An outside value at a random place in a domain value, with its expected path."""
    kind, bad = draw(_OUTSIDE)
    value: Any = bad
    path = ""
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.booleans()):
            key = draw(st.from_regex(r"[a-z]{1,6}", fullmatch=True))
            value, path = {key: value}, f".{key}{path}"
        else:
            value, path = [draw(VALUES), value], f"[1]{path}"
    return value, path, kind


@FAST
@given(case=_buried())
def test_values_outside_the_domain_are_refused_with_a_path(case: tuple[Any, str, str]) -> None:
    value, path, kind = case
    with pytest.raises(PerdureError) as refused:
        check_value([value], "`args`")
    assert refused.value.code == "unsupported_value", (kind, refused.value)
    assert refused.value.group == "actor"
    # The path names where the bad value sits (a bad key is named by its container).
    expected = f"args[0]{path}"
    assert expected in str(refused.value), (expected, str(refused.value))
