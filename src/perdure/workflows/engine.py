"""The durable run: executes a workflow function against its history.

The workflow function runs from the top at every start. Each primitive looks up its
entry in the history: a completed entry returns its recorded result without running;
otherwise the primitive runs and records the result. Recording goes through the actor's
commit pipeline, so a step's history entry, the actor state and the queue messages it
consumed or sent commit in one transaction (DESIGN §3.1, §3.2). Bookkeeping that needs no
immediate durability (a message taken from the queue, a loop advancing) is *staged* and
rides on the next commit: after a crash the uncommitted part is simply done again.

Events broadcast by a step are delivered only after the step's commit (DESIGN §3.3).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from perdure.errors import ActorAborted, PerdureError, QueueError
from perdure.runtime.queue import ActorQueue, QueueMessage
from perdure.store.codec import decode_value, encode_value
from perdure.workflows.context import (
    LoopBreak,
    LoopContinue,
    StepContext,
    TryResult,
    WorkflowContext,
)
from perdure.workflows.errors import (
    CriticalError,
    Evicted,
    HistoryDiverged,
    JoinError,
    RaceError,
    StepExhausted,
    WorkflowFailure,
)
from perdure.workflows.history import (
    ROOT,
    Divergence,
    Entry,
    History,
    backoff_delay,
    child_location,
    iteration_scope,
    validate_name,
)
from perdure.workflows.runner_support import RollbackRegistry, error_info, run_step_fn

if TYPE_CHECKING:
    from perdure.runtime.instance import ActorInstance

__all__ = ["META_LOCATION", "WorkflowRunner"]

META_LOCATION = "~meta"
_log = logging.getLogger("perdure.workflows")


class WorkflowRunner:
    """Runs one actor's workflow; lives as long as the actor is awake."""

    def __init__(self, instance: ActorInstance, fn: Callable[[WorkflowContext], Any]) -> None:
        self.instance = instance
        self.fn = fn
        self.history = History()
        self.meta: dict[str, Any] = {"status": "pending"}
        self.rollbacks = RollbackRegistry()
        self._deferred_events: list[tuple[str, tuple[Any, ...]]] = []

    # ------------------------------------------------------------------ running

    async def run(self) -> None:
        """Load history and run (or replay) the workflow until it ends or is evicted."""
        await self._load()
        if self.meta.get("status") == "completed":
            return
        self._set_meta(status="running", error=None)
        self._mark_busy()
        try:
            output = await _maybe_await(self.fn(WorkflowContext(self, ROOT)))
            self._check_complete(ROOT)
            self._set_meta(status="completed", output=output)
            self.instance.set_alarm("workflow", None)
            await self.commit()
        except Evicted:
            return
        except ActorAborted:
            if self.instance.abort.aborted:
                return
            raise
        except Divergence as exc:
            await self._fail(HistoryDiverged(exc.location, str(exc)), rollback=False)
        except WorkflowFailure as exc:
            await self._fail(exc, rollback=True)
        except Exception as exc:
            self.instance.log.exception("the workflow raised outside a step")
            await self._fail(exc, rollback=True)

    async def _load(self) -> None:
        raw = await self.instance.runtime.store.load_history(self.instance.actor_id)
        meta = raw.pop(META_LOCATION, None)
        if meta is not None:
            self.meta = decode_value(meta)
        self.history = History({loc: Entry.from_record(decode_value(b)) for loc, b in raw.items()})
        queue = self.instance.queue
        if queue is not None:
            for entry in self.history.entries.values():
                if entry.kind == "message":
                    for message in entry.data.get("m", []):
                        if message.get("c") is False:
                            queue.hold(message["id"])

    def _set_meta(self, **fields: Any) -> None:
        self.meta.update(fields)
        self.instance.pending_commit().history_put[META_LOCATION] = encode_value(
            self.meta, what="workflow status"
        )

    async def _fail(self, error: BaseException, *, rollback: bool) -> None:
        info = error_info(error)
        self.instance.log.warning("workflow failed: %s", info["message"])
        if rollback:
            try:
                await self.rollbacks.run(self)
            except Exception as exc:
                info = {**info, "rollbackError": error_info(exc)}
        self._set_meta(status="failed", error=info)
        self.instance.set_alarm("workflow", None)
        await self.commit()
        await self.report_error({"workflow": {"workflowId": self.instance.actor_id, "error": info}})

    def _mark_busy(self) -> None:
        # While the workflow is executing (not waiting), its alarm is "now": if the process
        # dies, the alarm scheduler of the next start wakes the actor and it resumes alone.
        self.instance.set_alarm("workflow", self.instance.runtime.clock.now_ms())

    def status(self) -> dict[str, Any]:
        """The workflow's status for clients: ``{status, error, output}``."""
        return {
            "status": self.meta.get("status", "pending"),
            "error": self.meta.get("error"),
            "output": self.meta.get("output"),
        }

    # ------------------------------------------------------------- commit path

    def stage(self) -> None:
        """Move history changes into the actor's pending commit (no waiting)."""
        changed, deleted = self.history.take_changes()
        pending = self.instance.pending_commit()
        owner = self.instance.label
        for location, entry in changed.items():
            pending.history_put[location] = encode_value(
                entry.to_record(), what=f"workflow entry `{location}`", owner=owner
            )
        for location in deleted:
            pending.history_put.pop(location, None)
            pending.history_delete.append(location)

    async def commit(self) -> None:
        """Stage history changes and wait until they (and the state) are durable."""
        self.stage()
        await self.instance.flush_now()
        if self._deferred_events:
            events, self._deferred_events = self._deferred_events, []
            self.deliver(events)

    def deliver(self, events: list[tuple[str, tuple[Any, ...]]]) -> None:
        """Send committed events to subscribed connections (validated when the step
        broadcast them)."""
        for name, args in events:
            self.instance.send_event(name, list(args))

    async def report_error(self, event: dict[str, Any]) -> None:
        """Call the ``on_error`` hook (observational; its failures are only logged)."""
        hook = self.instance.definition.hooks.get("on_error")
        if hook is None:
            return
        try:
            await _maybe_await(hook(self.instance.context, event))
        except Exception:
            self.instance.log.exception("on_error failed")

    def queue(self) -> ActorQueue:
        """The actor's queue (the workflow declares queues to use it)."""
        self.instance.definition.require_queues()
        queue = self.instance.queue
        assert queue is not None  # an actor with queues has one while awake
        return queue

    # ------------------------------------------------------------------ waiting

    def check_evicted(self) -> None:
        """Stop at this yield point if the actor is going to sleep."""
        if self.instance.abort.aborted:
            raise Evicted()

    async def wait_until(
        self,
        deadline: int,
        *,
        for_messages: frozenset[str] | None = None,
        want_messages: bool = False,
    ) -> bool:
        """Wait until ``deadline`` (epoch ms), or a message arrives when ``want_messages``.

        The wait lets the actor hibernate: the deadline is written as the actor's alarm,
        and the runtime wakes it then. Returns True if a message arrived.
        """
        clock = self.instance.runtime.clock
        self.instance.set_alarm("workflow", deadline)
        await self.commit()
        self.instance.run_waiting(True)
        try:
            while True:
                self.check_evicted()
                remaining = (deadline - clock.now_ms()) / 1000
                if remaining <= 0:
                    return False
                if want_messages:
                    if await self.queue().wait_for(for_messages, remaining):
                        return True
                    continue
                await self._sleep_or_abort(remaining)
        except ActorAborted:
            raise Evicted() from None
        finally:
            self.instance.run_waiting(False)
            self._mark_busy()

    async def _sleep_or_abort(self, seconds: float) -> None:
        abort = asyncio.ensure_future(self.instance.abort.wait())
        try:
            await asyncio.wait({abort}, timeout=seconds)
        finally:
            abort.cancel()

    async def wait_for_message(self, names: frozenset[str] | None) -> None:
        """Wait (sleep-compatibly) for a message, with no deadline."""
        self.instance.set_alarm("workflow", None)  # a send wakes the actor; no alarm needed
        self.instance.run_waiting(True)
        try:
            await self.queue().wait_for(names, None)
        except ActorAborted:
            raise Evicted() from None
        finally:
            self.instance.run_waiting(False)
            self._mark_busy()

    # -------------------------------------------------------------- primitives

    def expect(self, scope: str, name: str, kind: str) -> tuple[str, Entry | None]:
        """Validate ``name``, visit its location and return ``(location, entry)``."""
        self.check_evicted()
        validate_name(name)
        location = child_location(scope, name)
        return location, self.history.expect(location, kind)

    def _check_complete(self, scope: str) -> None:
        self.history.check_complete(scope)

    async def step(
        self,
        scope: str,
        name: str,
        fn: Callable[[StepContext], Any],
        *,
        max_retries: int,
        backoff: tuple[float, float],
        timeout: float,
        retry_on_timeout: bool,
        ephemeral: bool,
        rollback: Callable[[StepContext, Any], Any] | None,
    ) -> Any:
        """Run a step once (durably), retrying failures with backoff that survives restarts."""
        location, entry = self.expect(scope, name, "step")
        if rollback is not None:
            self.rollbacks.require_checkpoint(location)
        if entry is None:
            entry = self.history.record(location, Entry("step", "pending", data={"a": 0}))
        elif entry.status == "completed":
            self.rollbacks.note(entry, location, rollback)
            return entry.data.get("o")
        elif entry.status == "exhausted":
            raise _exhausted(location, entry)
        while True:
            retry_at = entry.data.get("r")
            if entry.status == "failed" and retry_at is not None:
                await self.wait_until(int(retry_at))
            attempts = int(entry.data.get("a", 0)) + 1
            step_context = StepContext(self, location)
            try:
                output = await run_step_fn(fn, step_context, timeout)
            except Exception as exc:
                step_context.close()
                await self._step_failed(
                    location, entry, exc, attempts, max_retries, backoff, retry_on_timeout
                )
                continue
            events = step_context.close()
            entry.status = "completed"
            entry.data = {"o": output, "a": attempts}
            self.history.touch(location)
            if ephemeral:
                self.stage()
                self._deferred_events.extend(events)
            else:
                await self.commit()
                self.deliver(events)
            self.rollbacks.note(entry, location, rollback)
            return output

    async def _step_failed(
        self,
        location: str,
        entry: Entry,
        exc: Exception,
        attempts: int,
        max_retries: int,
        backoff: tuple[float, float],
        retry_on_timeout: bool,
    ) -> None:
        timed_out = isinstance(exc, TimeoutError)
        kind = "critical" if isinstance(exc, CriticalError) else "timeout" if timed_out else "error"
        terminal = kind == "critical" or (timed_out and not retry_on_timeout)
        terminal = terminal or attempts > max_retries
        info = error_info(exc)
        entry.data.update(
            {"a": attempts, "e": info, "fk": "exhausted" if kind == "error" else kind}
        )
        if terminal:
            entry.status = "exhausted"
            entry.data.pop("r", None)
        else:
            entry.status = "failed"
            delay = backoff_delay(attempts, *backoff)
            entry.data["r"] = self.instance.runtime.clock.now_ms() + int(delay * 1000)
        self.history.touch(location)
        await self.commit()
        self.instance.log.warning(
            "step %s failed (attempt %d): %s", location, attempts, info["message"]
        )
        await self.report_error(
            {
                "step": {
                    "workflowId": self.instance.actor_id,
                    "stepName": location,
                    "attempt": attempts,
                    "maxRetries": max_retries,
                    "remainingRetries": max(0, max_retries - attempts + 1),
                    "willRetry": not terminal,
                    "retryAt": entry.data.get("r"),
                    "error": info,
                }
            }
        )
        if terminal:
            raise _exhausted(location, entry)

    async def try_step(
        self, scope: str, name: str, fn: Callable[[StepContext], Any], options: dict[str, Any]
    ) -> TryResult:
        """``step`` with terminal failures returned instead of raised."""
        context = WorkflowContext(self, scope)
        try:
            value = await context.step(name, fn, **options)
        except StepExhausted as exc:
            return TryResult(
                False,
                failure={
                    "kind": exc.kind,
                    "stepName": exc.location,
                    "attempts": exc.attempts,
                    "error": exc.error,
                },
            )
        return TryResult(True, value)

    async def try_block(
        self,
        scope: str,
        name: str,
        fn: Callable[[WorkflowContext], Awaitable[Any]],
        catch: tuple[str, ...],
    ) -> TryResult:
        """Run a block in its own scope, turning selected failures into a result."""
        location, entry = self.expect(scope, name, "try")
        if entry is not None and entry.status == "completed":
            return TryResult(entry.data["ok"], entry.data.get("v"), entry.data.get("f"))
        entry = self.history.record(location, Entry("try", "running"))
        try:
            value = await _maybe_await(fn(WorkflowContext(self, location)))
            self._check_complete(location)
            result = TryResult(True, value)
        except WorkflowFailure as exc:
            source = {StepExhausted: "step", JoinError: "join", RaceError: "race"}.get(
                type(exc), "block"
            )
            if source not in catch:
                raise
            result = TryResult(
                False, failure={"source": source, "name": location, "error": error_info(exc)}
            )
        except (Divergence, PerdureError):
            raise
        except Exception as exc:
            if "block" not in catch:
                raise
            result = TryResult(
                False, failure={"source": "block", "name": location, "error": error_info(exc)}
            )
        entry.status = "completed"
        entry.data = {"ok": result.ok, "v": result.value, "f": result.failure}
        self.history.touch(location)
        self.stage()
        return result

    async def loop(
        self,
        scope: str,
        name: str,
        fn: Callable[..., Awaitable[Any]],
        state: Any,
        stateful: bool,
        prune_interval: int,
        keep: int,
    ) -> Any:
        """Iterate durably; see ``WorkflowContext.loop``."""
        location, entry = self.expect(scope, name, "loop")
        if entry is None:
            entry = self.history.record(
                location, Entry("loop", "running", data={"i": 0, "st": state})
            )
        elif entry.status == "completed":
            return entry.data.get("o")
        while True:
            iteration = int(entry.data["i"])
            body_scope = iteration_scope(location, iteration)
            context = WorkflowContext(self, body_scope)
            args = (context, entry.data.get("st")) if stateful else (context,)
            result = await _maybe_await(fn(*args))
            self._check_complete(body_scope)
            if isinstance(result, LoopBreak):
                entry.status = "completed"
                entry.data = {"i": iteration + 1, "o": result.value}
                self.history.touch(location)
                self.history.prune_iterations(location, iteration + 1)
                self.stage()
                return result.value
            if stateful and not isinstance(result, LoopContinue):
                raise TypeError(
                    f"Loop `{location}` has state: its body must return Loop.continue_(state) "
                    "or Loop.break_(value)."
                )
            next_state = result.state if isinstance(result, LoopContinue) else None
            entry.data = {"i": iteration + 1, "st": next_state if stateful else None}
            self.history.touch(location)
            if (iteration + 1) % prune_interval == 0:
                self.history.prune_iterations(location, iteration + 1 - keep)
            self.stage()

    async def sleep(
        self, scope: str, name: str, deadline: int | None, seconds: float | None
    ) -> None:
        """Sleep until a recorded deadline (computed once, at the first execution)."""
        location, entry = self.expect(scope, name, "sleep")
        if entry is not None and entry.status == "completed":
            return
        if entry is None:
            if deadline is None:
                deadline = self.instance.runtime.clock.now_ms() + int((seconds or 0) * 1000)
            entry = self.history.record(location, Entry("sleep", "pending", data={"t": deadline}))
        await self.wait_until(int(entry.data["t"]))
        entry.status = "completed"
        self.history.touch(location)
        self.stage()

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
            return [self._replayed_message(location, m) for m in entry.data.get("m", [])]
        wanted = _names(names)
        if entry is None:
            data: dict[str, Any] = {}
            if timeout is not None:
                data["t"] = self.instance.runtime.clock.now_ms() + int(timeout * 1000)
            entry = self.history.record(location, Entry("message", "pending", data=data))
        while not queue.available(wanted, 1):
            deadline = entry.data.get("t")
            if deadline is None:
                await self.wait_for_message(wanted)
            elif not await self.wait_until(int(deadline), for_messages=wanted, want_messages=True):
                break
        records = queue.available(wanted, count)
        messages = queue.take(records, completable=completable)
        entry.status = "completed"
        entry.data = {
            "m": [
                {
                    "id": r.id,
                    "name": r.name,
                    "body": decode_value(r.body),
                    "at": r.created_at,
                    **({"c": False} if completable else {}),
                }
                for r in records
            ]
        }
        self.history.touch(location)
        self.stage()
        for message in messages:
            if completable:
                message._queue = _CompletionRecorder(self, location, message, queue)
        return messages

    def _replayed_message(self, location: str, data: dict[str, Any]) -> QueueMessage:
        completable = "c" in data
        message = QueueMessage(
            data["id"],
            data["name"],
            data["body"],
            data["at"],
            completable,
            completed=bool(data.get("c")),
            _replayed=True,
        )
        if completable:
            message._queue = _CompletionRecorder(self, location, message, self.queue())
        return message

    async def join(
        self,
        scope: str,
        name: str,
        branches: dict[str, Callable[[WorkflowContext], Awaitable[Any]]],
    ) -> dict[str, Any]:
        """Run branches concurrently; every one must succeed."""
        location, entry = self.expect(scope, name, "join")
        if entry is not None and entry.status == "completed":
            return dict(entry.data.get("o", {}))
        for branch in branches:
            validate_name(branch)
        entry = entry or self.history.record(location, Entry("join", "running"))
        results = await asyncio.gather(
            *(self._branch(child_location(location, b), fn) for b, fn in branches.items()),
            return_exceptions=True,
        )
        outputs: dict[str, Any] = {}
        errors: dict[str, BaseException] = {}
        for branch, result in zip(branches, results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, Exception) or isinstance(result, Divergence):
                    raise result
                errors[branch] = result
            else:
                outputs[branch] = result
        if errors:
            raise JoinError(location, errors)
        entry.status = "completed"
        entry.data = {"o": outputs}
        self.history.touch(location)
        self.stage()
        return outputs

    async def _branch(self, scope: str, fn: Callable[[WorkflowContext], Awaitable[Any]]) -> Any:
        output = await _maybe_await(fn(WorkflowContext(self, scope)))
        self._check_complete(scope)
        return output

    async def race(
        self,
        scope: str,
        name: str,
        branches: list[tuple[str, Callable[[WorkflowContext], Awaitable[Any]]]],
    ) -> tuple[str, Any]:
        """The first branch to succeed wins; the others are cancelled and forgotten."""
        location, entry = self.expect(scope, name, "race")
        if entry is not None and entry.status == "completed":
            return entry.data["w"], entry.data.get("o")
        entry = entry or self.history.record(location, Entry("race", "running"))
        tasks = {
            asyncio.ensure_future(self._branch(child_location(location, b), fn)): b
            for b, fn in branches
        }
        errors: dict[str, BaseException] = {}
        winner: tuple[str, Any] | None = None
        try:
            pending = set(tasks)
            while pending and winner is None:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    exc = task.exception()
                    if exc is None and winner is None:
                        winner = (tasks[task], task.result())
                    elif exc is not None:
                        if not isinstance(exc, Exception) or isinstance(exc, Divergence):
                            raise exc
                        errors[tasks[task]] = exc
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if winner is None:
            raise RaceError(location, errors)
        for branch, _ in branches:
            if branch != winner[0]:
                self.history.delete_subtree(child_location(location, branch))
        entry.status = "completed"
        entry.data = {"w": winner[0], "o": winner[1]}
        self.history.touch(location)
        await self.commit()
        return winner

    async def rollback_checkpoint(self, scope: str, name: str) -> None:
        """Record a rollback checkpoint (steps after it may have rollback handlers)."""
        location, entry = self.expect(scope, name, "rollback_checkpoint")
        if entry is None:
            self.history.record(location, Entry("rollback_checkpoint", "completed"))
            self.stage()
        self.rollbacks.checkpoint()

    async def removed(self, scope: str, name: str, original_kind: str) -> None:
        """Accept (and skip) an old entry of ``original_kind``, or record a placeholder."""
        self.check_evicted()
        validate_name(name)
        location = child_location(scope, name)
        entry = self.history.get(location)
        if entry is None:
            self.history.expect(location, "removed")
            self.history.record(location, Entry("removed", "completed", data={"ok": original_kind}))
            self.stage()
            return
        if entry.kind not in (original_kind, "removed"):
            raise Divergence(
                location,
                f"`{location}` is a {entry.kind} in history, not a "
                f"{original_kind}; fix the kind given to removed().",
            )
        self.history.visit_subtree(location)

    async def get_version(self, scope: str, name: str, latest: int) -> int:
        """Resolve a version once per position and record it."""
        self.check_evicted()
        validate_name(name)
        if latest < 1:
            raise ValueError("get_version: latest must be >= 1")
        location = child_location(scope, name)
        entry = self.history.get(location)
        if entry is not None:
            self.history.expect(location, "version_check")
            return int(entry.data["v"])
        version = 1 if self.history.has_unvisited_below(scope) else latest
        self.history.record(location, Entry("version_check", "completed", data={"v": version}))
        self.stage()
        return version


class _CompletionRecorder:
    """Completes a workflow-received message and records that in history."""

    def __init__(
        self, runner: WorkflowRunner, location: str, message: QueueMessage, queue: ActorQueue
    ) -> None:
        self._runner = runner
        self._location = location
        self._message = message
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


def _exhausted(location: str, entry: Entry) -> StepExhausted:
    return StepExhausted(
        location,
        entry.data.get("e") or {},
        int(entry.data.get("a", 0)),
        str(entry.data.get("fk", "exhausted")),
    )


def _names(names: Iterable[str] | str | None) -> frozenset[str] | None:
    if names is None:
        return None
    if isinstance(names, str):
        return frozenset((names,))
    return frozenset(names) or None


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value
