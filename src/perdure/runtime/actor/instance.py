"""A live actor: its state in memory, its lifecycle, hooks, actions, connections and alarms.

Durability of actions: after an action returns, its caller waits for the next *flush* of
the actor's commit pipeline (:mod:`perdure.runtime.kernel.commits`), which commits the state
if it changed together with every other staged write. What keeps the actor awake, and
its sleep timer, is :mod:`perdure.runtime.kernel.activity`; a workflow reaches its actor through
the adapter of :mod:`perdure.runtime.actor.workflow_host`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from perdure._names import vars_value
from perdure.definition import ActorDefinition
from perdure.errors import (
    ActorAborted,
    ActorNotFound,
    ActorStopping,
    InternalError,
    PerdureError,
)
from perdure.keys import Key
from perdure.runtime.actor.connections import Connection, Transport
from perdure.runtime.actor.contexts import ActionContext, ActorContext
from perdure.runtime.actor.expiry import IdleExpiry
from perdure.runtime.actor.hooks import (
    await_action,
    before_action_response,
    call_hook,
    migrate,
    run_create_hooks,
)
from perdure.runtime.actor.stopping import RawSockets, run_stop_sequence
from perdure.runtime.actor.workflow_control import workflow_action
from perdure.runtime.events.log import EventLog
from perdure.runtime.kernel.core import (
    AbortSignal,
    ActorCore,
    ActorIdentity,
    ActorStatus,
    StopReason,
)
from perdure.runtime.kernel.tasks import TaskOwner
from perdure.runtime.queues.actor_queue import ActorQueue
from perdure.runtime.schedules.manager import ScheduleManager
from perdure.schemas import to_plain
from perdure.store.base import ActorRecord
from perdure.store.encoding import decode_value

if TYPE_CHECKING:
    from perdure.handles import Client
    from perdure.runtime.actor.hosting import ActorHost
    from perdure.runtime.kernel.idempotency import Once
    from perdure.workflows.engine import WorkflowRunner

__all__ = ["ActorInstance", "StopReason"]


class ActorInstance:
    """One awake actor: the :class:`~perdure.runtime.kernel.core.ActorCore` its parts share,
    and the parts (queue, schedules, event log, connections, contexts, the run handler or
    workflow). Created and owned by the runtime, which it sees as an
    :class:`~perdure.runtime.actor.hosting.ActorHost`."""

    # Slots: an instance of a class with more than 30 attributes has no shared-key dict,
    # and tens of thousands are awake at once (a dict of ~1.7 KB each; see bench/README.md).
    # The core's immutable members are copied here (a slot read, on the hot paths) and its
    # parts referenced; what changes (the status, the alarms) lives in the core alone.
    # Written as words to split, so that the list takes a few lines, not thirty.
    __slots__ = tuple(
        """
        __weakref__ _claimed _run_task _stopped activity actor_id commits conns context
        core definition events expiry host identity observer options queue raw_sockets
        record schedules state stop_reason vars workflow
        """.split()  # noqa: SIM905
    )

    def __init__(
        self,
        host: ActorHost,
        definition: ActorDefinition,
        record: ActorRecord,
        *,
        claimed: bool = False,
    ) -> None:
        """``claimed``: ``record`` comes from :meth:`Store.claim_actor`, which already
        counted this instance's generation; otherwise (an actor this runtime has just
        created) the start commit writes it."""
        self.host = host
        self.definition = definition
        self.options = definition.options
        self.actor_id = record.actor_id
        generation = record.generation if claimed else record.generation + 1
        # Who answers requests served by this instance (headers, error bodies): built once.
        self.identity = ActorIdentity(self.actor_id, record.key, generation)
        self._claimed = claimed
        self.record = record
        self.state: Any = None
        self.vars: Any = None
        self.conns: dict[str, Connection] = {}
        self.observer = host.observers
        core = self.core = ActorCore(
            definition,
            self.identity,
            name=record.name,
            store=host.store,
            clock=host.clock,
            observer=host.observers,
            wake_at=record.wake_at,
            alarms=host.alarms,
            sleep_owner=self,
            connections=self.conns,
            state_owner=self,
            last_state=record.state,
            # A claimed generation fences every commit; otherwise the start commit
            # stores it (see start()).
            fence=generation if claimed else None,
            state_written=self._state_written if "on_state_change" in definition.hooks else None,
            on_write_failed=self._write_failed,
        )
        self.activity = core.activity
        self.commits = core.commits
        # The stopped future is made on first use: tens of thousands may be awake at once.
        self._stopped: asyncio.Future[None] | None = None
        self.stop_reason: StopReason | None = None
        self.context: ActorContext = ActorContext(self)
        self.events = EventLog(core, self.conns, record.event_seq)
        self.commits.on_events_durable(self.events.durable)
        self._run_task: asyncio.Task[None] | None = None
        self.queue: ActorQueue | None = None
        self.workflow: WorkflowRunner | None = None
        self.schedules = ScheduleManager(core, self)
        self.expiry = IdleExpiry(self)
        self.raw_sockets: RawSockets | None = None  # on_websocket sockets (stopping.py)

    def __str__(self) -> str:
        return f"actor {self.label}"

    @property
    def status(self) -> ActorStatus:
        """``starting``, ``running``, ``stopping`` or ``stopped`` (kept by the core)."""
        return self.core.status

    @status.setter
    def status(self, value: ActorStatus) -> None:
        self.core.status = value

    # Read rarely (at a wake, in logs and errors): from the core, rather than one more
    # slot on every awake actor.
    @property
    def name(self) -> str:
        """The actor's registered name."""
        return self.core.name

    @property
    def key(self) -> Key:
        """The actor's key."""
        return self.core.key

    @property
    def generation(self) -> int:
        """This instance's generation (the actor's wakes, counted)."""
        return self.core.generation

    @property
    def abort(self) -> AbortSignal:
        """Fires when the actor begins to stop."""
        return self.core.abort

    @property
    def tasks(self) -> TaskOwner:
        """The tasks this instance owns (cancelled when it stops)."""
        return self.core.tasks

    @property
    def label(self) -> str:
        """Names the actor in errors and logs: ``name/actor_id``."""
        return self.core.label

    @property
    def log(self) -> logging.LoggerAdapter[logging.Logger]:
        """The actor's logger (the core's)."""
        return self.core.log

    @property
    def stopped(self) -> asyncio.Future[None]:
        """Done once the instance has stopped."""
        future = self._stopped
        if future is None:
            future = self._stopped = asyncio.get_running_loop().create_future()
            if self.status == "stopped":
                future.set_result(None)
        return future

    def sleep_when_idle(self) -> None:
        """The sleep timer ran out while the actor was idle (ActivityTracker)."""
        self.host.schedule_stop(self, self.expiry.sleep_reason())

    def client(self) -> Client:
        """An in-process client (``c.client()``)."""
        return self.host.client()

    async def call_scheduled(self, action: str, args: list[Any]) -> Any:
        """A due schedule's action (the ScheduleManager's caller), called through the
        runtime like any request."""
        return await self.host.fire_scheduled(self, action, args)

    # ----------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Run the start sequence: (create_state, on_create,) create_vars, on_wake, run."""
        hooks = self.definition.hooks
        if self.definition.queues is not None:
            self.queue = await ActorQueue.load(self.core, next_id=self.record.queue_next_id)
        wake_at = self.core.wake_at
        if wake_at is not None and wake_at <= self.host.clock.now_ms():
            self.core.write_wake_at(None)  # due alarms are handled now; sources re-arm the rest
        if self.queue is not None:
            self.queue.leases.start()  # the alarm of leases and nack delays still to come
        await self.schedules.load()  # before on_create/on_wake, which may upsert jobs
        is_new = not self.record.initialized
        if not is_new:
            stored = None if self.record.state is None else decode_value(self.record.state)
            self.state = self.definition.load_state(stored)
        await migrate(self.core, self.context, is_new)  # before any other hook
        if is_new:  # the first start: create_state (or state), on_create
            await run_create_hooks(self.definition, self.context, self.record.input)
            self.commits.mark_initialized()
        if not self._claimed:
            self.commits.store_generation(self.generation)  # this commit stores it, unfenced
        await self.request_flush()
        if "create_vars" in hooks:
            self.vars = await call_hook(
                hooks["create_vars"], self.context, timeout=self.options.create_vars_timeout
            )
        else:
            self.vars = self.definition.initial_vars()
        self.vars = vars_value(self.vars)  # a dict's `c.vars.x` then says to write c.vars["x"]
        if "on_wake" in hooks:
            await call_hook(hooks["on_wake"], self.context)
        self.status = "running"
        if self._start_run() and self.definition.kind != "workflow":
            # As in rivetkit, `run` has begun (its code up to its first wait has run)
            # before the first action is served: one turn of the loop lets its task go.
            # (A workflow's run begins by reading its history: nothing to see sooner.)
            await asyncio.sleep(0)
        self.schedules.start()  # drains overdue jobs (after on_wake), then fires on time
        self.activity.maybe_sleep()
        self.expiry.started(wake_at)

    def request_stop(self, reason: StopReason) -> None:
        """Ask for sleep or destroy; it happens in the background (after the caller returns)."""
        if self.status == "starting":
            # rivetkit 2.3.19's texts (rivetkit-core), byte for byte.
            raise ActorStopping("Actor is starting.", code="starting")
        if self.status != "running":
            if reason == "destroy" and self.stop_reason == "sleep":
                self.stop_reason = "destroy"
                return
            raise ActorStopping()
        self.host.schedule_stop(self, reason)

    def claim_stop(self, reason: StopReason) -> bool:
        """Stop taking new work now (synchronously, so that nothing slips in between the
        decision to stop and the stop itself). True for the caller that must then run
        :meth:`run_stop_sequence`; False if the actor is already stopping."""
        if self.status in ("stopping", "stopped"):
            return False
        self.status = "stopping"
        self.stop_reason = reason
        self.activity.cancel_sleep()
        self.abort.fire()
        return True

    async def stop(self, reason: StopReason) -> None:
        """Stop the actor (or wait for the stop already under way)."""
        if self.claim_stop(reason):
            await self.run_stop_sequence()
        else:
            await asyncio.shield(self.stopped)

    async def run_stop_sequence(self) -> None:
        """Abort, wind down work, on_sleep/on_destroy, close connections, final flush
        (:mod:`perdure.runtime.actor.stopping`)."""
        try:
            await run_stop_sequence(self)
        finally:
            await self._mark_stopped()

    async def crash(self) -> None:
        """Drop the instance without hooks or a final flush: after a failed write memory
        may be ahead of the store; the next request wakes the actor from stored data."""
        try:
            for conn in list(self.conns.values()):
                conn.transport.close(1011, "actor.restarting")
                self.conns.pop(conn.id, None)
            await self.tasks.close(timeout=1.0)
        finally:
            await self._mark_stopped()

    async def _mark_stopped(self) -> None:
        self.status = "stopped"
        self.commits.close()
        await self.core.close_db()
        stopped = self._stopped
        if stopped is not None and not stopped.done():
            stopped.set_result(None)

    # --------------------------------------------------------------- run handler

    def _start_run(self) -> bool:
        """Start ``run`` (or the workflow) if the actor has one; True if it did."""
        run = self.definition.hooks.get("run")
        if run is None:
            return False
        self.activity.run_started()
        if self.definition.kind == "workflow":
            from perdure.runtime.actor.workflow_host import start_workflow

            coro = start_workflow(self, run)
        else:
            coro = self._run(run)
        self._run_task = self.tasks.spawn(coro, name=f"run {self.actor_id}")
        return True

    @property
    def run_task(self) -> asyncio.Task[None] | None:
        """The task running ``run`` (or the workflow), if it was started."""
        return self._run_task

    def restart_run(self) -> None:
        """Start the run handler again (after a workflow repair)."""
        self._check_running()
        self._start_run()

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
            self.request_flush()
            self.activity.run_finished()

    async def _save_periodically(self) -> None:
        """Persist state changed by ``run`` (which has no action boundary to flush at)."""
        while True:
            await asyncio.sleep(self.options.state_save_interval)
            self.request_flush()

    # ------------------------------------------------------------------ actions

    async def call_action(
        self, name: str, args: list[Any], conn: Connection | None = None, once: Once | None = None
    ) -> Any:
        """Run action ``name``; return its output once its state changes are durable."""
        if self.definition.is_workflow_action(name):
            return await workflow_action(self, name, args)
        spec = self.definition.find_action(name, len(args))
        self._check_running()
        activity = self.activity  # the hot path: straight to the tracker and the pipeline
        activity.enter()
        span = self.observer.action(self, name)
        error: BaseException | None = None
        try:
            context = ActionContext(self, conn)
            try:
                output = spec.fn(context, *args)
                if inspect.isawaitable(output):
                    output = await await_action(name, output, self.options.action_timeout)
                hook = self.definition.hooks.get("on_before_action_response")
                if hook is not None:
                    output = await before_action_response(hook, self.context, name, args, output)
                if once is not None:
                    once.answered(output)
            except BaseException as exc:
                if once is not None:
                    once.failed(exc)
                raise
            finally:
                flushed = self.commits.request_flush()
            await flushed
            return to_plain(output)  # the same plain form in process as on the wire
        except (PerdureError, asyncio.CancelledError) as exc:
            error = exc
            raise
        except Exception as exc:
            self.log.exception("action %s failed", name)
            error = InternalError()
            raise error from exc
        finally:
            activity.leave()
            if span is not None:
                span.end(error)

    @property
    def waiting_for_version(self) -> str | None:
        """The code version its workflow run waits for (a cluster node), if held."""
        version = None if self.workflow is None else self.workflow.meta.get("waitingForVersion")
        return version if isinstance(version, str) and self.status == "running" else None

    def workflow_status(self) -> dict[str, Any]:
        """``{status, error, output}`` of the workflow as its run knows it (``pending``
        until the run has loaded its history: :meth:`current_workflow_status`)."""
        if self.workflow is None:
            return {"status": "pending", "error": None, "output": None}
        return self.workflow.status()

    async def current_workflow_status(self) -> dict[str, Any]:
        """The workflow's status for clients (``$workflow``).

        Right after a wake the run has not loaded its history yet and knows nothing but
        ``pending``: the answer waits for the load (or for the run to end, should the
        load fail), so a workflow is not reported as pending merely because it woke.
        """
        runner, run = self.workflow, self._run_task
        if runner is not None and run is not None and not runner.loaded.is_set():
            loaded = asyncio.ensure_future(runner.loaded.wait())
            try:
                await asyncio.wait({loaded, run}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                loaded.cancel()
        return self.workflow_status()

    def _check_running(self) -> None:
        status = self.core.status
        if status == "stopping" or status == "stopped":
            raise ActorAborted()

    # ------------------------------------------------------------- connections

    async def connect(self, params: Any, transport: Transport) -> Connection:
        """Admit a connection: on_before_connect, create_conn_state, then on_connect."""
        self._check_running()
        hooks = self.definition.hooks
        params = self.definition.check_conn_params(params)
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
            conn = Connection(str(uuid.uuid4()), params, conn_state, transport)
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
            self.observer.connection_opened(self, conn.id)
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
        self.events.unfollow(conn.id)
        self.observer.connection_closed(self, conn.id)
        hook = self.definition.hooks.get("on_disconnect")
        if hook is not None:
            try:
                await call_hook(hook, self.context, conn)
            except Exception:
                self.log.exception("on_disconnect failed")
        self.activity.maybe_sleep()

    def broadcast(self, name: str, args: tuple[Any, ...] | list[Any]) -> None:
        """Log an event with the next commit (requested now) and send it to the
        connections subscribed to ``name`` once that commit is durable."""
        self.events.emit(name, self.definition.validate_event(name, list(args)))
        # Nobody may await this flush (a timer's broadcast): its failure drops the
        # instance, so the future's error needs no reader.
        self.commits.request_flush().add_done_callback(_ignore_outcome)

    def send_event(self, name: str, payload: list[Any]) -> None:
        """Log an already validated event with the next commit (a workflow step's own)
        and send it once that commit is durable (docs/events.md)."""
        self.events.emit(name, payload)

    # ------------------------------------------------------------------ commits

    def request_flush(self) -> asyncio.Future[None]:
        """A future that resolves when everything done so far is durable (flushes
        requested in one event-loop tick share one commit)."""
        return self.commits.request_flush()

    def _state_written(self) -> None:
        if self.status == "running":
            try:
                self.definition.hooks["on_state_change"](self.context, self.state)
            except Exception:
                self.log.exception("on_state_change failed")

    def _write_failed(self, error: BaseException) -> None:
        """After a failed write, memory is ahead of the store: restart from stored data."""
        if isinstance(error, ActorNotFound):
            self.log.warning("the actor's data is gone; stopping")
        else:
            self.log.error("a write failed; the actor restarts from its stored state: %s", error)
        if self.status == "running":
            # Stop taking calls now (they wait for the next instance), then drop this one.
            self.status = "stopping"
            self.activity.cancel_sleep()
            self.abort.fire()
            self.host.spawn(self.host.drop_instance(self), name=f"drop {self.actor_id}")

    # ---------------------------------------------------------------- activity

    def enter(self) -> None:
        """Mark the start of work that keeps the actor awake."""
        self.activity.enter()

    def leave(self) -> None:
        """Mark the end of such work (the sleep timer starts once nothing is left)."""
        self.activity.leave()

    def __repr__(self) -> str:
        return f"ActorInstance({self.name}/{self.actor_id}, {self.status})"


def _ignore_outcome(future: asyncio.Future[None]) -> None:
    """Read a future's outcome so an unread failure is not reported (see broadcast)."""
    if not future.cancelled():
        future.exception()
