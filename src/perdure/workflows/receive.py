"""Queue receives: ``ctx.queue.next`` records a message in history and removes it from
the queue in one transaction (DESIGN §3.2), so a message is never lost or applied twice."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from perdure.errors import QueueError
from perdure.queue_message import QueueMessage
from perdure.store.encoding import decode_value
from perdure.workflows.core import RunnerCore, message_names
from perdure.workflows.history import Entry, child_location
from perdure.workflows.port import MessageQueue

__all__ = ["ReceivePrimitives"]


class ReceivePrimitives(RunnerCore):
    """``ctx.queue.next`` and ``ctx.queue.next_batch``."""

    async def queue_next(
        self,
        scope: str,
        name: str,
        names: Iterable[str] | str | None,
        timeout: float | None,
        completable: bool,
    ) -> QueueMessage:
        """Receive one message durably (raises ``queue.timed_out`` on timeout)."""
        batch = await self.queue_batch(scope, name, names, 1, timeout, completable)
        if not batch:
            raise QueueError(
                f"`{child_location(scope, name)}` timed out before receiving a message; use "
                "queue.next_batch(...) for optional or time-limited reads.",
                code="timed_out",
            )
        return batch[0]

    async def queue_batch(
        self,
        scope: str,
        name: str,
        names: Iterable[str] | str | None,
        count: int,
        timeout: float | None,
        completable: bool,
    ) -> list[QueueMessage]:
        """Receive up to ``count`` messages; recorded and removed in one transaction."""
        location, entry = self.expect(scope, name, "message")
        queue = self.queue()
        if entry is not None and entry.status == "completed":
            received = entry.data.get("m", [])
            self._report_traces([item.get("tp") for item in received])
            return [self._replayed_message(location, m) for m in received]
        wanted = message_names(names)
        queue.check_receive(wanted, completable, "ctx.queue.next()")
        await self.gate()  # a live receive: a cancel lands here, a pause holds here
        if entry is None:
            data: dict[str, Any] = {}
            if timeout is not None:
                data["t"] = self.host.now_ms() + int(timeout * 1000)
            entry = self.history.record(location, Entry("message", "pending", data=data))
        while not queue.available(wanted, 1):
            deadline = entry.data.get("t")
            if deadline is None:
                await self.wait_for_message(wanted)
            elif not await self.wait_until(int(deadline), for_messages=wanted, want_messages=True):
                break
        records = queue.available(wanted, count)
        queue.consume(records, completable=completable)
        completer = _CompletionRecorder(self, location, queue) if completable else None
        # The message and the history entry each decode the body: the user may change
        # the message's, and the entry must keep what was received.
        messages = [
            QueueMessage(
                r.id,
                r.name,
                queue.message_body(r.name, decode_value(r.body)),
                r.created_at,
                completable,
                completer=completer,
            )
            for r in records
        ]
        entry.status = "completed"
        entry.data = {
            "m": [
                {
                    "id": r.id,
                    "name": r.name,
                    "body": decode_value(r.body),
                    "at": r.created_at,
                    **({"c": False} if completable else {}),
                    # The sender's trace context: a replay reports it again.
                    **({"tp": r.trace} if r.trace is not None else {}),
                }
                for r in records
            ]
        }
        self.history.touch(location)
        self.stage()
        self._report_traces([r.trace for r in records])
        return messages

    def _report_traces(self, traces: list[str | None]) -> None:
        """Tell a tracing observer whose messages the following steps act on."""
        observer = self.host.observer
        if observer.traces:
            observer.workflow_received(self.host, traces)

    def _replayed_message(self, location: str, data: dict[str, Any]) -> QueueMessage:
        completable = "c" in data
        return QueueMessage(
            data["id"],
            data["name"],
            self.queue().message_body(data["name"], data["body"]),
            data["at"],
            completable,
            completed=bool(data.get("c")),
            completer=_CompletionRecorder(self, location, self.queue()) if completable else None,
            replayed=True,
        )


class _CompletionRecorder:
    """Completes a workflow-received message and records that in history."""

    def __init__(self, runner: RunnerCore, location: str, queue: MessageQueue) -> None:
        self._runner = runner
        self._location = location
        self._queue = queue

    async def complete(self, message: QueueMessage, response: Any) -> None:
        entry = self._runner.history.get(self._location)
        if entry is not None:
            for item in entry.data.get("m", []):
                if item["id"] == message.id:
                    item["c"] = True
            self._runner.history.touch(self._location)
            self._runner.stage()
        await self._queue.complete(message, response)
