"""An actor that misuses leases on purpose: ``attempt(case)`` returns the code of the
error the misuse raised inside the actor (``None``: none)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from perdure import ActionContext, actor, setup
from perdure import queue as queue_definition
from perdure.errors import PerdureError
from tests.support.apps.leases import LEASE


async def _options_without_completable(c: ActionContext) -> None:
    await c.queue.next(names="jobs", timeout=0, max_attempts=2)


async def _nack_unleased(c: ActionContext) -> None:
    message = await c.queue.next(names="jobs", timeout=0)
    assert message is not None
    await message.nack()


async def _nack_twice(c: ActionContext) -> None:
    message = await c.queue.next(names="jobs", timeout=0, completable=True)
    assert message is not None
    await message.nack()
    await message.nack()


async def _keep(c: ActionContext) -> None:
    c.vars["kept"] = await c.queue.next(names="jobs", timeout=0, completable=True)


async def _lease_lost(c: ActionContext) -> None:
    # Delivered again since the kept delivery's lease ran out: the kept one is stale.
    again = await c.queue.next(names="jobs", timeout=0, completable=True)
    assert again is not None
    assert again.attempts == c.vars["kept"].attempts + 1
    await c.vars["kept"].complete()


CASES: dict[str, Callable[[ActionContext], Awaitable[None]]] = {
    "options_without_completable": _options_without_completable,
    "nack_unleased": _nack_unleased,
    "nack_twice": _nack_twice,
    "keep": _keep,
    "lease_lost": _lease_lost,
}


async def _attempt(c: ActionContext, case: str) -> str | None:
    try:
        await CASES[case](c)
    except PerdureError as exc:
        return exc.code
    return None


registry = setup(
    use={
        "misuse": actor(
            state={},
            vars={},
            queues={"jobs": queue_definition(visibility_timeout=LEASE)},
            actions={"attempt": _attempt},
        )
    }
)
