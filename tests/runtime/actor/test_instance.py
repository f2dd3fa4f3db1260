"""An awake actor makes the parts most actors never use on first use (issue 17, memory):
they are absent while unused, and behave as before once asked for."""

from __future__ import annotations

import asyncio
import logging

import pytest

from perdure import actor, setup
from perdure.runtime.actor.contexts import ActionContext
from perdure.runtime.actor.instance import ActorInstance
from perdure.runtime.host.actor_runtime import ActorRuntime
from tests.support.runtimes import WAIT, RuntimeFactory

pytestmark = pytest.mark.timeout(20)


def _counter() -> object:
    def increment(c: ActionContext) -> int:
        c.state["n"] += 1
        return int(c.state["n"])

    return actor(state={"n": 0}, actions={"increment": increment})


async def _awake_counter(
    make_runtime: RuntimeFactory, key: str
) -> tuple[ActorRuntime, ActorInstance]:
    """A counter made awake by one increment, with its live instance."""
    runtime = await make_runtime(setup(use={"counter": _counter()}))
    handle = runtime.client().counter.get_or_create(key)
    assert await handle.increment() == 1
    instance = runtime.live_instance(await handle.resolve())
    assert instance is not None
    return runtime, instance


async def test_an_idle_awake_actor_holds_no_unused_parts(make_runtime: RuntimeFactory) -> None:
    _, instance = await _awake_counter(make_runtime, "a")
    # Not made: the logger, the stopped future, the alarms, a commit future kept after
    # the commit was durable.
    # The logger and the alarms live in the actor's core, which its parts share.
    assert instance.core._logger is None
    assert instance._stopped is None
    assert instance.core._alarms is None
    assert instance.commits._last_commit is None
    assert not hasattr(instance, "__dict__")
    assert not hasattr(instance.core, "__dict__")


async def test_stopped_asked_for_after_the_stop_is_done(make_runtime: RuntimeFactory) -> None:
    _, instance = await _awake_counter(make_runtime, "b")
    await asyncio.wait_for(instance.stop("sleep"), WAIT)
    assert instance._stopped is None
    assert instance.stopped.done()


async def test_stopped_asked_for_before_the_stop_resolves(make_runtime: RuntimeFactory) -> None:
    runtime, instance = await _awake_counter(make_runtime, "c")
    stopped = instance.stopped
    assert not stopped.done()
    runtime.schedule_stop(instance, "sleep")
    await asyncio.wait_for(asyncio.shield(stopped), WAIT)
    assert instance.status == "stopped"


async def test_the_logger_made_on_first_use_names_the_actor(
    make_runtime: RuntimeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    _, instance = await _awake_counter(make_runtime, "d")
    with caplog.at_level(logging.INFO, logger="perdure.actor"):
        instance.log.info("hello")
    assert instance.log is instance.log  # made once
    (record,) = [r for r in caplog.records if r.getMessage() == "hello"]
    assert record.actor == f"counter/{instance.actor_id}"
    assert record.actor_id == instance.actor_id
    assert record.actor_key == instance.key
    assert str(instance) == f"actor counter/{instance.actor_id}"


async def test_the_state_size_warning_option_reaches_the_commits(
    make_runtime: RuntimeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    def grow(c: ActionContext, size: int) -> None:
        c.state["pad"] = "x" * size

    big = actor(state={"pad": ""}, actions={"grow": grow}, options={"state_size_warning": 4096})
    runtime = await make_runtime(setup(use={"big": big}))
    handle = runtime.client().big.get_or_create("a")
    with caplog.at_level(logging.WARNING, logger="perdure.actor"):
        await asyncio.wait_for(handle.grow(1000), WAIT)
        assert "state_size_warning" not in caplog.text
        await asyncio.wait_for(handle.grow(8000), WAIT)
        await asyncio.wait_for(handle.grow(9000), WAIT)
    assert caplog.text.count("state_size_warning (4096 bytes)") == 1
