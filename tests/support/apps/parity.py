"""Fixture actors of rivetkit's own driver tests (``rivet-dev/rivet``,
``rivetkit-typescript/packages/rivetkit/fixtures/driver-test-suite/``) in perdure's API, for
the official-client compatibility suite (issue 34). Each keeps the original's names and
shapes, so the checks in ``tests/scenarios/compat/suite.ts`` read like the original tests:

- ``queueActor`` (``queue.ts``): ``waitForSignalAbort``, ``waitForActorAbortWithSignal``
  and ``iterWithSignalAbort``, a receive stopped by its ``signal=`` or by the actor's
  destruction;
- ``workflowErrorHookActor`` (``workflow.ts``): ``on_error`` keeps every event in the
  state (a step that fails once, retried after 1 ms); ``workflowErrorHookEffectsActor``
  also broadcasts it and sends it to a queue, once ``startWorkflow`` lets the run start;
- ``workflowTryActor`` (``workflow.ts``): ``try_step`` and ``try_`` around a failing join;
- ``largePayloadActor`` (``large-payloads.ts``): a large request, a large answer.
"""

from __future__ import annotations

import asyncio
from typing import Any

from perdure import (
    ActionContext,
    StepContext,
    WorkflowContext,
    actor,
    event,
    queue,
    workflow,
)
from perdure.errors import ActorAborted

__all__ = ["PARITY_ACTORS"]


def _aborted(error: ActorAborted) -> dict[str, str]:
    return {"group": error.group, "code": error.code}


async def _wait_for_signal_abort(c: ActionContext) -> Any:
    stop = asyncio.Event()
    stop.set()  # controller.abort() before the receive
    try:
        await c.queue.next(names="abort", timeout=10, signal=stop)
    except ActorAborted as error:
        return _aborted(error)
    return {"ok": False}


async def _wait_for_actor_abort_with_signal(c: ActionContext) -> Any:
    asyncio.get_running_loop().call_later(0.01, c.destroy)
    try:
        await c.queue.next(names="abort", timeout=10, signal=asyncio.Event())
    except ActorAborted as error:
        return _aborted(error)
    return {"ok": False}


async def _iter_with_signal_abort(c: ActionContext) -> Any:
    stop = asyncio.Event()
    stop.set()
    async for _message in c.queue.iter(names="abort", signal=stop):
        return {"ok": False}
    return {"ok": True}


queue_actor = actor(
    queues={"abort": queue()},
    actions={
        "waitForSignalAbort": _wait_for_signal_abort,
        "waitForActorAbortWithSignal": _wait_for_actor_abort_with_signal,
        "iterWithSignalAbort": _iter_with_signal_abort,
    },
)


def _flaky(step: StepContext) -> None:
    step.state["attempts"] += 1
    if step.state["attempts"] == 1:
        raise RuntimeError("workflow hook failed")


async def _error_hook_run(ctx: WorkflowContext) -> None:
    # rivetkit's retryBackoffBase/Max of 1 ms.
    await ctx.step(
        "flaky", _flaky, max_retries=2, retry_backoff_base=0.001, retry_backoff_max=0.001
    )
    await ctx.sleep("idle", 60)


def _keep_error(c: Any, event: dict[str, Any]) -> None:
    c.state["events"].append(event)


workflow_error_hook_actor = workflow(
    state={"attempts": 0, "events": []},
    run=_error_hook_run,
    on_error=_keep_error,
    actions={"getErrorState": lambda c: c.state},
)


async def _effects_run(ctx: WorkflowContext) -> None:
    await ctx.queue.next("start", names=["start"])
    await ctx.step(
        "flaky", _flaky, max_retries=2, retry_backoff_base=0.001, retry_backoff_max=0.001
    )
    await ctx.sleep("idle", 60)


async def _report_error(c: Any, event: dict[str, Any]) -> None:
    c.state["lastError"] = event
    c.state["errorCount"] += 1
    c.broadcast("workflowError", event)
    await c.queue.send("errors", event)


async def _receive_queued_error(c: ActionContext) -> Any:
    message = await c.queue.next(names=["errors"], timeout=1)
    return None if message is None else message.body


async def _start_workflow(c: ActionContext) -> None:
    await c.queue.send("start", None)


workflow_error_hook_effects_actor = workflow(
    state={"attempts": 0, "lastError": None, "errorCount": 0},
    events={"workflowError": event()},
    queues={"start": queue(), "errors": queue()},
    run=_effects_run,
    on_error=_report_error,
    actions={
        "getErrorState": lambda c: c.state,
        "startWorkflow": _start_workflow,
        "receiveQueuedError": _receive_queued_error,
    },
)


def _charge_card(step: StepContext) -> None:
    step.state["innerWrites"] += 1
    raise RuntimeError("card declined")


async def _branch_ok(ctx: WorkflowContext) -> str:
    return "ok"


async def _branch_bad(ctx: WorkflowContext) -> str:
    raise RuntimeError("join failed")


async def _parallel_flow(block: WorkflowContext) -> Any:
    return await block.join("parallel", {"ok": _branch_ok, "bad": _branch_bad})


async def _try_run(ctx: WorkflowContext) -> None:
    step_result = await ctx.try_step("charge-card", _charge_card, max_retries=0)
    join_result = await ctx.try_("parallel-flow", _parallel_flow)

    def store(step: StepContext) -> None:
        if not step_result.ok and step_result.failure is not None:
            failure = step_result.failure
            step.state["tryStepFailure"] = {
                "kind": failure["kind"],
                "message": failure["error"]["message"],
                "attempts": failure["attempts"],
            }
        if not join_result.ok and join_result.failure is not None:
            failure = join_result.failure
            step.state["tryJoinFailure"] = f"{failure['source']}:{failure['name']}"

    await ctx.step("store-try-results", store)


workflow_try_actor = workflow(
    state={"innerWrites": 0, "tryStepFailure": None, "tryJoinFailure": None},
    run=_try_run,
    actions={"getState": lambda c: c.state},
)


def _process_large_request(c: ActionContext, data: dict[str, list[str]]) -> dict[str, Any]:
    items = data["items"]
    return {"itemCount": len(items), "firstItem": items[0], "lastItem": items[-1]}


def _get_large_response(c: ActionContext, item_count: int) -> dict[str, list[str]]:
    return {
        "items": [f"Item {i} with some additional text to increase size" for i in range(item_count)]
    }


large_payload_actor = actor(
    actions={
        "processLargeRequest": _process_large_request,
        "getLargeResponse": _get_large_response,
    },
)

PARITY_ACTORS = {
    "queueActor": queue_actor,
    "workflowErrorHookActor": workflow_error_hook_actor,
    "workflowErrorHookEffectsActor": workflow_error_hook_effects_actor,
    "workflowTryActor": workflow_try_actor,
    "largePayloadActor": large_payload_actor,
}
