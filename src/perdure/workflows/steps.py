"""Steps: run once, durably, with retries whose backoff survives restarts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from perdure.errors import CriticalError, StepExhausted
from perdure.schemas import to_plain
from perdure.workflows.context import StepContext, TryResult
from perdure.workflows.core import RunnerCore
from perdure.workflows.history import Entry, backoff_delay
from perdure.workflows.runner_support import error_info, run_step_fn, step_failure

__all__ = ["StepPrimitives"]


class StepPrimitives(RunnerCore):
    """``ctx.step`` and ``ctx.try_step``."""

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
            await self.gate()  # an attempt about to run: a cancel lands, a pause holds
            attempts = int(entry.data.get("a", 0)) + 1
            step_context = StepContext(self.host, location)
            span = self.host.observer.step(self.host, location, attempts)
            try:
                # Recorded and returned plain (models dumped), as a replay returns it.
                output = to_plain(await run_step_fn(fn, step_context, timeout))
                step_context.stage_effects()  # with the step's record, in one commit
            except Exception as exc:
                step_context.close()
                if span is not None:
                    span.end(exc)
                await self._step_failed(
                    location, entry, exc, attempts, max_retries, backoff, retry_on_timeout
                )
                continue
            except BaseException as exc:
                if span is not None:
                    span.end(exc)
                raise
            events = step_context.close()
            errors = entry.data.get("errors")  # kept from attempts before a retry
            entry.status = "completed"
            entry.data = {"o": output, "a": attempts}
            if errors:
                entry.data["errors"] = errors
            self.history.touch(location)
            try:
                # Logged in the commit that records the step, sent once it is durable.
                self.publish(events)
                if ephemeral:
                    self.stage()
                else:
                    await self.commit()
            except BaseException as exc:
                if span is not None:
                    span.end(exc)  # the attempt ran, but it is not durable
                raise
            if span is not None:
                span.end(None)
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
        retry_delay_ms: int | None = None
        if terminal:
            entry.status = "exhausted"
            entry.data.pop("r", None)
        else:
            entry.status = "failed"
            retry_delay_ms = int(backoff_delay(attempts, *backoff) * 1000)
            entry.data["r"] = self.host.now_ms() + retry_delay_ms
        self.history.touch(location)
        await self.commit()
        self.host.observer.step_failed(self.host, location, attempts, not terminal)
        self.host.log.warning(
            "step %s failed (attempt %d): %s", location, attempts, info["message"]
        )
        await self.report_error(
            {
                "step": {
                    "workflowId": self.host.actor_id,
                    "stepName": location,
                    "attempt": attempts,
                    "maxRetries": max_retries,
                    "remainingRetries": max(0, max_retries - attempts + 1),
                    "willRetry": not terminal,
                    "retryDelay": retry_delay_ms,  # milliseconds, as rivetkit's
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
        context = self.context(scope)
        try:
            value = await context.step(name, fn, **options)
        except StepExhausted as exc:
            return TryResult(False, failure=step_failure(exc))
        return TryResult(True, value)


def _exhausted(location: str, entry: Entry) -> StepExhausted:
    return StepExhausted(
        location,
        entry.data.get("e") or {},
        int(entry.data.get("a", 0)),
        str(entry.data.get("fk", "exhausted")),
    )
