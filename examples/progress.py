"""The seed's progress pattern: store workflow progress in state and broadcast it.

Each queued job runs through two durable steps. Progress lives in the actor state, so
replay and recovery always restore it; every change is broadcast to connected clients
(after its step commits, so a client never sees progress that a crash takes back).
"""

from __future__ import annotations

from typing import Literal

from typing_extensions import TypedDict  # pydantic needs this TypedDict on Python < 3.12

from perdure import StepContext, WorkflowContext, event, queue, setup, workflow


class Progress(TypedDict):
    stage: Literal["idle", "running", "completed"]
    completed: int
    total: int


class Job(TypedDict):
    value: int


def mark_progress_running(step: StepContext) -> None:
    progress = step.state["progress"]
    step.state["progress"] = {
        "stage": "running",
        "completed": progress["completed"],
        "total": progress["total"] + 1,
    }
    step.broadcast("progressUpdated", step.state["progress"])


def apply_progress_job(step: StepContext, value: int) -> None:
    step.state["sum"] += value
    progress = step.state["progress"]
    step.state["progress"] = {
        "stage": "completed",
        "completed": progress["completed"] + 1,
        "total": progress["total"],
    }
    step.broadcast("progressUpdated", step.state["progress"])


async def run_progress(ctx: WorkflowContext) -> None:
    async def iteration(loop_ctx: WorkflowContext) -> None:
        message = await loop_ctx.queue.next("wait-job")
        await loop_ctx.step("mark-running", mark_progress_running)
        value = message.body["value"]
        await loop_ctx.step("apply-job", lambda step: apply_progress_job(step, value))

    await ctx.loop("progress-loop", iteration)


progress_actor = workflow(
    state={"progress": {"stage": "idle", "completed": 0, "total": 0}, "sum": 0},
    events={"progressUpdated": event(Progress)},
    queues={"jobs": queue(Job)},
    run=run_progress,
    actions={"getState": lambda c: c.state},
)

registry = setup(use={"progressActor": progress_actor})
