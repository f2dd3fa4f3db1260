"""``c.queue``'s receives name their queues with ``names=``; the positional spelling of
before still works, with a ``DeprecationWarning`` that points at the caller's line and
shows the new spelling (in a workflow, ``ctx.queue.next``'s first argument is its history
entry's name: one call, one meaning)."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator
from typing import Any

import pytest

from perdure import ActionContext, actor, queue, setup
from perdure.errors import PerdureError
from perdure.testing import ActorTestEnv


async def _old_next(c: ActionContext) -> Any:
    message = await c.queue.next("jobs", timeout=0)  # the deprecated spelling
    return None if message is None else message.body


async def _new_next(c: ActionContext) -> Any:
    message = await c.queue.next(names="jobs", timeout=0)
    return None if message is None else message.body


def _old_try_next(c: ActionContext) -> Any:
    message = c.queue.try_next(["jobs"])
    return None if message is None else message.body


async def _options_object(c: ActionContext) -> Any:
    return await c.queue.next({"names": ["jobs"]}, timeout=0)  # rivetkit's spelling


async def _twice(c: ActionContext) -> Any:
    return await c.queue.next("jobs", names="other", timeout=0)


registry = setup(
    use={
        "box": actor(
            queues={"jobs": queue(), "other": queue()},
            actions={
                "old_next": _old_next,
                "new_next": _new_next,
                "old_try_next": _old_try_next,
                "twice": _twice,
                "options_object": _options_object,
            },
        )
    }
)


@pytest.fixture
async def env() -> AsyncIterator[ActorTestEnv]:
    async with ActorTestEnv(registry) as test_env:
        yield test_env


async def test_names_as_a_keyword_reads_only_those_queues(env: ActorTestEnv) -> None:
    box = env.client.box.get_or_create("b")
    await box.send("other", "not this")
    await box.send("jobs", "j1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new spelling warns of nothing
        assert await box.new_next() == "j1"
        assert await box.new_next() is None


async def test_the_positional_spelling_still_works_and_warns_at_the_callers_line(
    env: ActorTestEnv,
) -> None:
    box = env.client.box.get_or_create("b")
    await box.send("other", "not this")
    await box.send("jobs", "j1")
    await box.send("jobs", "j2")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert await box.old_next() == "j1"
        assert await box.old_try_next() == "j2"
    assert [w.category for w in caught] == [DeprecationWarning, DeprecationWarning]
    messages = [str(w.message) for w in caught]
    assert "c.queue.next('jobs') is deprecated: write c.queue.next(names='jobs')" in messages[0]
    assert "c.queue.try_next(['jobs'])" in messages[1]
    assert "history entry" in messages[0]
    assert {w.filename for w in caught} == {__file__}  # the actor code's own line


async def test_names_given_both_ways_or_as_an_options_object_is_refused_with_a_code(
    env: ActorTestEnv,
) -> None:
    box = env.client.box.get_or_create("b")
    with pytest.raises(PerdureError) as twice:
        await box.twice()
    assert twice.value.code == "names_twice"
    assert "c.queue.next() takes the queues to read once, as names=." in twice.value.message
    with pytest.raises(PerdureError) as options:
        await box.options_object()
    assert options.value.code == "options_object"
