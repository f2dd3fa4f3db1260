"""Typed models over the wire, against a real ``perdure serve`` (tests/scenarios/models/app.py).

What a client sees is the plain JSON/CBOR form of every model (the official TypeScript
client gets plain objects); what the actor sees, wherever it declares a schema, is the
model. Bad input is refused with a 4xx error and a code, and nothing is created or stored.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import cbor2
import httpx
import pytest

from perdure.client import ActorError, create_client
from tests.support.server import ServerProcess

pytestmark = pytest.mark.timeout(60)

WAIT = 5.0
SETUP = {"owner": "ada", "total": 10}


def _cbor_base64(value: Any) -> str:
    return base64.b64encode(cbor2.dumps(value)).decode()


async def _next(queue: asyncio.Queue[Any]) -> Any:
    return await asyncio.wait_for(queue.get(), WAIT)


@pytest.mark.parametrize("encoding", ["json", "cbor"])
async def test_models_go_out_as_plain_objects(
    server: ServerProcess, unique: str, encoding: str
) -> None:
    async with create_client(server.url, encoding=encoding) as client:
        handle = client.tracker.get_or_create(unique, input=SETUP, params={"user": "ada"})
        conn = handle.connect()
        events: asyncio.Queue[Any] = asyncio.Queue()
        conn.on("progress", events.put_nowait)
        await conn.wait_open()

        # An action result that is a model, an argument validated into one.
        assert await handle.add({"name": "bolt", "qty": 3}) == {"completed": 3, "total": 10}
        # The broadcast model reaches the subscriber as a plain object (it used to be
        # disconnected with 1011 actor.internal_error).
        assert await _next(events) == {"completed": 3, "total": 10}
        assert await conn.add({"name": "nut", "qty": "2"}) == {"completed": 5, "total": 10}
        assert await _next(events) == {"completed": 5, "total": 10}
        assert conn.status == "connected"
        state = await handle.state()
        assert state == {"progress": {"completed": 5, "total": 10}, "owner": "ada"}
        assert type(state) is dict
        # Two model arguments, the second optional; a list of models comes back plain.
        assert await handle.pair({"name": "a", "qty": 1}) == [{"name": "a", "qty": 1}]


async def test_plain_json_on_the_wire_over_http(server: ServerProcess, unique: str) -> None:
    """The raw HTTP answer: a plain JSON object, as any client (the TS one) reads it."""
    async with create_client(server.url) as client:
        actor_id = await client.tracker.get_or_create(unique, input=SETUP).resolve()
    async with httpx.AsyncClient(base_url=server.url, timeout=WAIT) as http:
        answer = await http.post(f"/gateway/{actor_id}/action/progress", json={"args": []})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"output": {"completed": 0, "total": 10}}


async def test_queue_of_a_model_takes_valid_messages(server: ServerProcess, unique: str) -> None:
    async with create_client(server.url, encoding="cbor") as client:
        handle = client.tracker.get_or_create(unique, input=SETUP)
        # Every valid send used to fail with 500 state.not_serializable.
        await handle.send("jobs", {"value": 4})
        await handle.send("jobs", {"value": "5"})
        assert await handle.drain() == [4, 5]  # message.body.value: the body is a Job
        with pytest.raises(ActorError) as bad:
            await handle.send("jobs", {"value": "x"})
        assert bad.value.code == "invalid_message"
        assert await handle.drain() == []  # nothing was stored


async def test_invalid_action_arguments_name_the_parameter(
    server: ServerProcess, unique: str
) -> None:
    async with create_client(server.url) as client:
        handle = client.tracker.get_or_create(unique, input=SETUP)
        with pytest.raises(ActorError) as bad:
            await handle.add({"name": "bolt"})
        error = bad.value
        assert (error.group, error.code) == ("actor", "invalid_args")
        assert "`item`" in error.message
        assert "qty" in error.message
        assert error.metadata["parameter"] == "item"
        assert await handle.progress() == {"completed": 0, "total": 10}  # nothing changed


async def test_invalid_input_creates_nothing(server: ServerProcess, unique: str) -> None:
    async with create_client(server.url) as client:
        with pytest.raises(ActorError) as bad:
            await client.tracker.get_or_create(unique, input={"owner": "ada"}).resolve()
        assert (bad.value.group, bad.value.code) == ("actor", "invalid_input")
        assert "total" in bad.value.message
        with pytest.raises(ActorError) as missing:
            await client.tracker.get(unique).resolve()
        assert missing.value.code == "not_found"
        # A good input afterwards creates the actor.
        created = client.tracker.get_or_create(unique, input={"owner": "bo", "total": "7"})
        assert await created.state() == {"progress": {"completed": 0, "total": 7}, "owner": "bo"}


async def test_invalid_input_status_is_400(server: ServerProcess, unique: str) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=WAIT) as http:
        answer = await http.put(
            "/actors",
            json={"name": "tracker", "key": unique, "input": _cbor_base64({"owner": "ada"})},
        )
    assert answer.status_code == 400, answer.text
    assert answer.json()["code"] == "invalid_input"


async def test_connection_params_come_in_as_the_model(server: ServerProcess, unique: str) -> None:
    async with create_client(server.url) as client:
        handle = client.tracker.get_or_create(unique, input=SETUP)
        conn = handle.connect({"user": "bo"})
        assert await conn.whoami() == "bo"
        over_http = client.tracker.get_or_create(unique, params={"user": "cy"})
        assert await over_http.whoami() == "cy"
        with pytest.raises(ActorError) as bad:
            await client.tracker.get_or_create(unique, params={"name": "x"}).whoami()
        assert (bad.value.group, bad.value.code) == ("actor", "invalid_params")


async def test_a_model_state_survives_a_restart(server: ServerProcess, unique: str) -> None:
    async with create_client(server.url) as client:
        handle = client.tracker.get_or_create(unique, input=SETUP)
        await handle.add({"name": "bolt", "qty": 4})
    server.terminate()
    server.start()
    async with create_client(server.url) as client:
        handle = client.tracker.get(unique)
        # Loaded back as the model on wake: c.state.progress.completed works again.
        assert await handle.add({"name": "nut", "qty": 1}) == {"completed": 5, "total": 10}


async def test_an_invalid_state_fails_the_action_and_stores_nothing(
    server: ServerProcess, unique: str
) -> None:
    async with create_client(server.url) as client:
        handle = client.tracker.get_or_create(unique, input=SETUP)
        await handle.add({"name": "bolt", "qty": 2})
        with pytest.raises(ActorError) as bad:
            await handle.corrupt()
        assert (bad.value.group, bad.value.code) == ("state", "invalid")
        assert "progress.completed" in bad.value.message
        # The actor restarts from its stored state: the bad value was never stored.
        assert await handle.progress() == {"completed": 2, "total": 10}


async def test_dataclass_state_and_typed_dict_arguments(server: ServerProcess, unique: str) -> None:
    async with create_client(server.url, encoding="cbor") as client:
        handle = client.notes.get_or_create(unique)
        assert await handle.hit({"text": "a", "stars": 2}) == {"hits": 2, "tags": ["a"]}
        with pytest.raises(ActorError) as bad:
            await handle.hit({"text": "b"})
        assert bad.value.code == "invalid_args"
    server.terminate()
    server.start()
    async with create_client(server.url) as client:
        handle = client.notes.get(unique)
        assert await handle.hit({"text": "b", "stars": 1}) == {"hits": 3, "tags": ["a", "b"]}
