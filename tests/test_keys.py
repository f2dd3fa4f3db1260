"""perdure.keys: normalisation, limits and the serialised form."""

from __future__ import annotations

import random
from typing import Any

import pytest

from perdure.errors import InvalidRequest
from perdure.keys import (
    MAX_KEY_BYTES,
    MAX_KEY_PART_BYTES,
    Key,
    deserialize_key,
    normalize_key,
    serialize_key,
)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, ()),
        ([], ()),
        ((), ()),
        ("main", ("main",)),
        ("", ("",)),
        (["a", "b"], ("a", "b")),
        (("a", ""), ("a", "")),
    ],
)
def test_normalize(given: Any, expected: Key) -> None:
    assert normalize_key(given) == expected


@pytest.mark.parametrize("given", [1, {"a": "b"}, b"bytes", ["a", 1], [None]])
def test_normalize_refuses_non_strings(given: Any) -> None:
    with pytest.raises(InvalidRequest) as caught:
        normalize_key(given)
    assert caught.value.code == "invalid_key"


def test_part_length_limit_counts_bytes() -> None:
    assert normalize_key(["x" * MAX_KEY_PART_BYTES]) == ("x" * MAX_KEY_PART_BYTES,)
    with pytest.raises(InvalidRequest, match="Key part 1"):
        normalize_key(["ok", "x" * (MAX_KEY_PART_BYTES + 1)])
    two_byte = "é" * (MAX_KEY_PART_BYTES // 2)
    assert normalize_key([two_byte]) == (two_byte,)
    with pytest.raises(InvalidRequest):
        normalize_key([two_byte + "é"])


def test_total_length_limit_is_on_the_serialised_form() -> None:
    part = "x" * MAX_KEY_PART_BYTES
    head = [part] * 7
    fits = [*head, "y" * (MAX_KEY_BYTES - len(serialize_key(head)) - 1)]  # 1 for the "/"
    assert len(serialize_key(fits).encode()) == MAX_KEY_BYTES
    assert normalize_key(fits) == tuple(fits)
    with pytest.raises(InvalidRequest, match="serialised key"):
        normalize_key([*fits[:-1], fits[-1] + "y"])
    # Escapes count: 100 slashes are 200 serialised bytes.
    with pytest.raises(InvalidRequest, match="serialised key"):
        normalize_key(["/" * 100] * 6)


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ((), "/"),
        (("",), "\\0"),
        (("", ""), "\\0/\\0"),
        (("a",), "a"),
        (("a", "b"), "a/b"),
        (("a/b",), "a\\/b"),
        (("a\\b",), "a\\\\b"),
        (("/",), "\\/"),
        (("\\0",), "\\\\0"),
        (("x", "", "y"), "x/\\0/y"),
    ],
)
def test_serialised_form(key: Key, text: str) -> None:
    assert serialize_key(key) == text
    assert deserialize_key(text) == key


def test_random_keys_round_trip() -> None:
    rng = random.Random(1234)
    alphabet = ["a", "b", "/", "\\", "0", "é", " "]
    seen: dict[str, Key] = {}
    for _ in range(2000):
        key = tuple(
            "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 4)))
            for _ in range(rng.randint(0, 4))
        )
        text = serialize_key(key)
        assert deserialize_key(text) == key
        assert seen.setdefault(text, key) == key  # the serialised form is injective


@pytest.mark.parametrize("text", ["a\\", "a\\x", "\\"])
def test_malformed_serialised_keys_are_refused(text: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        deserialize_key(text)
    assert caught.value.code == "invalid_key"
