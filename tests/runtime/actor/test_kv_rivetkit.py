"""rivetkit's actor-kv driver test, in process: its fixture actor written with perdure's
``c.kv`` (tests/support/apps/kv.py) does what the driver test expects of ``c.kv`` (text
put, get and list by prefix; an ArrayBuffer round trip), and what rivetkit's ``c.kv``
does besides: a missing key reads as null, a range is ``[start, end)`` and may be read
in reverse with a limit, ``deleteRange`` removes that range. The official TypeScript
client runs the same checks over the wire (tests/scenarios/compat/suite.ts, ``kv-*``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from perdure import setup
from perdure.testing import ActorTestEnv
from tests.support.apps.kv import kv_actor

registry = setup(use={"kvActor": kv_actor})


@pytest.fixture
async def env() -> AsyncIterator[ActorTestEnv]:
    async with ActorTestEnv(registry, store="sqlite") as test_env:
        yield test_env


async def test_supports_text_encoding_and_decoding(env: ActorTestEnv) -> None:
    kv = env.client.kvActor.get_or_create(["kv-text"])
    await kv.putText("greeting", "hello")
    assert await kv.getText("greeting") == "hello"
    await kv.putText("prefix-a", "alpha")
    await kv.putText("prefix-b", "beta")
    results = sorted(await kv.listText("prefix-"), key=lambda row: row["key"])
    assert results == [{"key": "prefix-a", "value": "alpha"}, {"key": "prefix-b", "value": "beta"}]


async def test_supports_array_buffer_encoding_and_decoding(env: ActorTestEnv) -> None:
    kv = env.client.kvActor.get_or_create(["kv-array-buffer"])
    assert await kv.roundtripArrayBuffer("bytes", [4, 8, 15, 16, 23, 42]) == [4, 8, 15, 16, 23, 42]


async def test_missing_keys_ranges_and_delete_range(env: ActorTestEnv) -> None:
    kv = env.client.kvActor.get_or_create(["kv-range"])
    assert await kv.getText("missing") is None
    for letter in "abcde":
        await kv.putText(letter, letter.upper())
    keys = [row["key"] for row in await kv.listTextRange("b", "e")]
    assert keys == ["b", "c", "d"]  # the end is excluded
    reverse = await kv.listTextRange("a", "z", {"reverse": True, "limit": 2})
    assert [row["key"] for row in reverse] == ["e", "d"]
    assert await kv.deleteTextRange("b", "d") is True
    assert [row["key"] for row in await kv.listText("")] == ["a", "d", "e"]
