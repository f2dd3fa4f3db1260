"""A caller's input that the actor's own create code fails on: a 400 that says so, and
no actor left behind (a retry with a good input creates it afresh)."""

from __future__ import annotations

from typing import Any

import pytest

from perdure import InternalError, InvalidRequest, UserError, actor, setup
from perdure.registry import Registry
from perdure.runtime.actor.contexts import ActorContext
from tests.support.runtimes import RuntimeFactory

pytestmark = pytest.mark.timeout(20)


def _registry() -> Registry:
    def counted(c: ActorContext, input: Any) -> dict[str, int]:
        return {"n": input["count"]}  # KeyError on an input without `count`

    def checked(c: ActorContext, input: Any) -> dict[str, int]:
        if not isinstance(input, dict) or "count" not in input:
            raise UserError("The input needs a count.", code="needs_count")
        return {"n": input["count"]}

    def broken(c: ActorContext, input: Any) -> dict[str, int]:
        return {"n": {}["missing"]}  # fails whatever the input: not the caller's fault

    def read(c: Any) -> int:
        return int(c.state["n"])

    return setup(
        use={
            "counted": actor(create_state=counted, actions={"n": read}),
            "checked": actor(create_state=checked, actions={"n": read}),
            "broken": actor(create_state=broken, actions={"n": read}),
        }
    )


async def test_create_code_failing_on_the_input_is_a_400_and_keeps_nothing(
    make_runtime: RuntimeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = await make_runtime(_registry())
    client = runtime.client()
    with pytest.raises(InvalidRequest) as caught:
        await client.counted.get_or_create("a", input={"nope": 1}).n()
    error = caught.value
    assert error.identifier == "actor.invalid_input"
    assert error.status == 400
    assert "KeyError" in error.message
    assert "input=" in error.message  # says how to have the input checked up front
    assert any("creating it failed on its input" in r.getMessage() for r in caplog.records)
    assert await runtime.store.find_actor("counted", ("a",)) is None
    assert await client.counted.get_or_create("a", input={"count": 3}).n() == 3


async def test_a_user_error_at_create_reaches_the_caller_and_keeps_nothing(
    make_runtime: RuntimeFactory,
) -> None:
    runtime = await make_runtime(_registry())
    client = runtime.client()
    with pytest.raises(UserError) as caught:
        await client.checked.get_or_create("a", input="five").n()
    assert caught.value.identifier == "user.needs_count"
    assert await runtime.store.find_actor("checked", ("a",)) is None
    assert await client.checked.get_or_create("a", input={"count": 5}).n() == 5


async def test_create_code_failing_without_input_stays_an_internal_error(
    make_runtime: RuntimeFactory,
) -> None:
    client = (await make_runtime(_registry())).client()
    with pytest.raises(InternalError):
        await client.broken.get_or_create("a").n()
