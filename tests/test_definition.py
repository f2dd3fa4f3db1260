"""Definitions are checked when the registry is built, and their actions are callable."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from perdure import ActorDefinition, actor, event, queue, setup
from perdure.errors import ArgumentError, DefinitionError
from perdure.runtime.actor.contexts import ActionContext, ActorContext
from tests.support.runtimes import RuntimeFactory

# Runtime tests are fast; a hang should fail quickly, not after the global timeout.
pytestmark = pytest.mark.timeout(20)


def _setup_one(definition: ActorDefinition) -> None:
    setup(use={"thing": definition})


def test_misspelt_option_is_named_with_a_suggestion() -> None:
    with pytest.raises(DefinitionError) as caught:
        _setup_one(actor(state={}, options={"sleep_timout": 1}))
    assert "`sleep_timout`" in caught.value.message
    assert "did you mean `sleep_timeout`" in caught.value.message
    assert "`thing`" in caught.value.message


def test_misspelt_hook_is_named_with_a_suggestion() -> None:
    with pytest.raises(DefinitionError) as caught:
        _setup_one(actor(state={}, on_wakee=lambda c: None))
    assert "`on_wakee`" in caught.value.message
    assert "did you mean `on_wake`" in caught.value.message


@pytest.mark.parametrize(
    ("hook", "fn"),
    [
        ("on_wake", lambda: None),  # takes no context
        ("on_create", lambda c: None),  # misses `input`
        ("create_state", lambda c, input, extra: {}),  # one too many
        ("on_before_action_response", lambda c, name, args: None),
    ],
)
def test_hook_with_wrong_arity_is_named(hook: str, fn: Any) -> None:
    with pytest.raises(DefinitionError) as caught:
        _setup_one(actor(**{hook: fn}))
    assert f"hook `{hook}`" in caught.value.message


def test_hooks_with_defaults_or_varargs_are_accepted() -> None:
    async def on_create(c: ActorContext, input: Any = None, *rest: Any) -> None:
        pass

    _setup_one(actor(state={}, on_create=on_create, on_wake=lambda *args: None))


def test_state_together_with_create_state_is_refused() -> None:
    with pytest.raises(DefinitionError) as caught:
        _setup_one(actor(state={"n": 0}, create_state=lambda c, input: {"n": 0}))
    assert "`state`" in caught.value.message
    assert "`create_state`" in caught.value.message


def test_option_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(DefinitionError, match="sleep_timeout"):
        _setup_one(actor(state={}, options={"sleep_timeout": -1}))
    with pytest.raises(DefinitionError, match="duration"):
        _setup_one(actor(state={}, options={"action_timeout": "soon"}))


def test_action_without_a_context_parameter_is_refused() -> None:
    with pytest.raises(DefinitionError, match="`ping`"):
        _setup_one(actor(actions={"ping": lambda: "pong"}))


def test_nested_action_groups_become_dotted_names() -> None:
    definition = actor(
        state={},
        actions={
            "users": {"add": lambda c, name: name, "admin": {"remove": lambda c: None}},
            "count": lambda c: 0,
        },
    )
    _setup_one(definition)
    assert set(definition.actions) == {"users.add", "users.admin.remove", "count"}


async def test_nested_actions_are_called_by_dotted_name(make_runtime: RuntimeFactory) -> None:
    def add(c: ActionContext, name: str) -> list[str]:
        c.state["users"].append(name)
        return list(c.state["users"])

    registry = setup(use={"team": actor(state={"users": []}, actions={"users": {"add": add}})})
    runtime = await make_runtime(registry)
    team = runtime.client().team.get_or_create("t")
    assert await team.action("users.add", "ada") == ["ada"]
    assert await team.users.add("bob") == ["ada", "bob"]


async def test_decorator_style_actions(make_runtime: RuntimeFactory) -> None:
    counter = actor(state={"n": 0})

    @counter.action
    def increment(c: ActionContext, by: int = 1) -> int:
        c.state["n"] += by
        return int(c.state["n"])

    @counter.action("reset")
    async def _reset(c: ActionContext) -> None:
        c.state["n"] = 0

    registry = setup(use={"counter": counter})
    assert set(counter.actions) == {"increment", "reset"}
    runtime = await make_runtime(registry)
    handle = runtime.client().counter.get_or_create("a")
    assert await handle.increment() == 1
    assert await handle.increment(4) == 5
    assert await handle.reset() is None
    assert await handle.increment() == 1


async def test_sync_and_async_actions(make_runtime: RuntimeFactory) -> None:
    def sync_add(c: ActionContext, by: int) -> int:
        c.state["n"] += by
        return int(c.state["n"])

    async def async_add(c: ActionContext, by: int) -> int:
        await asyncio.sleep(0)
        c.state["n"] += by
        return int(c.state["n"])

    registry = setup(
        use={"counter": actor(state={"n": 0}, actions={"sync": sync_add, "async": async_add})}
    )
    runtime = await make_runtime(registry)
    handle = runtime.client().counter.get_or_create("a")
    assert await handle.sync(2) == 2
    assert await handle.action("async", 3) == 5


def test_unknown_registry_option_and_bad_actor_name() -> None:
    with pytest.raises(DefinitionError, match="max_input_siz"):
        setup(use={"a": actor(state={})}, max_input_siz=1)
    with pytest.raises(DefinitionError, match="Invalid actor name"):
        setup(use={"a b": actor(state={})})


def test_event_and_queue_access_hooks_are_checked() -> None:
    with pytest.raises(ArgumentError, match="can_subscribe"):
        event(canSubscribe=lambda c: True)  # type: ignore[call-arg]
    with pytest.raises(DefinitionError, match="can_publish"):
        queue(can_publish="yes")  # type: ignore[arg-type]
    guarded = actor(events={"a": event(can_subscribe=lambda c: True), "b": event()})
    plain = actor(events={"a": event()})
    setup(use={"guarded": guarded, "plain": plain})
    assert guarded.subscriptions_guarded
    assert not plain.subscriptions_guarded
    assert guarded.has_state is False
