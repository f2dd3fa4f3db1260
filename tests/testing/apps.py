"""Actors whose timers span hours and days, for the test kit's tests."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from perdure import ActorContext, StepContext, WorkflowContext, actor, queue, setup, workflow

# Attempts of the flaky step, by actor key (a step's side effects outside its state are
# not durable: the test reads them here).
ATTEMPTS: dict[str, int] = {}


def _remind(step: StepContext) -> None:
    step.state["sent"].append("reminder")


async def _onboard(ctx: WorkflowContext) -> None:
    await ctx.step("welcome", lambda step: step.state["sent"].append("welcome"))
    await ctx.sleep("three days", timedelta(days=3))
    await ctx.step("remind", _remind)


def _flaky(step: StepContext) -> str:
    key = step.key[0]
    ATTEMPTS[key] = ATTEMPTS.get(key, 0) + 1
    if ATTEMPTS[key] < 3:
        raise RuntimeError(f"attempt {ATTEMPTS[key]} fails")
    return "done"


async def _retrying(ctx: WorkflowContext) -> str:
    # Waits 2 × 300 s after the first failure, 4 × 300 s after the second.
    result: str = await ctx.step(
        "flaky", _flaky, max_retries=5, retry_backoff_base=300, retry_backoff_max=3600
    )
    return result


async def _asking(ctx: WorkflowContext) -> None:
    answers = await ctx.queue.next_batch("answer", names="answers", timeout=3600)
    await ctx.step("record", lambda step: step.state.update(answer=[m.body for m in answers]))


async def _must_reply(ctx: WorkflowContext) -> None:
    await ctx.queue.next("reply", names="answers", timeout=timedelta(hours=2))


async def _on_create(c: ActorContext, _input: Any) -> None:
    await c.cron.every(name="hourly", interval=timedelta(hours=1), action="tick")


def _tick(c: ActorContext, *_fire: Any) -> None:
    c.state["ticks"] += 1


async def _next_tick(c: ActorContext) -> int | None:
    job = await c.cron.get("hourly")
    return None if job is None else job.next_run_at


async def _later(c: ActorContext, seconds: float) -> None:
    await c.schedule.after(seconds, "tick")


async def _listen(c: ActorContext) -> None:
    # A plain run handler: a receive with a timeout, then record what came (or None).
    while True:
        message = await c.queue.next(names="inbox", timeout=600)
        c.state["heard"].append(None if message is None else message.body)
        await c.save_state(immediate=True)


def _store(c: Any, count: int) -> None:
    c.kv.put_batch({f"book:{index}": {"n": index} for index in range(count)})
    c.kv.put(b"\x00raw", "bytes")


registry = setup(
    use={
        "onboarding": workflow(
            state={"sent": []}, run=_onboard, actions={"sent": lambda c: c.state["sent"]}
        ),
        "retrying": workflow(run=_retrying),
        "asking": workflow(
            state={"answer": None},
            queues={"answers": queue()},
            run=_asking,
            actions={"answer": lambda c: c.state["answer"]},
        ),
        "deadline": workflow(queues={"answers": queue()}, run=_must_reply),
        "clock": actor(
            state={"ticks": 0},
            on_create=_on_create,
            actions={
                "tick": _tick,
                "ticks": lambda c: c.state["ticks"],
                "next_tick": _next_tick,
                "later": _later,
            },
        ),
        "shelf": actor(actions={"store": _store}),
        "listener": actor(
            state={"heard": []},
            queues={"inbox": queue()},
            run=_listen,
            actions={"heard": lambda c: c.state["heard"]},
            # Awake for its receives (an idle actor would sleep after 30 s and end them).
            options={"sleep_timeout": 86_400},
        ),
    }
)
