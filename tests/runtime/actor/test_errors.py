"""Errors reach callers with the codes of rivet-behaviour §3; bad state is never stored."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from typing import Any

import pytest

from perdure import (
    ActionNotFound,
    ActionTimedOut,
    InternalError,
    InvalidRequest,
    StateNotSerializable,
    UserError,
    actor,
    setup,
)
from perdure.registry import Registry
from perdure.runtime.actor.contexts import ActionContext
from tests.support.runtimes import RuntimeFactory, stored_state

# Runtime tests are fast; a hang should fail quickly, not after the global timeout.
pytestmark = pytest.mark.timeout(20)

ACTION_TIMEOUT = 0.05


def _registry() -> Registry:
    def withdraw(c: ActionContext, amount: int) -> None:
        raise UserError("Insufficient funds", code="insufficient_funds", metadata={"need": amount})

    def crash(c: ActionContext) -> None:
        raise ValueError("secret database password in this message")

    async def slow(c: ActionContext) -> None:
        c.state["slow_started"] = True
        await asyncio.sleep(30)

    async def own_timeout(c: ActionContext) -> None:
        # The action's own timeout (shorter than the actor's) is its own failure,
        # not an action timeout.
        async with asyncio.timeout(0.001):
            await asyncio.sleep(1)

    def add(c: ActionContext, a: int, b: int = 0) -> int:
        return a + b

    def store_object(c: ActionContext) -> None:
        c.state["items"].append({"ok": 1, "bad": object()})

    def store_naive_datetime(c: ActionContext) -> None:
        c.state["when"] = dt.datetime(2024, 1, 1, 12, 0)

    def store_aware_datetime(c: ActionContext) -> None:
        c.state["when"] = dt.datetime(2024, 1, 1, 12, 0, tzinfo=dt.UTC)

    def increment(c: ActionContext) -> int:
        c.state["n"] += 1
        return int(c.state["n"])

    actions: dict[str, Any] = {
        "withdraw": withdraw,
        "crash": crash,
        "slow": slow,
        "own_timeout": own_timeout,
        "add": add,
        "store_object": store_object,
        "store_naive_datetime": store_naive_datetime,
        "store_aware_datetime": store_aware_datetime,
        "increment": increment,
    }
    return setup(
        use={
            "account": actor(
                state={"n": 0, "items": []},
                actions=actions,
                options={"action_timeout": ACTION_TIMEOUT},
            )
        }
    )


async def test_user_error_reaches_the_caller_intact(make_runtime: RuntimeFactory) -> None:
    handle = (await make_runtime(_registry())).client().account.get_or_create("a")
    with pytest.raises(UserError) as caught:
        await handle.withdraw(5)
    error = caught.value
    assert (error.group, error.code) == ("user", "insufficient_funds")
    assert error.message == "Insufficient funds"
    assert error.metadata == {"need": 5}
    assert await handle.increment() == 1  # the actor is unharmed


async def test_other_exceptions_become_a_generic_internal_error(
    make_runtime: RuntimeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    handle = (await make_runtime(_registry())).client().account.get_or_create("a")
    with caplog.at_level(logging.ERROR, logger="perdure"), pytest.raises(InternalError) as caught:
        await handle.crash()
    error = caught.value
    assert error.identifier == "actor.internal_error"
    assert "secret" not in error.message
    assert "secret" not in str(error)
    assert error.metadata is None
    logged = [r for r in caplog.records if r.exc_info and isinstance(r.exc_info[1], ValueError)]
    assert len(logged) == 1, "the original exception must be logged once"
    assert "secret database password" in str(logged[0].exc_info[1])  # type: ignore[index]
    assert "crash" in logged[0].getMessage()
    assert await handle.increment() == 1


async def test_unknown_action(make_runtime: RuntimeFactory) -> None:
    handle = (await make_runtime(_registry())).client().account.get_or_create("a")
    with pytest.raises(ActionNotFound) as caught:
        await handle.no_such_action()
    assert caught.value.identifier == "actor.action_not_found"
    assert "no_such_action" in caught.value.message


@pytest.mark.parametrize("args", [(), (1, 2, 3)])
async def test_wrong_argument_count(make_runtime: RuntimeFactory, args: tuple[int, ...]) -> None:
    handle = (await make_runtime(_registry())).client().account.get_or_create("a")
    with pytest.raises(InvalidRequest) as caught:
        await handle.add(*args)
    assert caught.value.identifier == "actor.invalid_request"
    assert "`add`" in caught.value.message
    assert "1 to 2 arguments" in caught.value.message
    assert await handle.add(1) == 1
    assert await handle.add(1, 2) == 3


async def test_slow_action_times_out(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime(_registry())
    handle = runtime.client().account.get_or_create("a")
    started = time.monotonic()
    with pytest.raises(ActionTimedOut) as caught:
        await handle.slow()
    assert time.monotonic() - started < 2
    assert caught.value.identifier == "actor.action_timed_out"
    assert caught.value.status == 408
    assert caught.value.message == "Action timed out"  # rivetkit 2.3.19's text
    assert caught.value.metadata["action"] == "slow"
    # The actor keeps working, and what the action changed before it timed out was flushed
    # (actions are not transactions, as in Rivet).
    assert await handle.increment() == 1
    assert (await stored_state(runtime, await handle.resolve()))["slow_started"] is True


async def test_a_timeout_inside_the_action_is_not_an_action_timeout(
    make_runtime: RuntimeFactory,
) -> None:
    handle = (await make_runtime(_registry())).client().account.get_or_create("a")
    with pytest.raises(InternalError):
        await handle.own_timeout()


@pytest.mark.parametrize(
    ("action", "path", "reason"),
    [
        ("store_object", "state['items'][0]['bad']", "object"),
        ("store_naive_datetime", "state['when']", "naive datetime"),
    ],
)
async def test_unserialisable_state_fails_the_action_and_stores_nothing(
    make_runtime: RuntimeFactory, action: str, path: str, reason: str
) -> None:
    runtime = await make_runtime(_registry())
    handle = runtime.client().account.get_or_create("a")
    assert await handle.increment() == 1
    actor_id = await handle.resolve()
    with pytest.raises(StateNotSerializable) as caught:
        await handle.action(action)
    error = caught.value
    assert error.identifier == "state.not_serializable"
    assert path in error.message
    assert reason in error.message
    assert actor_id in error.message
    assert error.metadata["path"] == path
    assert await stored_state(runtime, actor_id) == {"n": 1, "items": []}


async def test_aware_datetimes_round_trip(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime(_registry())
    handle = runtime.client().account.get_or_create("a")
    await handle.store_aware_datetime()
    state = await stored_state(runtime, await handle.resolve())
    assert state["when"] == dt.datetime(2024, 1, 1, 12, 0, tzinfo=dt.UTC)


async def test_a_state_that_cannot_be_stored_restarts_the_actor_from_its_stored_state(
    make_runtime: RuntimeFactory,
) -> None:
    """Every write of the failed flush is refused together (each waiter got the error), and
    the actor restarts from what is stored rather than keep a state the store never saw."""
    runtime = await make_runtime(_registry())
    handle = runtime.client().account.get_or_create("a")
    actor_id = await handle.resolve()
    instance = await runtime.instance(actor_id)
    instance.commits.write_history({"probe": b"entry"}, ())
    with pytest.raises(StateNotSerializable):
        await handle.store_object()
    assert await runtime.store.load_history(actor_id) == {}
    assert await handle.increment() == 1  # the stored state, without the bad value
    assert await runtime.store.load_history(actor_id) == {}  # refused writes stay refused
    assert await runtime.instance(actor_id) is not instance


async def test_destroy_deletes_even_an_actor_whose_state_cannot_be_stored(
    make_runtime: RuntimeFactory,
) -> None:
    runtime = await make_runtime(_registry())
    handle = runtime.client().account.get_or_create("a")
    actor_id = await handle.resolve()
    with pytest.raises(StateNotSerializable):
        await handle.store_object()
    await runtime.destroy_actor(actor_id)
    assert await runtime.store.get_actor(actor_id) is None


@pytest.mark.parametrize("hook", ["create_state", "on_wake"])
async def test_a_failing_start_hook_is_an_internal_error(
    make_runtime: RuntimeFactory, caplog: pytest.LogCaptureFixture, hook: str
) -> None:
    def fail(*args: Any) -> Any:
        raise ValueError("secret start detail")

    registry = setup(use={"thing": actor(**{hook: fail}, actions={"get": lambda c: c.state})})
    runtime = await make_runtime(registry)
    with caplog.at_level(logging.ERROR, logger="perdure"), pytest.raises(InternalError) as caught:
        await runtime.client().thing.get_or_create("a").get()
    assert "secret" not in str(caught.value)
    assert any("secret start detail" in str(r.exc_info[1]) for r in caplog.records if r.exc_info)
    assert runtime.live_count == 0


async def test_unserialisable_input_creates_nothing(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime(_registry())
    with pytest.raises(StateNotSerializable, match="input"):
        await runtime.client().account.get_or_create("a", input={"x": object()}).resolve()
    assert await runtime.store.count_actors() == 0
    assert runtime.live_count == 0


async def test_a_failing_connect_hook_is_an_internal_error(
    make_runtime: RuntimeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    def refuse(c: Any, params: Any) -> None:
        raise ValueError("secret connect detail")

    registry = setup(use={"thing": actor(on_before_connect=refuse, actions={"get": lambda c: 1})})
    runtime = await make_runtime(registry)
    handle = runtime.client().thing.get_or_create("a")
    with caplog.at_level(logging.ERROR, logger="perdure"), pytest.raises(InternalError) as caught:
        await handle.connect()
    assert "secret" not in str(caught.value)
    assert "secret connect detail" in caplog.text  # the details are in the log
    assert await handle.get() == 1  # the actor itself is fine
