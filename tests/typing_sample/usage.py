"""Code that calls the sample app through the three typed clients, typed as intended;
each line marked ``# planted: <code>`` is a mistake mypy must report with that code, and
it must report nothing else (tests/typed/test_typed_mypy.py). Never run: only checked."""

from __future__ import annotations

from perdure.client import Client, create_client
from perdure.testing import ActorTestEnv
from tests.typing_sample.app import Item, Job, Owner, registry
from tests.typing_sample.app_types import AppClient, CounterHandle, SyncAppClient


async def network(url: str) -> None:
    async with AppClient(create_client(url)) as client:
        counter = client.counter.get_or_create("main")
        total: int = await counter.increment(5)
        items: list[Item] = await counter.add(Item(name="bolt", qty=total))
        print(items[0].qty + 1, await counter.increment(by=2))
        await client.countr.get("main").increment(1)  # planted: attr-defined
        await counter.incremnt(1)  # planted: attr-defined
        await counter.increment("five")  # planted: arg-type
        name: str = await counter.increment(1)  # planted: assignment
        owner = await counter.owner()
        print(owner.name)  # planted: union-attr
        print(name, await counter.count(), await counter.untyped.action("send", "x"))
        conn = counter.connect()
        conn.on("changed", print)
        conn.on("chnged", print)  # planted: arg-type
        renamed: str = await conn.profile.rename("ada", True)
        await counter.profile.rename(7)  # planted: arg-type
        print(renamed)


async def workflow(url: str) -> None:
    async with AppClient(create_client(url)) as client:
        jobs = client.jobs.get_or_create("j", input=Owner(name="ada"))
        await jobs.send("jobs", Job(value=1))
        await jobs.send("jbos", Job(value=1))  # planted: call-overload
        await jobs.send("jobs", {"value": "one"})  # planted: call-overload
        total: int = await jobs.workflow_result(timeout=5)
        print(total.upper())  # planted: attr-defined
        client.jobs.get_or_create("k", input={"name": "ada"})  # planted: arg-type
        await client.counter.get("main").send("jobs", {})  # planted: call-overload
        await client.counter.get("main").workflow_status()  # planted: attr-defined


def blocking(url: str) -> None:
    with SyncAppClient(Client(url)) as client:
        counter = client.counter.get("main")
        total: int = counter.increment(5)
        print(total + counter.add(Item(name="nut", qty=1))[0].qty)
        client.counter.get("main").incremnt()  # planted: attr-defined
        counter.increment([1])  # planted: arg-type
        counter.increment(1).append(2)  # planted: attr-defined
        print(client.jobs.get("j").workflow_result() + 1)


async def in_process() -> None:
    async with ActorTestEnv(registry) as env:
        client = AppClient(env.client)
        counter: CounterHandle = client.counter.get_or_create("main")
        await counter.increment(True)
        relayed: int = await client.relayer.get_or_create("r").relay("main", 2)
        await client.relayer.get_or_create("r").relay("main", "2")  # planted: arg-type
        print(relayed + await client.countre.get("main").increment())  # planted: attr-defined
