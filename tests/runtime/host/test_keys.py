"""Keys, resolution (get / get_or_create / create / get_for_id), ids and generations."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from perdure import ActorAlreadyExists, ActorNotFound, InvalidRequest, actor, setup
from perdure.registry import Registry
from perdure.runtime.actor.contexts import ActionContext, ActorContext
from tests.support.runtimes import RuntimeFactory

# Runtime tests are fast; a hang should fail quickly, not after the global timeout.
pytestmark = pytest.mark.timeout(20)


def _info(c: ActionContext) -> dict[str, Any]:
    return {"id": c.actor_id, "name": c.name, "key": c.key, "generation": c.generation}


def _registry(created: list[tuple[str, Any]] | None = None) -> Registry:
    log = created if created is not None else []

    def create_state(c: ActorContext, input: Any) -> dict[str, Any]:
        log.append(("create_state", input))
        return {"input": input}

    def on_create(c: ActorContext, input: Any) -> None:
        log.append(("on_create", input))

    def get_input(c: ActionContext) -> Any:
        return c.state["input"]

    actions = {"info": _info, "input": get_input}
    return setup(
        use={
            "user": actor(create_state=create_state, on_create=on_create, actions=actions),
            "team": actor(state={}, actions=actions),
        }
    )


async def test_string_key_is_a_one_part_list_key(make_runtime: RuntimeFactory) -> None:
    client = (await make_runtime(_registry())).client()
    by_str = await client.user.get_or_create("ada").resolve()
    by_list = await client.user.get_or_create(["ada"]).resolve()
    two_parts = await client.user.get_or_create(["ada", "b"]).resolve()
    singleton = await client.user.get_or_create().resolve()
    assert by_str == by_list
    assert len({by_str, two_parts, singleton}) == 3
    assert await client.user.get_or_create([]).resolve() == singleton
    info = await client.user.get_or_create(["ada", "b"]).info()
    assert info == {"id": two_parts, "name": "user", "key": ["ada", "b"], "generation": 1}


async def test_keys_are_unique_per_name_and_shared_across_names(
    make_runtime: RuntimeFactory,
) -> None:
    client = (await make_runtime(_registry())).client()
    user = await client.user.get_or_create("x").info()
    team = await client.team.get_or_create("x").info()
    assert user["id"] != team["id"]
    assert (user["name"], user["key"]) == ("user", ["x"])
    assert (team["name"], team["key"]) == ("team", ["x"])
    assert (await client.user.get("x").info())["id"] == user["id"]


async def test_get_of_a_missing_key_is_not_found(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime(_registry())
    with pytest.raises(ActorNotFound) as caught:
        await runtime.client().user.get("nobody").info()
    assert caught.value.identifier == "actor.not_found"
    assert runtime.live_count == 0
    assert await runtime.store.count_actors() == 0


async def test_get_or_create_passes_input_to_create_state_and_on_create(
    make_runtime: RuntimeFactory,
) -> None:
    created: list[tuple[str, Any]] = []
    client = (await make_runtime(_registry(created))).client()
    first = client.user.get_or_create("ada", input={"plan": "pro", "seats": 3})
    assert await first.input() == {"plan": "pro", "seats": 3}
    # The actor exists now: a second input is not used, and nothing is created again.
    second = client.user.get_or_create("ada", input={"plan": "free"})
    assert await second.input() == {"plan": "pro", "seats": 3}
    assert created == [
        ("create_state", {"plan": "pro", "seats": 3}),
        ("on_create", {"plan": "pro", "seats": 3}),
    ]


async def test_concurrent_get_or_create_makes_one_actor(make_runtime: RuntimeFactory) -> None:
    created: list[tuple[str, Any]] = []
    runtime = await make_runtime(_registry(created))
    client = runtime.client()
    ids = await asyncio.gather(*(client.user.get_or_create("same").resolve() for _ in range(20)))
    assert len(set(ids)) == 1
    assert [event for event, _ in created] == ["create_state", "on_create"]
    assert await runtime.store.count_actors(name="user") == 1


async def test_create_refuses_an_existing_key(make_runtime: RuntimeFactory) -> None:
    client = (await make_runtime(_registry())).client()
    handle = await client.user.create("ada", input=1)
    actor_id = await handle.resolve()
    assert await handle.input() == 1
    assert (await client.user.get("ada").info())["id"] == actor_id
    with pytest.raises(ActorAlreadyExists) as caught:
        await client.user.create("ada", input=2)
    assert caught.value.identifier == "actor.duplicate_key"
    assert await client.user.get("ada").input() == 1
    # The same key under another name is a different actor, so create succeeds there.
    await client.team.create("ada")


async def test_get_for_id(make_runtime: RuntimeFactory) -> None:
    client = (await make_runtime(_registry())).client()
    actor_id = await client.user.get_or_create("ada").resolve()
    assert (await client.user.get_for_id(actor_id).info())["key"] == ["ada"]
    with pytest.raises(ActorNotFound):
        await client.user.get_for_id("0" * 30).info()


async def test_ids_are_stable_and_generation_grows_at_each_start(
    make_runtime: RuntimeFactory,
) -> None:
    registry = _registry()
    runtime = await make_runtime(registry)
    handle = runtime.client().user.get_or_create("ada")
    first = await handle.info()
    assert first["generation"] == 1
    await runtime.sleep_actor(first["id"])
    assert not runtime.is_live(first["id"])
    second = await handle.info()
    assert (second["id"], second["generation"]) == (first["id"], 2)
    await runtime.stop()

    # A restart on a new store object over the same database: a third start.
    restarted = await make_runtime(registry)
    third = await restarted.client().user.get("ada").info()
    assert (third["id"], third["generation"]) == (first["id"], 3)
    record = await restarted.store.get_actor(first["id"])
    assert record is not None
    assert record.generation == 3


async def test_unknown_actor_name_and_bad_keys_are_invalid_requests(
    make_runtime: RuntimeFactory,
) -> None:
    client = (await make_runtime(_registry())).client()
    with pytest.raises(InvalidRequest) as unknown:
        await client.nobody.get_or_create("x").resolve()
    assert unknown.value.code == "unknown_name"
    with pytest.raises(InvalidRequest) as bad_key:
        await client.user.get_or_create(["ok", 3]).resolve()  # type: ignore[list-item]
    assert bad_key.value.code == "invalid_key"
    with pytest.raises(InvalidRequest, match="128 bytes"):
        await client.user.get_or_create("x" * 129).resolve()
