"""The durable run: executes a workflow function against its history.

The workflow function runs from the top at every start. Each primitive looks up its
entry in the history: a completed entry returns its recorded result without running;
otherwise the primitive runs and records the result through the host's commits (see
:mod:`perdure.workflows.core`). The engine reaches its actor only through the port of
:mod:`perdure.workflows.port`.

The primitives are grouped by concept: steps and retries (``steps.py``), the run's
path (``flow.py``: loops, sleeps, join, race and try, versioning and recorded values),
queue receives (``receive.py``) and child workflows (``children.py``).
:class:`WorkflowRunner` combines them.
"""

from __future__ import annotations

import asyncio
from typing import Any

from perdure.errors import (
    ActorAborted,
    Evicted,
    HistoryDiverged,
    UserError,
    WorkflowCancelled,
    WorkflowFailure,
    WorkflowTimedOut,
)
from perdure.schemas import to_plain
from perdure.workflows.children import ChildPrimitives
from perdure.workflows.core import META_LOCATION, maybe_await
from perdure.workflows.flow import DeterminismPrimitives, FlowPrimitives, VersionPrimitives
from perdure.workflows.history import ROOT, Divergence
from perdure.workflows.receive import ReceivePrimitives
from perdure.workflows.runner_support import error_info
from perdure.workflows.steps import StepPrimitives

__all__ = ["META_LOCATION", "WorkflowRunner"]


class WorkflowRunner(
    StepPrimitives,
    FlowPrimitives,
    ReceivePrimitives,
    VersionPrimitives,
    DeterminismPrimitives,
    ChildPrimitives,
):
    """Runs one actor's workflow; lives as long as the actor is awake."""

    async def run(self) -> None:
        """Load history and run (or replay) the workflow until it ends or is evicted."""
        await self.load()
        if self.meta.get("status") in ("completed", "cancelled") or _timed_out(self.meta):
            # Ended for good (a timed-out run compensated, like a cancelled one); a crash
            # may have come before its parent was told.
            await self._told_parent()
            return
        starting = self.meta.get("status") != "running"
        # The run is on this code from now on (a cluster node's version): placement
        # keeps it on nodes of that version. Nothing to record on a single server.
        version = self.host.code_version
        if version is not None:
            self.meta.pop("waitingForVersion", None)
            self.meta["codeVersion"] = version
        self.set_meta(status="running", error=None)
        self.start_clock()
        self.mark_busy()
        if starting:
            # A run that starts submits its busy alarm now, without waiting for it: a
            # kill -9 inside its first step then finds the alarm, which resumes the run
            # after the restart, rather than nothing until its actor is called.
            asyncio.ensure_future(self.host.flush()).add_done_callback(_retrieved)
        deadline = asyncio.ensure_future(self.watch_deadline())
        try:
            await self._execute()
        finally:
            deadline.cancel()
            await asyncio.wait({deadline})

    async def _execute(self) -> None:
        try:
            # Plain (models dumped): the status a client reads, in process and after a wake.
            output = to_plain(await maybe_await(self.fn(self.context(ROOT))))
            self.check_complete(ROOT)
            self.set_meta(status="completed", output=output)
            self.host.set_alarm(self.end_alarm())
            await self.commit()
            self.host.workflow_ended(self.status())
            await self._told_parent()
        except Evicted:
            return
        except ActorAborted:
            if self.host.abort.aborted:
                return
            raise
        except WorkflowTimedOut as exc:
            await self.cancel_children(exc.message)  # like a cancel (children.py)
            await self._fail(exc, rollback=True, held=exc)
        except WorkflowCancelled as exc:
            if self.control.delivered:  # the run's own (a child's, in a cleanup, too)
                await self._end_cancelled(WorkflowCancelled(self.control.reason))
            else:  # a child's cancel the run did not catch: not this run's own
                await self._fail(exc, rollback=True)
        except Divergence as exc:
            await self._fail(HistoryDiverged(exc.location, str(exc)), rollback=False)
        except WorkflowFailure as exc:
            await self._fail(exc, rollback=True)
        except UserError as exc:
            # Failing on purpose (after its compensations, say) is the workflow's answer,
            # not a bug: _fail's one line says it, without a traceback.
            await self._fail(exc, rollback=True)
        except Exception as exc:
            self.host.log.exception("the workflow raised outside a step")
            await self._fail(exc, rollback=True)

    async def _fail(
        self, error: BaseException, *, rollback: bool, held: BaseException | None = None
    ) -> None:
        """End ``failed`` (after the compensations when ``rollback``); ``held``: answer
        the senders waiting on messages the run took and did not complete with it."""
        info = error_info(error)
        self.host.log.warning("workflow failed: %s", info["message"])
        if rollback:
            try:
                await self.rollbacks.run(self)
            except Exception as exc:
                info = {**info, "rollbackError": error_info(exc)}
        self.set_meta(status="failed", error=info)
        self.host.set_alarm(self.end_alarm())
        await self.commit()
        if held is not None:
            await self._abandon_held(held)
        self.host.workflow_ended(self.status())
        await self.report_error({"workflow": {"workflowId": self.host.actor_id, "error": info}})
        await self._told_parent()

    async def _end_cancelled(self, cancelled: WorkflowCancelled) -> None:
        """The cancel left the workflow: compensate, end ``cancelled``, answer the senders
        waiting on messages the run had taken and not completed."""
        info = error_info(cancelled)
        self.host.log.info("workflow cancelled: %s", info["message"])
        await self.cancel_children(cancelled.reason)  # before the end: a crash sends again
        try:
            await self.rollbacks.run(self)
        except Exception as exc:
            info = {**info, "rollbackError": error_info(exc)}
        self.set_meta(status="cancelled", error=info, paused=False)
        self.host.set_alarm(self.end_alarm())
        await self.commit()
        await self._abandon_held(WorkflowCancelled(cancelled.reason))
        self.host.workflow_ended(self.status())
        await self._told_parent()

    async def _abandon_held(self, error: BaseException) -> None:
        """Answer ``error`` to the senders waiting on messages the run had taken and not
        completed (it ended without completing them)."""
        queue = self.host.queue()
        if queue is not None:
            for message_id in self.held_messages():
                await queue.abandon(message_id, error)

    async def _told_parent(self) -> None:
        """Tell a parent this run ended (children.py); going to sleep meanwhile is fine:
        the alarm wakes the actor to tell it then."""
        try:
            await self.tell_parent()
        except (Evicted, ActorAborted):
            if not self.host.abort.aborted:
                raise


def _timed_out(meta: dict[str, Any]) -> bool:
    """The run ended ``failed`` at its deadline."""
    error = meta.get("error") or {}
    return meta.get("status") == "failed" and error.get("code") == WorkflowTimedOut.default_code


def _retrieved(flushed: asyncio.Future[None]) -> None:
    """A start's flush nobody awaits: its failure, if any, reaches the next commit."""
    if not flushed.cancelled():
        flushed.exception()
