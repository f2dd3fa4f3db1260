"""Child workflows on a three-node PostgreSQL cluster, with ``kill -9``.

A ``fanout`` parent starts three ``task`` children (``children_app.py``). A child is
created on its parent's node (an actor lives where its first request lands), then waits
for a ``go`` message asleep; the test sends ``go`` through another node, which takes the
child: the children run on other nodes than their parent. What counts a child's starts is
durable: its ``begin`` step appends the pid of its node to its state, in the step's own
commit, so a child whose run started twice would show two.

- The parent's node is killed while its children work elsewhere: the children's ends
  wake the parent on a survivor (nobody calls it), which completes with every output.
- The parent's node is killed while it creates a child (inside the child's creation,
  before the parent has recorded it): the parent resumes on a survivor by its alarm and
  creates each child once; then the node the children work on is killed, and they finish
  elsewhere, each started once.
- A cancelled parent's cascade reaches a child that has ended on another node, which
  answers ``workflow.not_running`` as a forwarded error: ignored, the parent ends
  cancelled (it once never ended).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from perdure.client import AsyncClient
from perdure.errors import WorkflowCancelled
from tests.scenarios.workflows.children_app import FANOUT, LOG_ENV
from tests.support.admin_api import actor_details, actors_named
from tests.support.cluster import Cluster
from tests.support.wait import eventually

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]

REGISTRY = "tests.scenarios.workflows.children_app:registry"
WAIT = 30.0
OUTPUTS = [10 * index for index in range(FANOUT)]


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "children.log"


@pytest.fixture
def cluster_env(log: Path) -> dict[str, str]:
    return {LOG_ENV: str(log)}


async def test_a_parent_killed_while_its_children_run_on_other_nodes(
    cluster: Cluster, log: Path
) -> None:
    first, second, third = cluster.urls
    async with AsyncClient(first) as client:
        parent = client.fanout.get_or_create("a")  # created, and running, on node 0
        parent_id = await parent.resolve()
        assert await parent.pid() == cluster.node(0).pid
    children = await _started_children(second, parent_id)
    runs_on = {child: (second, third)[index % 2] for index, child in enumerate(children)}
    await _let_go(runs_on)
    await eventually(lambda: _all_begun(third, children), timeout=WAIT, what="the children")
    await asyncio.to_thread(cluster.node(0).kill)  # the parent waits; its children work

    # Nobody calls the parent: the children's ends wake it on a survivor.
    await eventually(lambda: _status_is(third, parent_id, "completed"), timeout=WAIT)
    async with AsyncClient(second) as client:
        assert await client.fanout.get_for_id(parent_id).workflow_result(timeout=WAIT) == OUTPUTS
    await asyncio.to_thread(cluster.node(0).start)
    await asyncio.sleep(0.5)  # anything the restarted node would run again, it runs now

    pids = {url: node.pid for url, node in zip(cluster.urls, cluster.nodes, strict=True)}
    for child, url in runs_on.items():
        state = (await actor_details(first, child))["state"]
        assert state["starts"] == [pids[url]], f"child {child}"  # started once, over there
        assert state["works"] == [pids[url]], f"child {child}"
    assert sorted(_created(log)) == sorted(children)  # each created once, no other
    assert len(await actors_named(first, "task")) == FANOUT
    assert (await actor_details(first, parent_id))["workflow"]["status"] == "completed"


async def test_a_parent_killed_as_it_starts_a_child_then_its_childrens_node(
    cluster: Cluster, log: Path
) -> None:
    first, second, _ = cluster.urls
    async with AsyncClient(first) as client:  # the parent runs on node 0
        parent_id = await client.fanout.get_or_create("b", input={"slow": 1}).resolve()
    # Child 1's creation pauses (on_create): the parent has not recorded it yet.
    await eventually(lambda: _created_index(log, 1), timeout=WAIT, what="child 1's creation")
    await asyncio.to_thread(cluster.node(0).kill)

    # The parent's alarm wakes it on a survivor once node 0's leases lapse.
    children = await _started_children(second, parent_id)
    async with AsyncClient(second) as client:
        parent_pid = await client.fanout.get_for_id(parent_id).pid()
    survivors = [cluster.node(1), cluster.node(2)]
    assert parent_pid in [node.pid for node in survivors]
    parent_node = next(node for node in survivors if node.pid == parent_pid)
    work_node = next(node for node in survivors if node.pid != parent_pid)
    await _let_go(dict.fromkeys(children, work_node.url))
    await eventually(lambda: _all_begun(parent_node.url, children), timeout=WAIT)
    work_pid = work_node.pid
    await asyncio.to_thread(work_node.kill)  # every child is inside its work step
    await asyncio.to_thread(cluster.node(0).start)

    # Nobody calls the children or the parent: alarms bring the children back, their
    # ends the parent.
    await eventually(lambda: _status_is(parent_node.url, parent_id, "completed"), timeout=WAIT)
    async with AsyncClient(parent_node.url) as client:
        assert await client.fanout.get_for_id(parent_id).workflow_result(timeout=WAIT) == OUTPUTS

    created = _created(log)
    assert sorted(set(created)) == sorted(children)  # three actors, whatever the kill hit
    assert created.count(children[1]) in (1, 2)  # its on_create again if the kill beat it
    assert len(await actors_named(parent_node.url, "task")) == FANOUT
    cut = 0
    for child in children:
        state = (await actor_details(parent_node.url, child))["state"]
        assert state["starts"] == [work_pid], f"child {child}"  # started once
        assert len(state["works"]) == 1, f"child {child}"  # its work recorded once
        if state["works"] != [work_pid]:
            assert _worked(log, child).count(work_pid) == 1  # cut by the kill, run again
            cut += 1
    assert cut >= 1, "no child's work was cut by the kill of its node"


async def test_cancelling_a_parent_skips_a_child_that_ended_on_another_node(
    cluster: Cluster,
) -> None:
    """The cascade's cancel of a child that has ended is answered ``workflow.not_running``
    by the child's node (a forwarded error): ignored, as on one node."""
    first, second, _ = cluster.urls
    async with AsyncClient(first) as on_first, AsyncClient(second) as on_second:
        parent = on_first.fanout.get_or_create("c")  # waits for task-0 first
        parent_id = await parent.resolve()
        children = await _started_children(second, parent_id)
        ended = on_second.task.get_for_id(children[-1])
        async with ended.connect() as held:  # keeps it awake on node 1 once it has ended
            await held.wait_open(timeout=WAIT)
            await ended.send("go", {})
            assert await ended.workflow_result(timeout=WAIT) == OUTPUTS[-1]
            await parent.cancel_workflow("no longer needed")
            with pytest.raises(WorkflowCancelled) as cancelled:
                await parent.workflow_result(timeout=WAIT)
            assert cancelled.value.reason == "no longer needed"
            assert (await actor_details(first, children[-1]))["actor"]["awake"]
        for child in children[:-1]:
            with pytest.raises(WorkflowCancelled):
                await on_first.task.get_for_id(child).workflow_result(timeout=WAIT)
        assert await ended.workflow_result(timeout=WAIT) == OUTPUTS[-1]


async def _started_children(url: str, parent_id: str) -> list[str]:
    """The parent's children, once it has recorded all of them and each waits asleep."""
    found: list[str] = []

    async def started() -> bool:
        nonlocal found
        listed = (await actor_details(url, parent_id))["workflow"]["children"]
        found = [child["actor_id"] for child in listed if child["actor_id"]]
        if len(found) < FANOUT:
            return False
        for child in found:
            if (await actor_details(url, child))["actor"]["awake"]:
                return False
        return True

    await eventually(started, timeout=WAIT, interval=0.05, what="the children, asleep")
    return found


async def _let_go(runs_on: dict[str, str]) -> None:
    """Send each child ``go`` through the node given: that node takes it."""
    for child, url in runs_on.items():
        async with AsyncClient(url) as client:
            await client.task.get_for_id(child).send("go", {})


async def _all_begun(url: str, children: list[str]) -> bool:
    for child in children:
        if not (await actor_details(url, child))["state"]["starts"]:
            return False
    return True


async def _status_is(url: str, actor_id: str, status: str) -> bool:
    try:
        details = await actor_details(url, actor_id)
    except httpx.HTTPError:
        return False
    return bool(details["workflow"]["status"] == status)


def _lines(log: Path, kind: str) -> list[list[str]]:
    if not log.exists():
        return []
    return [line.split()[1:] for line in log.read_text().splitlines() if line.startswith(kind)]


def _created(log: Path) -> list[str]:
    """The id of each child creation's on_create, in order (once per attempt)."""
    return [fields[0] for fields in _lines(log, "created ")]


def _created_index(log: Path, index: int) -> bool:
    return any(fields[1] == str(index) for fields in _lines(log, "created "))


def _worked(log: Path, child: str) -> list[int]:
    """The pid of each attempt of ``child``'s work step."""
    return [int(fields[1]) for fields in _lines(log, "work ") if fields[0] == child]
