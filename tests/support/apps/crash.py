"""The seed's progress actor, instrumented for crash tests.

Its ``apply-job`` step also appends ``"<value> <pid>"`` to the file named by the
``PERDURE_SIDE_EFFECTS`` environment variable: an external side effect the test can count
(a step re-runs only if the process died before the step committed). ``queueSize`` tells
the test when the queue has drained.
"""

from __future__ import annotations

import os

from examples.progress import Job, Progress, apply_progress_job, mark_progress_running

from perdure import StepContext, WorkflowContext, event, queue, setup, workflow


def record_side_effect(value: int) -> None:
    record_side_effect_line(str(value))


def record_side_effect_line(text: str) -> None:
    """Append ``"<text> <pid>"`` to the side-effect file, if the test named one."""
    path = os.environ.get("PERDURE_SIDE_EFFECTS")
    if not path:
        return
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, f"{text} {os.getpid()}\n".encode())
    finally:
        os.close(descriptor)


def apply_job_with_side_effect(step: StepContext, value: int) -> None:
    record_side_effect(value)
    apply_progress_job(step, value)


async def run_progress(ctx: WorkflowContext) -> None:
    async def iteration(loop_ctx: WorkflowContext) -> None:
        message = await loop_ctx.queue.next("wait-job")
        await loop_ctx.step("mark-running", mark_progress_running)
        value = message.body["value"]
        await loop_ctx.step("apply-job", lambda step: apply_job_with_side_effect(step, value))

    await ctx.loop("progress-loop", iteration)


progress_actor = workflow(
    state={"progress": {"stage": "idle", "completed": 0, "total": 0}, "sum": 0},
    events={"progressUpdated": event(Progress)},
    queues={"jobs": queue(Job)},
    run=run_progress,
    actions={"getState": lambda c: c.state, "queueSize": lambda c: c.queue.size()},
)

registry = setup(use={"progressActor": progress_actor})
