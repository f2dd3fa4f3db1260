"""A live actor: its state in memory, its hooks, actions, connections and sleep timer.

Durability of actions: after an action returns, its caller waits for the next *flush* of
the actor. A flush serialises the state once, compares it with the last bytes written,
and commits what changed together with any pending queue or history writes. At most one
commit per actor is in flight; everything that finishes while it is in flight shares the
next one. So 32 concurrent callers cost one serialisation and one commit per round, and
a read-only action still waits for the commit of any state it might have read.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from perdure.definition import MISSING, ActorDefinition
from perdure.errors import (
    ActionTimedOut,
    ActorAborted,
    ActorNotFound,
    ActorStopping,
    InternalError,
    PerdureError,
)
from perdure.runtime.connections import Connection, Transport
from perdure.runtime.context import AbortSignal, ActionContext, ActorContext
from perdure.runtime.queue import ActorQueue
from perdure.runtime.schedule import ScheduleManager
from perdure.runtime.tasks import TaskOwner
from perdure.store.base import ActorCommit, ActorRecord
from perdure.store.codec import decode_value, encode_value

if TYPE_CHECKING:
    from perdure.runtime.runtime import ActorRuntime
    from perdure.workflows.engine import WorkflowRunner

__all__ = ["WORKFLOW_STATUS_ACTION", "ActorInstance", "StopReason"]

# A built-in action of workflow actors: the workflow's status, for clients.
WORKFLOW_STATUS_ACTION = "$workflow"


T = TypeVar("T")
StopReason = Literal["sleep", "destroy", "shutdown"]
Status = Literal["starting", "running", "stopping", "stopped"]
_log = logging.getLogger("perdure.actor")


async def call_hook(fn: Callable[..., Any], *args: Any, timeout: float | None = None) -> Any:
    """Call a sync or async hook, with an optional timeout for the async part."""
    result = fn(*args)
    if inspect.isawaitable(result):
        if timeout:
            async with asyncio.timeout(timeout):
                return await result
        return await result
    return result


class ActorInstance:
    """One awake actor. Created and owned by :class:`~perdure.runtime.runtime.ActorRuntime`."""

    def __init__(
        self,
        runtime: ActorRuntime,
        definition: ActorDefinition,
        record: ActorRecord,
        *,
        claimed: bool = False,
    ) -> None:
        """``claimed``: ``record`` comes from :meth:`Store.claim_actor`, which already
        counted this instance's generation; otherwise (an actor this runtime has just
        created) the start commit writes it."""
        self.runtime = runtime
        self.definition = definition
        self.options = definition.options
        self.actor_id = record.actor_id
        self.name = record.name
        self.label = f"{record.name}/{record.actor_id}"  # names the actor in errors
        self.key = record.key
        self.generation = record.generation if claimed else record.generation + 1
        # Every commit after the generation is stored carries it as its fence, so a
        # newer instance elsewhere (one that claimed the actor since) refuses our writes.
        self._claimed = claimed
        self._fence: int | None = self.generation if claimed else None
        self.record = record
        self.state: Any = None
        self.vars: Any = None
        self.conns: dict[str, Connection] = {}
        self.status: Status = "starting"
        self.abort = AbortSignal()
        self.log = logging.LoggerAdapter(_log, {"actor": f"{self.name}/{self.actor_id}"})
        self.context = ActorContext(self)
        self.tasks = TaskOwner(f"actor {self.name}/{self.actor_id}")
        self.stopped = asyncio.get_running_loop().create_future()
        self.stop_reason: StopReason | None = None
        # Commit pipeline (see the module docstring).
        self._last_state: bytes | None = record.state
        self._pending = ActorCommit(record.actor_id, fence=self._fence)
        self._next_flush: asyncio.Future[None] | None = None
        self._last_commit: asyncio.Future[None] | None = None
        self._poisoned = False
        # Activity that keeps the actor awake.
        self._active = 0
        self._sleep_timer: asyncio.TimerHandle | None = None
        self._waiting: set[asyncio.Future[Any]] = set()
        self._idle_event: asyncio.Event | None = None
        self._run_task: asyncio.Task[None] | None = None
        self.run_active = False
        self.run_sleep_ok = False
        self.queue: ActorQueue | None = None
        self.workflow: WorkflowRunner | None = None
        # Alarms by source ("workflow", "schedule"); the earliest is the stored wake_at.
        self._alarms: dict[str, int] = {}
        self._wake_at = record.wake_at
        self.schedules = ScheduleManager(self)

    # ----------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Run the start sequence: (create_state, on_create,) create_vars, on_wake, run."""
        hooks = self.definition.hooks
        if self.definition.queues is not None:
            records = await self.runtime.store.load_queue(self.actor_id)
            self.queue = ActorQueue(self, records)
        if self._wake_at is not None and self._wake_at <= self.runtime.clock.now_ms():
            self._write_wake_at(None)  # due alarms are handled now; sources re-arm what's left
        await self.schedules.load()  # before on_create/on_wake, which may upsert jobs
        if not self.record.initialized:
            actor_input = None if self.record.input is None else decode_value(self.record.input)
            if "create_state" in hooks:
                self.state = await call_hook(hooks["create_state"], self.context, actor_input)
            elif self.definition.state is not MISSING:
                self.state = self.definition.initial_state()
            if "on_create" in hooks:
                await call_hook(hooks["on_create"], self.context, actor_input)
            self._pending.initialized = True
        else:
            self.state = None if self.record.state is None else decode_value(self.record.state)
        if not self._claimed:
            self._pending.generation = self.generation  # this commit stores it, unfenced
            self._fence = self.generation
        await self.request_flush()
        if "create_vars" in hooks:
            self.vars = await call_hook(
                hooks["create_vars"], self.context, timeout=self.options.create_vars_timeout
            )
        else:
            self.vars = self.definition.initial_vars()
        if "on_wake" in hooks:
            await call_hook(hooks["on_wake"], self.context)
        self.status = "running"
        self._start_run()
        self.schedules.start()  # drains overdue jobs (after on_wake), then fires on time
        self._maybe_arm_sleep()

    def request_stop(self, reason: StopReason) -> None:
        """Ask for sleep or destroy; it happens in the background (after the caller returns)."""
        if self.status == "starting":
            raise ActorStopping("The actor is still starting.", code="starting")
        if self.status != "running":
            if reason == "destroy" and self.stop_reason == "sleep":
                self.stop_reason = "destroy"
                return
            raise ActorStopping("The actor is already stopping.")
        self.runtime.schedule_stop(self, reason)

    def claim_stop(self, reason: StopReason) -> bool:
        """Stop taking new work now (synchronously, so that nothing slips in between the
        decision to stop and the stop itself). True for the caller that must then run
        :meth:`run_stop_sequence`; False if the actor is already stopping."""
        if self.status in ("stopping", "stopped"):
            return False
        self.status = "stopping"
        self.stop_reason = reason
        self._cancel_sleep_timer()
        self.abort.fire()
        return True

    async def stop(self, reason: StopReason) -> None:
        """Stop the actor (or wait for the stop already under way)."""
        if self.claim_stop(reason):
            await self.run_stop_sequence()
        else:
            await asyncio.shield(self.stopped)

    async def run_stop_sequence(self) -> None:
        """Abort, wind down work, on_sleep/on_destroy, close connections, final flush."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.options.sleep_grace_period
        try:
            await self._wind_down(deadline)
            await self._run_stop_hook(deadline)
            await self._close_connections()
            await self._wait_for(self._waiting, deadline)
            await self.tasks.close(timeout=max(0.0, deadline - loop.time()))
            if self.stop_reason == "destroy":
                # No final flush: the data goes anyway, and a state that cannot be
                # encoded must not keep a destroyed actor in the store.
                await self.runtime.store.delete_actor(self.actor_id)
            else:
                await self.request_flush()
        except Exception:
            self.log.exception("stopping the actor failed")
        finally:
            self.status = "stopped"
            if not self.stopped.done():
                self.stopped.set_result(None)

    async def crash(self) -> None:
        """Drop the instance without hooks or a final flush: after a failed write memory
        may be ahead of the store; the next request wakes the actor from stored data."""
        try:
            for conn in list(self.conns.values()):
                conn.transport.close(1011, "actor.restarting")
                self.conns.pop(conn.id, None)
            await self.tasks.close(timeout=1.0)
        finally:
            self.status = "stopped"
            if not self.stopped.done():
                self.stopped.set_result(None)

    async def _wind_down(self, deadline: float) -> None:
        """Let in-flight actions and the run handler finish within the grace period."""
        loop = asyncio.get_running_loop()
        if self._active > 0:
            self._idle_event = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(deadline):
                    await self._idle_event.wait()
        task = self._run_task
        if task is not None and not task.done():
            await asyncio.wait([task], timeout=max(0.0, deadline - loop.time()))
            if not task.done():
                task.cancel()
                await asyncio.wait([task])

    # --------------------------------------------------------------- run handler

    def _start_run(self) -> None:
        run = self.definition.hooks.get("run")
        if run is None:
            return
        self.run_active = True
        if self.definition.kind == "workflow":
            from perdure.runtime.workflow_host import ActorWorkflowHost
            from perdure.workflows.engine import WorkflowRunner

            self.workflow = WorkflowRunner(ActorWorkflowHost(self), run)
            coro = self._run_workflow(self.workflow)
        else:
            coro = self._run(run)
        self._run_task = self.tasks.spawn(coro, name=f"run {self.actor_id}")

    async def _run_workflow(self, runner: WorkflowRunner) -> None:
        try:
            await runner.run()
        finally:
            self.run_active = False
            self.activity_changed()

    async def _run(self, run: Callable[..., Any]) -> None:
        saver = self.tasks.spawn(self._save_periodically(), name=f"autosave {self.actor_id}")
        try:
            await call_hook(run, self.context)
        except asyncio.CancelledError:
            raise
        except Exception:
            self.log.exception("the run handler failed; the actor stays up and may sleep")
        finally:
            saver.cancel()
            self.run_active = False
            self.request_flush()
            self.activity_changed()

    async def _save_periodically(self) -> None:
        """Persist state changed by ``run`` (which has no action boundary to flush at)."""
        while True:
            await asyncio.sleep(self.options.state_save_interval)
            self.request_flush()

    def run_waiting(self, sleep_compatible: bool) -> None:
        """Called by the run handler's waits: a queue wait or long sleep lets the actor sleep."""
        self.run_sleep_ok = sleep_compatible
        self.activity_changed()

    async def _run_stop_hook(self, deadline: float) -> None:
        hook_name = "on_destroy" if self.stop_reason == "destroy" else "on_sleep"
        hook = self.definition.hooks.get(hook_name)
        if hook is None:
            return
        remaining = max(0.001, deadline - asyncio.get_running_loop().time())
        try:
            await call_hook(hook, self.context, timeout=remaining)
        except Exception:
            self.log.exception("%s failed", hook_name)

    async def _close_connections(self) -> None:
        for conn in list(self.conns.values()):
            conn.transport.close(
                1000, f"actor.{'destroyed' if self.stop_reason == 'destroy' else 'sleeping'}"
            )
            await self.disconnect(conn)

    @staticmethod
    async def _wait_for(futures: set[asyncio.Future[Any]], deadline: float) -> None:
        pending = [f for f in futures if not f.done()]
        if pending:
            remaining = max(0.0, deadline - asyncio.get_running_loop().time())
            await asyncio.wait(pending, timeout=remaining)

    # ------------------------------------------------------------------ actions

    async def call_action(self, name: str, args: list[Any], conn: Connection | None = None) -> Any:
        """Run action ``name``; return its output once its state changes are durable."""
        if (
            name == WORKFLOW_STATUS_ACTION
            and self.definition.kind == "workflow"
            and name not in self.definition.actions
        ):
            return self.workflow_status()
        spec = self.definition.find_action(name, len(args))
        self._check_running()
        self.enter()
        try:
            context = ActionContext(self, conn)
            try:
                output = spec.fn(context, *args)
                if inspect.isawaitable(output):
                    output = await self._await_action(name, output)
                hook = self.definition.hooks.get("on_before_action_response")
                if hook is not None:
                    output = await call_hook(hook, context, name, args, output)
            finally:
                flushed = self.request_flush()
            await flushed
            return output
        except (PerdureError, asyncio.CancelledError):
            raise
        except Exception as exc:
            self.log.exception("action %s failed", name)
            raise InternalError() from exc
        finally:
            self.leave()

    async def _await_action(self, name: str, awaitable: Awaitable[Any]) -> Any:
        timeout = self.options.action_timeout
        deadline = asyncio.timeout(timeout or None)
        try:
            async with deadline:
                return await awaitable
        except TimeoutError:
            # Only our deadline is an action timeout; a TimeoutError the action raised
            # itself (its own asyncio.timeout, a socket) is its failure like any other.
            if deadline.expired():
                raise ActionTimedOut(name, timeout) from None
            raise

    def workflow_status(self) -> dict[str, Any]:
        """``{status, error, output}`` of this actor's workflow."""
        if self.workflow is None:
            return {"status": "pending", "error": None, "output": None}
        return self.workflow.status()

    def _check_running(self) -> None:
        if self.status == "stopping" or self.status == "stopped":
            raise ActorAborted()

    # ------------------------------------------------------------- connections

    async def connect(self, params: Any, transport: Transport) -> Connection:
        """Admit a connection: on_before_connect, create_conn_state, then on_connect."""
        self._check_running()
        hooks = self.definition.hooks
        self.enter()
        try:
            if "on_before_connect" in hooks:
                await call_hook(
                    hooks["on_before_connect"],
                    self.context,
                    params,
                    timeout=self.options.on_before_connect_timeout,
                )
            if "create_conn_state" in hooks:
                conn_state = await call_hook(
                    hooks["create_conn_state"],
                    self.context,
                    params,
                    timeout=self.options.create_conn_state_timeout,
                )
            else:
                conn_state = self.definition.initial_conn_state()
            conn = Connection(str(uuid.uuid4()), params, conn_state, transport, self)
            self.conns[conn.id] = conn
            if "on_connect" in hooks:
                try:
                    await call_hook(
                        hooks["on_connect"],
                        self.context,
                        conn,
                        timeout=self.options.on_connect_timeout,
                    )
                except BaseException:
                    self.conns.pop(conn.id, None)
                    raise
            return conn
        except (PerdureError, asyncio.CancelledError):
            raise
        except Exception as exc:
            # Like actions: the details of a failing connect hook stay in the log.
            self.log.exception("admitting a connection failed")
            raise InternalError() from exc
        finally:
            self.leave()

    async def disconnect(self, conn: Connection) -> None:
        """Forget a connection and run on_disconnect (once)."""
        if self.conns.pop(conn.id, None) is None:
            return
        hook = self.definition.hooks.get("on_disconnect")
        if hook is not None:
            try:
                await call_hook(hook, self.context, conn)
            except Exception:
                self.log.exception("on_disconnect failed")
        self._maybe_arm_sleep()

    def broadcast(self, name: str, args: tuple[Any, ...] | list[Any]) -> None:
        """Send an event to the connections subscribed to ``name``."""
        payload = list(args)
        self.definition.validate_event(name, payload)
        self.send_event(name, payload)

    def send_event(self, name: str, payload: list[Any]) -> None:
        """Send an already validated event to the connections subscribed to ``name``."""
        for conn in self.conns.values():
            if name in conn.subscriptions:
                conn.transport.send_event(name, payload)

    # ------------------------------------------------------------------- alarms

    def set_alarm(self, source: str, at: int | None) -> None:
        """Set or clear one source's alarm; the earliest becomes the stored ``wake_at``."""
        if at is None:
            self._alarms.pop(source, None)
        else:
            self._alarms[source] = at
        earliest = min(self._alarms.values()) if self._alarms else None
        if earliest != self._wake_at:
            self._write_wake_at(earliest)
            self.runtime.alarms.note(earliest)

    def _write_wake_at(self, at: int | None) -> None:
        self._wake_at = at
        pending = self._pending
        pending.set_wake_at = True
        pending.wake_at = at

    # ---------------------------------------------------------- commit pipeline

    def pending_commit(self) -> ActorCommit:
        """The writes that the next flush will commit; add queue/history ops to it."""
        return self._pending

    def request_flush(self) -> asyncio.Future[None]:
        """A future that resolves when everything done so far is durable.

        Flushes requested in the same event-loop tick share one commit.
        """
        if self._next_flush is None:
            self._next_flush = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_soon(self._start_flush)
        return self._next_flush

    def flush_now(self) -> asyncio.Future[None]:
        """Like :meth:`request_flush`, but submit at once (a workflow step's commit).

        With no tick-end flush pending, the store's own future is returned: one future
        and one callback fewer on the hot path of every workflow step.
        """
        if self._next_flush is not None:
            waiter = self._next_flush
            self._start_flush()
            return waiter
        loop = asyncio.get_running_loop()
        if self.status == "stopped":
            return _failed(loop, ActorAborted())
        try:
            future = self._submit_pending()
        except Exception as exc:
            return _failed(loop, exc)
        if future is not None:
            return future
        previous = self._last_commit
        if previous is not None and not previous.done():
            return previous  # nothing new, but what the caller did may still be in flight
        done: asyncio.Future[None] = loop.create_future()
        done.set_result(None)
        return done

    def _start_flush(self) -> None:
        waiter, self._next_flush = self._next_flush, None
        if waiter is None:
            return
        if self.status == "stopped":
            # A late flush (an action that outlived the grace period): another instance
            # may own the actor by now, and this one's older state would overwrite it.
            self._fail(waiter, ActorAborted())
            return
        try:
            future = self._submit_pending()
        except Exception as exc:
            self._fail(waiter, exc)
            return
        if future is None:
            # Nothing new to write, but what the caller read may still be in flight.
            future = self._last_commit
            if future is None or future.done():
                if not waiter.done():
                    waiter.set_result(None)
                return
        future.add_done_callback(functools.partial(self._commit_done, waiter))

    def _submit_pending(self) -> asyncio.Future[None] | None:
        """Submit the pending writes (and the state, if it changed) as one commit.

        Returns the store's future, or ``None`` when there is nothing to write. A state
        that cannot be encoded, or a store that refuses the commit, raises (and the
        instance is dropped: see :meth:`_poison`).
        """
        commit, self._pending = self._pending, ActorCommit(self.actor_id, fence=self._fence)
        try:
            self._add_state(commit)
        except PerdureError as exc:
            self._pending = commit  # nothing was written: keep its other writes for later
            self._poison(exc)
            raise
        if commit.is_empty():
            return None
        if commit.state is not None:
            self._last_state = commit.state
        try:
            future = self.runtime.store.submit(commit)
        except Exception as exc:
            self._poison(exc)
            raise
        # Several commits may be in flight: the store applies them in submission order.
        self._last_commit = future
        future.add_done_callback(self._after_commit)
        return future

    def _after_commit(self, future: asyncio.Future[None]) -> None:
        error = ActorAborted() if future.cancelled() else future.exception()
        if error is not None:
            self._poison(error)

    def _add_state(self, commit: ActorCommit) -> None:
        data = encode_value(self.state, what="state", owner=self.label)
        if data != self._last_state:
            commit.state = data
            hook = self.definition.hooks.get("on_state_change")
            if hook is not None and self.status == "running":
                try:
                    hook(self.context, self.state)
                except Exception:
                    self.log.exception("on_state_change failed")

    def _commit_done(self, waiter: asyncio.Future[None], future: asyncio.Future[None]) -> None:
        error = ActorAborted() if future.cancelled() else future.exception()
        if error is None:
            if not waiter.done():
                waiter.set_result(None)
            return
        self._fail(waiter, error)

    def _fail(self, waiter: asyncio.Future[None], exc: BaseException) -> None:
        if not waiter.done():
            waiter.set_exception(exc if isinstance(exc, Exception) else ActorAborted())

    def _poison(self, error: BaseException) -> None:
        """After a failed write, memory is ahead of the store: restart from stored data."""
        if self._poisoned:
            return
        self._poisoned = True
        if isinstance(error, ActorNotFound):
            self.log.warning("the actor's data is gone; stopping")
        else:
            self.log.error("a write failed; the actor restarts from its stored state: %s", error)
        if self.status == "running":
            # Stop taking calls now (they wait for the next instance), then drop this one.
            self.status = "stopping"
            self._cancel_sleep_timer()
            self.abort.fire()
            self.runtime.spawn(self.runtime.drop_instance(self), name=f"drop {self.actor_id}")

    # -------------------------------------------------------- activity & sleep

    def enter(self) -> None:
        """Mark the start of work that keeps the actor awake."""
        self._active += 1
        if self._sleep_timer is not None:
            self._sleep_timer.cancel()
            self._sleep_timer = None

    def leave(self) -> None:
        """Mark the end of such work; arm the sleep timer if the actor is now idle."""
        self._active -= 1
        if self._active == 0:
            if self._idle_event is not None:
                self._idle_event.set()
            self._maybe_arm_sleep()

    def is_idle(self) -> bool:
        """No work in flight, no connection, nothing else holding the actor awake."""
        return self._active == 0 and not self.conns and (not self.run_active or self.run_sleep_ok)

    def _maybe_arm_sleep(self) -> None:
        if self.status != "running" or self.options.no_sleep or self._sleep_timer is not None:
            return
        if self.is_idle():
            loop = asyncio.get_running_loop()
            self._sleep_timer = loop.call_later(self.options.sleep_timeout, self._sleep_due)

    def activity_changed(self) -> None:
        """Re-evaluate sleep eligibility after extension state changed (e.g. run waits)."""
        if self.is_idle():
            self._maybe_arm_sleep()
        else:
            self._cancel_sleep_timer()

    def _cancel_sleep_timer(self) -> None:
        if self._sleep_timer is not None:
            self._sleep_timer.cancel()
            self._sleep_timer = None

    def _sleep_due(self) -> None:
        self._sleep_timer = None
        if self.status == "running" and self.is_idle():
            self.runtime.schedule_stop(self, "sleep")

    def keep_awake(self, awaitable: Awaitable[T]) -> asyncio.Future[T]:
        """Track ``awaitable``; the actor does not idle-sleep while it runs."""
        future = asyncio.ensure_future(awaitable)
        self.enter()
        self._waiting.add(future)
        future.add_done_callback(self._keep_awake_done)
        return future

    def _keep_awake_done(self, future: asyncio.Future[Any]) -> None:
        self._waiting.discard(future)
        self.leave()

    def wait_until(self, awaitable: Awaitable[T]) -> asyncio.Future[T]:
        """Track ``awaitable``; shutdown waits for it within the grace period."""
        future = asyncio.ensure_future(awaitable)
        self._waiting.add(future)
        future.add_done_callback(self._waiting.discard)
        return future

    def __repr__(self) -> str:
        return f"ActorInstance({self.name}/{self.actor_id}, {self.status})"


def _failed(loop: asyncio.AbstractEventLoop, error: BaseException) -> asyncio.Future[None]:
    future: asyncio.Future[None] = loop.create_future()
    future.set_exception(error)
    return future
