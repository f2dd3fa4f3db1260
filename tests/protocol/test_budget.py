"""The budget walks on their own (pure functions): the quick pass and the precise walk
agree, the outgoing bound stops early, and a cyclic value cannot hang it."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import pytest

from perdure.errors import InvalidRequest, MessageError
from perdure.protocol._budget import MAX_ELEMENTS, ValueTooLarge, check_outgoing, check_value

ACCEPTED: list[Any] = [
    None,
    [],
    {"héllo": ["wörld", "✓"]},  # non-ASCII keys and strings take the precise walk
    [(1, 2), {1, "a"}, dt.datetime(2026, 1, 1, tzinfo=dt.UTC)],
    [2**1023, -(2**1023), 1e308, b"\xff"],
]


@pytest.mark.parametrize("value", ACCEPTED, ids=repr)
def test_values_in_the_domain_pass(value: Any) -> None:
    check_value(value, "`args`")


REFUSED: list[tuple[Any, str]] = [
    ([{"a": (1, float("nan"))}], "args[0].a[1]"),
    ({"x y": {"z": [1, 2**14240]}}, "args['x y'].z[1]"),
    ([{"k": "ok"}, {"\ud800": 1}], "args[1]['\\ud800']"),
    ([dt.datetime(2026, 1, 1)], "args[0]"),
    ([{frozenset({1})}], "args[0]"),
    ([object()], "args[0]"),
]


@pytest.mark.parametrize(("value", "path"), REFUSED, ids=lambda v: str(v)[:30])
def test_values_outside_the_domain_name_their_path(value: Any, path: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        check_value(value, "`args`")
    assert info.value.code == "unsupported_value"
    assert info.value.metadata == {"path": path}
    assert info.value.message.startswith(f"Invalid {path}: ")


def test_too_many_elements_is_value_too_large() -> None:
    with pytest.raises(ValueTooLarge) as info:
        check_value([[0] * (MAX_ELEMENTS // 2)] * 3, "`body`")
    assert (info.value.status, info.value.code) == (413, "value_too_large")


@pytest.mark.parametrize("make", [lambda v: [v], lambda v: {"a": v}], ids=["array", "map"])
def test_nesting_is_bounded_without_a_recursion_error(make: Any) -> None:
    value: Any = None
    for _ in range(399):
        value = make(value)
    check_value(value, "`params`")  # 399 levels: accepted
    for _ in range(2000):
        value = make(value)
    with pytest.raises(ValueTooLarge) as info:
        check_value(value, "`params`")
    assert "nested deeper than 400 levels" in info.value.message
    assert len(info.value.message) < 300


def test_the_outgoing_bound_stops_at_the_limit() -> None:
    shared = "x" * 1024
    started = time.monotonic()
    with pytest.raises(MessageError) as info:
        check_outgoing({"a": [[shared] * 4_000_000]}, 1 << 20)
    assert time.monotonic() - started < 0.5
    assert (info.value.code, info.value.metadata) == ("outgoing_too_long", {"limit": 1 << 20})
    check_outgoing({"a": [shared] * 1000}, 1 << 20)  # about 1 MB: fits


def test_a_cyclic_value_ends_the_walk() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(MessageError):
        check_outgoing(cycle, 65536)
