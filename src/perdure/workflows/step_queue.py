"""``step.queue`` of a workflow step: its sends are checked at once and sent only when the
attempt succeeds, staged beside the step's record so that one commit carries both. A
failed attempt sends nothing, so a retried step never sends twice, and a crash before the
step's commit leaves neither the record nor the messages."""

from __future__ import annotations

import datetime as _dt
from typing import TYPE_CHECKING, Any

from perdure._time import send_delay

if TYPE_CHECKING:
    from perdure.workflows.context import StepContext

__all__ = ["StepQueue"]


class StepQueue:
    """``step.queue``: a workflow step's sends, which leave with the step."""

    def __init__(self, step: StepContext) -> None:
        self._step = step

    async def send(
        self,
        name: str,
        body: Any,
        *,
        delay: float | _dt.timedelta | None = None,
        at: _dt.datetime | int | None = None,
    ) -> None:
        """Send a message with the step: checked now, sent only if the step succeeds,
        durable with the step's commit (a failed attempt sends nothing). ``delay`` or
        ``at``: a delayed send, received from then on (docs/queues.md)."""
        step = self._step
        step._check("queue.send")
        seconds, at_ms = send_delay(delay, at, wait=False, call="ctx.queue.send()")
        host = step._host
        span = host.observer.queue_send(host, name)  # counted like any other send
        try:
            data = host.require_queue().check_send(name, body)
        except BaseException as exc:
            if span is not None:
                span.end(exc)
            raise
        step._sends.append((name, data, seconds, at_ms))
        if span is not None:
            span.end(None)
