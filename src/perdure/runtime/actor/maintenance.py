"""An operator's maintenance of a live actor: repair or fork its workflow, cancel one of
its schedules, requeue or drop one of its dead letters.

They arrive through the dispatch seam as :class:`~perdure.runtime.actor.operations.Administer`
operations (so in a cluster they run on the node that owns the actor) and run here, on
the live instance. A workflow repair stops the run (see
:func:`park_workflow`), writes the plan of :mod:`perdure.workflows.repair`
in one commit and starts the run again, which replays the repaired history.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import TYPE_CHECKING, Any

from perdure.errors import InvalidRequest, RepairRefused, ScheduleNotFound
from perdure.runtime.queues.leases import administer_dead_letter
from perdure.schemas import to_plain
from perdure.store.base import QueueMessageRecord
from perdure.store.encoding import encode_value
from perdure.workflows.core import META_LOCATION, decode_history, encode_meta
from perdure.workflows.repair import RepairPlan, plan_fork, plan_replay, plan_retry

if TYPE_CHECKING:
    from perdure.runtime.actor.instance import ActorInstance
    from perdure.runtime.actor.operations import Administer

__all__ = ["administer", "cancel_schedule", "repair_workflow"]

# How long a repair waits for a step in progress to finish before answering
# ``workflow.busy``.
STEP_PATIENCE = 5.0

# One repair at a time per live actor.
_locks: weakref.WeakKeyDictionary[ActorInstance, asyncio.Lock] = weakref.WeakKeyDictionary()


async def administer(instance: ActorInstance, operation: Administer) -> Any:
    """Run the operator's operation on the live actor: ``requeue``/``drop`` a dead
    letter (the message after a requeue), ``unschedule`` a job (``None``), or
    ``retry``/``replay``/``fork`` its workflow (the workflow's status once repaired)."""
    kind, argument = operation.kind, operation.argument
    if kind in ("requeue", "drop"):
        instance.definition.require_queues()  # queue.not_configured
        queue = instance.queue
        assert queue is not None  # an awake actor with queues has one
        return await administer_dead_letter(queue, kind, argument)
    if kind == "unschedule":
        await cancel_schedule(instance, argument or "")
        return None
    return await repair_workflow(instance, kind, argument, operation.values or {})


async def repair_workflow(
    instance: ActorInstance, kind: str, location: str | None, given: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Retry (``kind="retry"``), replay from ``location`` (``"replay"``) or fork from it
    (``"fork"``, with ``given``'s ``input`` and ``message``); returns the workflow's
    status once the repaired history is durable and the run restarted (``run``: its
    number)."""
    if instance.definition.kind != "workflow":
        raise RepairRefused(
            f"Actor `{instance.name}` has no workflow to repair.", code="not_a_workflow"
        )
    if kind in ("replay", "fork") and not location:
        raise InvalidRequest(f"Say which step to {kind} from (`from`).", code="missing_step")
    async with _locks.setdefault(instance, asyncio.Lock()):
        was_running = await park_workflow(instance, STEP_PATIENCE)
        await instance.commits.flush_now()
        stored = await instance.core.store.load_history(instance.actor_id)
        meta, entries = decode_history(stored)
        meta = meta or {"status": "pending"}
        try:
            if kind == "retry":
                plan = plan_retry(meta, entries)
            elif kind == "fork":
                assert location is not None
                plan = _fork(instance, meta, entries, location, given or {})
            else:
                assert location is not None
                plan = plan_replay(meta, entries, location)
        except Exception:
            if was_running:
                instance.restart_run()  # refused: the run goes on as it was
            raise
        await _apply(instance, plan)
        instance.restart_run()
    return {
        "status": plan.meta["status"],
        "error": plan.meta.get("error"),
        "output": plan.meta.get("output"),
        "run": plan.meta.get("run", 1),
    }


def _fork(
    instance: ActorInstance,
    meta: dict[str, Any],
    entries: dict[str, Any],
    location: str,
    given: dict[str, Any],
) -> RepairPlan:
    """The fork's plan, its input and message checked as a create input and a send
    would be (``actor.invalid_input``, ``queue.invalid_message``)."""
    definition = instance.definition
    if "input" in given:
        given = {**given, "input": definition.check_input(given["input"])}
    plan = plan_fork(meta, entries, location, given)
    if "message" in given:
        first = plan.requeue[0]
        first["body"] = to_plain(definition.validate_message(first["name"], first["body"]))
    return plan


async def park_workflow(instance: ActorInstance, patience: float) -> bool:
    """Stop the workflow's run so its history can be repaired; True if it was running.

    A run that is waiting (a sleep, a queue wait, a retry's backoff) is stopped at
    once: like a crash there, nothing is lost. A run executing a step is given
    ``patience`` seconds to finish it or start waiting (``workflow.busy`` after).
    """
    task = instance.run_task
    if task is None or task.done():
        return False
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience
    while not task.done() and not instance.activity.run_sleep_ok:
        if loop.time() >= deadline:
            raise RepairRefused(
                "The workflow is running a step; try again once it waits or has finished.",
                code="busy",
            )
        await asyncio.wait([task], timeout=0.01)
    if task.done():
        return False
    task.cancel()
    await asyncio.wait([task])
    return True


async def _apply(instance: ActorInstance, plan: RepairPlan) -> None:
    """Write the plan in one commit and wait until it is durable."""
    owner = instance.label
    puts = {
        location: encode_value(entry.to_record(), what=f"workflow entry `{location}`", owner=owner)
        for location, entry in plan.puts.items()
    }
    puts[META_LOCATION] = encode_meta(plan.meta)
    for location, record in plan.archive.items():  # a fork's archived run, as it was
        puts[location] = encode_value(record, what=f"archived `{location}`", owner=owner)
    instance.commits.write_history(puts, plan.deletes)
    if plan.requeue:
        queue = instance.queue
        if queue is None:
            raise RepairRefused(
                "The replayed part of the workflow took queue messages, but the actor "
                "declares no queues any more.",
                code="replay_unsupported",
            )
        for message in plan.requeue:
            body = encode_value(message["body"], what="a requeued message", owner=owner)
            record = QueueMessageRecord(
                int(message["id"]), message["name"], body, message["at"], message.get("tp")
            )
            queue.restore(record)  # with its sender's trace context, if it had one
    await instance.commits.flush_now()


async def cancel_schedule(instance: ActorInstance, schedule_id: str) -> None:
    """Delete one of the actor's schedules (a one-shot or a cron/interval job, with its
    fire history); ``actor.schedule_not_found`` if it has none with this id."""
    manager = instance.schedules
    if manager.remove(schedule_id) is None:
        raise ScheduleNotFound(
            f"The actor has no schedule `{schedule_id}`.", metadata={"schedule_id": schedule_id}
        )
    manager.sync_alarm()
    await manager.flush()
