"""The schedules of one live actor: one-shot events and recurring jobs, and their firing.

Jobs live in the store (table ``schedules``) and, while the actor is awake, in memory.
Every change is staged in the actor's pending commit, so it commits together with the
state of the action that made it, and the API awaits that commit before returning.

The earliest ``run_at`` of all jobs is the actor's ``"schedule"`` alarm, hence part of its
stored ``wake_at``: a sleeping actor is woken by the alarm scheduler when a job is due,
and its start drains every overdue job (after ``on_wake``). While it is awake, a timer
task (through ``runtime.clock``) fires jobs as they fall due. The timer lets the actor
sleep between runs, even right before a fire (like rivetkit: the idle timeout decides,
and the alarm wakes the actor), except that an actor the alarm scheduler woke early for
a fire (``_HOLD_MS`` before it) stays up until it; a fire in progress keeps it awake too.

Firing (see ``rivet-behaviour.md`` §5.3):

- A fire is *claimed* before its action runs, and the claim is committed first: a
  one-shot is deleted, a recurring job advances to its next deadline and records a
  ``running`` fire. So a fire runs at most once; a crash mid-run loses it (one-shot) or
  leaves ``running`` behind, recorded as ``error``/``schedule.interrupted`` at the next
  start. Failures are recorded, never retried.
- Missed deadlines coalesce: an overdue job fires once, with ``scheduled_at`` = the first
  missed deadline; ``every`` jobs stay anchored (next = first ``deadline + k·interval``
  after now), cron jobs take their next occurrence after now.
- A recurring job still running when due records a ``skipped`` fire and advances.
- A job whose action no longer exists is deleted (with its history) instead of firing.
- A claim committed just as the actor began to stop, its action not started, is undone:
  the job fires at the next wake.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING, Any, Protocol
from zoneinfo import ZoneInfo

from perdure.errors import ActionNotFound, ActorAborted, ActorNotFound, PerdureError
from perdure.runtime.kernel.clock import sleep_until_or_event
from perdure.runtime.kernel.core import PREWAKE_MS
from perdure.runtime.schedules.cadence import next_cron_after, next_every_after
from perdure.runtime.schedules.info import ScheduledFireInfo, ScheduleKind
from perdure.store.base import ScheduleFireRecord, ScheduleRecord
from perdure.store.encoding import decode_value, encode_value

if TYPE_CHECKING:
    from perdure.runtime.kernel.core import ActorCore

__all__ = ["ALARM_SOURCE", "ScheduleManager", "ScheduledCaller", "recurring_id"]

ALARM_SOURCE = "schedule"
# An actor woken this soon before a job's fire stays awake for it: a little longer than
# the alarm scheduler wakes actors early.
_HOLD_MS = PREWAKE_MS + 100
_ALL_FIRES = 2**62  # "every seq" for a prune; fits a signed 64-bit column


class ScheduledCaller(Protocol):
    """How a due job's action is called: through the runtime's dispatch, like any
    request (the actor's instance is the caller the manager is handed)."""

    async def call_scheduled(self, action: str, args: list[Any]) -> Any:
        """Call ``action`` with ``args`` (which end with the fire's ScheduledFireInfo)."""
        ...


def recurring_id(name: str) -> str:
    """The stored id of the recurring job ``name``."""
    return f"cron:{name}"


@dataclasses.dataclass(slots=True)
class _Run:
    """A claimed fire, waiting for its claim to commit and then for its action."""

    job: ScheduleRecord
    info: ScheduledFireInfo
    seq: int | None  # the fire's history sequence number (recurring jobs only)


class ScheduleManager:
    """One per awake actor; ``c.schedule``/``c.cron`` are views over it. ``caller``
    calls a due job's action."""

    def __init__(self, core: ActorCore, caller: ScheduledCaller) -> None:
        self.core = core
        self._caller = caller
        self.jobs: dict[str, ScheduleRecord] = {}
        self._running: dict[str, int] = {}  # recurring job id -> seq of its run in progress
        # Wakes the timer when the jobs change; made with the timer (an Event and its
        # deque are ~870 bytes, and most actors have no schedules).
        self._changed_event: asyncio.Event | None = None
        self._timer: asyncio.Task[None] | None = None
        self._started_ms: int | None = None  # when the actor started to run (clock ms)

    # ------------------------------------------------------------------ lifecycle

    async def load(self) -> None:
        """Read the actor's jobs; record runs a crash interrupted; arm the alarm."""
        core = self.core
        records = await core.store.load_schedules(core.actor_id)
        self.jobs = {record.id: record for record in records}
        for record in records:
            if record.running_seq is not None:
                await self._record_interrupted(record)
        self.sync_alarm()

    def start(self) -> None:
        """Start firing (called once the actor runs, after ``on_wake``): drains overdue jobs."""
        self._started_ms = self.now()
        self._ensure_timer()

    def now(self) -> int:
        """The runtime clock's time, epoch ms."""
        return self.core.clock.now_ms()

    # -------------------------------------------------------------------- staging

    def put(self, record: ScheduleRecord) -> None:
        """Insert or replace a job in memory and in the next commit."""
        self.jobs[record.id] = record
        self.core.commits.put_schedule(record)

    def remove(self, schedule_id: str) -> ScheduleRecord | None:
        """Delete a job (and a recurring job's history); return it, or None if unknown."""
        record = self.jobs.pop(schedule_id, None)
        if record is None:
            return None
        self.core.commits.delete_schedule(schedule_id)
        if record.name is not None:
            self._running.pop(schedule_id, None)
            self.prune(record.name, _ALL_FIRES)
        return record

    def prune(self, name: str, up_to_seq: int) -> None:
        """Drop the job's fires with ``seq <= up_to_seq`` (staged ones included)."""
        if up_to_seq < 1:
            return
        self.core.commits.prune_fires(name, up_to_seq)

    def record_fire(self, job: ScheduleRecord, fire: ScheduleFireRecord, *, new: bool) -> None:
        """Stage a fire record of ``job``; a ``new`` one prunes history to ``max_history``."""
        if job.name is None or job.max_history <= 0:
            return
        if not new and fire.seq <= job.fire_seq - job.max_history:
            return  # newer fires have pushed it out of the history meanwhile
        self.core.commits.put_fire(fire)
        if new:
            self.prune(job.name, fire.seq - job.max_history)

    def sync_alarm(self) -> None:
        """Make the earliest ``run_at`` the actor's schedule alarm; re-arm the timer."""
        earliest = min((job.run_at for job in self.jobs.values()), default=None)
        self.core.set_alarm(ALARM_SOURCE, earliest)
        if self._changed_event is not None:
            self._changed_event.set()
        self._ensure_timer()

    async def flush(self) -> None:
        """Wait until every staged change is durable."""
        await self.core.request_flush()

    async def _record_interrupted(self, job: ScheduleRecord) -> None:
        seq = job.running_seq
        assert seq is not None
        assert job.name is not None
        store = self.core.store
        fires = await store.load_fire_history(self.core.actor_id, job.name, job.fire_seq - seq + 1)
        for fire in fires:
            if fire.seq == seq and fire.result == "running":
                error = {
                    "group": "schedule",
                    "code": "interrupted",
                    "message": "The run was interrupted: the actor stopped or crashed.",
                }
                self.core.commits.put_fire(
                    dataclasses.replace(
                        fire, result="error", finished_at=self.now(), error=encode_value(error)
                    )
                )
        self.put(dataclasses.replace(job, running_seq=None))

    # --------------------------------------------------------------------- firing

    def _ensure_timer(self) -> None:
        if self._started_ms is None or not self.jobs:
            return
        if self._timer is None or self._timer.done():
            name = f"schedules {self.core.actor_id}"
            self._timer = self.core.tasks.spawn(self._run_timer(), name=name)

    @property
    def _changed(self) -> asyncio.Event:
        if self._changed_event is None:
            self._changed_event = asyncio.Event()
        return self._changed_event

    def _can_fire(self) -> bool:
        return self.core.running and not self.core.abort.aborted

    async def _run_timer(self) -> None:
        clock = self.core.clock
        while self._can_fire():
            self._changed.clear()
            due = min((job.run_at for job in self.jobs.values()), default=None)
            now = clock.now_ms()
            if due is not None and due <= now:
                await self._fire_due()
            elif due is not None and due - now <= _HOLD_MS:
                await self._hold_until(due, self._woken_for(due))
            else:
                await sleep_until_or_event(clock, _minus(due, _HOLD_MS), self._changed)

    def _woken_for(self, due: int) -> bool:
        """This instance started within ``_HOLD_MS`` of ``due``: woken early for it."""
        return self._started_ms is not None and self._started_ms >= due - _HOLD_MS

    async def _hold_until(self, due: int, keep_awake: bool) -> None:
        """Wait for a job due very soon. An actor woken early for it (``keep_awake``) is
        held awake until then: sleeping would only mean being woken again in a moment.
        One awake before is not (rivetkit's rule: a pending alarm does not hold an idle
        actor; it sleeps at its idle timeout and the alarm wakes it)."""
        core = self.core
        if keep_awake:
            core.activity.enter()
        waiting = asyncio.ensure_future(sleep_until_or_event(core.clock, due, self._changed))
        aborted = asyncio.ensure_future(core.abort.wait())  # a stop must not wait for us
        try:
            await asyncio.wait({waiting, aborted}, return_when=asyncio.FIRST_COMPLETED)
            if aborted.done():
                # Going to sleep right before a fire: have the scheduler look again then.
                core.note_alarm(due)
        finally:
            waiting.cancel()
            aborted.cancel()
            if keep_awake:
                core.activity.leave()

    async def _fire_due(self) -> None:
        """Claim every due job, commit the claims, then start their actions."""
        now = self.now()
        due = sorted(
            (job for job in self.jobs.values() if job.run_at <= now),
            key=lambda job: (job.run_at, job.id),
        )
        runs = [run for run in (self._try_claim(job, now) for job in due) if run is not None]
        self.sync_alarm()
        core = self.core
        activity = core.activity
        for _ in runs:
            activity.enter()  # a fire keeps the actor awake until its outcome is recorded
        try:
            await self.flush()
        except Exception:
            core.log.exception("committing scheduled fires failed; they do not run")
            for run in runs:
                self._running.pop(run.job.id, None)
                activity.leave()
            return
        observer = core.observer
        for run in runs:
            observer.alarm_fired(core, "schedule", run.info.fired_at - run.info.scheduled_at)
            if self._can_fire():
                core.tasks.spawn(self._execute(run), name=f"fire {run.info.id}")
            else:  # a stop began while the claims were committed
                self._release(run)
                activity.leave()

    def _release(self, run: _Run) -> None:
        """Undo the claim of a fire whose action cannot run (the actor is stopping): the
        job fires at the next wake instead. Its action has not started, so this keeps
        "at most once" and loses nothing."""
        claimed = run.job
        current = self.jobs.get(claimed.id)
        if run.seq is None:
            if current is None:
                self.put(claimed)
        elif self._running.get(claimed.id) == run.seq and current is not None:
            del self._running[claimed.id]
            # The next fire reuses this seq: its record overwrites the `running` one.
            self.put(
                dataclasses.replace(
                    current,
                    run_at=claimed.run_at,
                    fire_seq=claimed.fire_seq,
                    last_run_at=claimed.last_run_at,
                    running_seq=None,
                )
            )
        self.sync_alarm()

    def _try_claim(self, job: ScheduleRecord, now: int) -> _Run | None:
        try:
            return self._claim(job, now)
        except Exception:
            # Its next time cannot be computed (say, a zone the system no longer knows):
            # firing it again and again would not help.
            self.core.log.exception("deleting schedule %s: it cannot be fired", job.id)
            self.remove(job.id)
            return None

    def _claim(self, job: ScheduleRecord, now: int) -> _Run | None:
        if job.action not in self.core.definition.actions:
            self.core.log.warning(
                "deleting schedule %s: its action `%s` no longer exists", job.id, job.action
            )
            self.remove(job.id)
            return None
        if job.name is None:
            self.remove(job.id)
            return _Run(job, ScheduledFireInfo("at", job.id, None, job.run_at, now), None)
        seq = job.fire_seq + 1
        advanced = dataclasses.replace(job, run_at=self._next_run(job, now), fire_seq=seq)
        fire = ScheduleFireRecord(job.name, seq, job.action, job.run_at, now, "running")
        if job.id in self._running:  # the previous run is still going: skip this one
            skipped = dataclasses.replace(fire, result="skipped", finished_at=now)
            self.record_fire(job, skipped, new=True)
            self.put(advanced)
            return None
        self.record_fire(job, fire, new=True)
        self.put(dataclasses.replace(advanced, last_run_at=now, running_seq=seq))
        self._running[job.id] = seq
        kind: ScheduleKind = "cron" if job.kind == "cron" else "every"
        return _Run(job, ScheduledFireInfo(kind, job.name, job.name, job.run_at, now), seq)

    @staticmethod
    def _next_run(job: ScheduleRecord, now: int) -> int:
        if job.kind == "every":
            assert job.interval_ms is not None
            return next_every_after(job.run_at, job.interval_ms, now)
        assert job.expression is not None
        assert job.timezone is not None
        return next_cron_after(job.expression, ZoneInfo(job.timezone), now)

    async def _execute(self, run: _Run) -> None:
        try:
            if not self._can_fire():
                self._release(run)
                return
            error = await self._call(run)
            self._finish(run, error)
            if run.seq is not None:  # a recurring job: its outcome is recorded
                await self.flush()
        except (ActorAborted, ActorNotFound):
            pass  # the actor stopped or was destroyed meanwhile: nothing left to record
        except Exception:
            self.core.log.exception("recording scheduled fire %s failed", run.info.id)
        finally:
            self.core.activity.leave()

    async def _call(self, run: _Run) -> dict[str, Any] | None:
        """Run the action; return ``{group, code, message}`` if it failed."""
        action = run.job.action
        try:
            args = [*decode_value(run.job.args), run.info]
            await self._caller.call_scheduled(action, args)
        except ActionNotFound as exc:  # gone since the claim checked it
            self.remove(run.job.id)
            return _error_info(exc)
        except PerdureError as exc:
            self.core.log.warning("scheduled action %s failed: %s", action, exc)
            return _error_info(exc)
        except Exception:
            # call_action turns the action's own exceptions into InternalError; this is
            # arguments that could not be decoded.
            self.core.log.exception("scheduled action %s could not be called", action)
            return {"group": "actor", "code": "internal_error", "message": "Bad arguments."}
        return None

    def _finish(self, run: _Run, error: dict[str, Any] | None) -> None:
        """Stage the outcome of a recurring job's run (one-shots keep no history)."""
        job_id = run.job.id
        if run.seq is None or self._running.get(job_id) != run.seq:
            return  # a one-shot, or deleted while it ran: no history to write
        del self._running[job_id]
        job = self.jobs.get(job_id)
        if job is None:
            return
        self.put(dataclasses.replace(job, running_seq=None))
        assert run.job.name is not None
        fire = ScheduleFireRecord(
            run.job.name,
            run.seq,
            run.job.action,
            run.info.scheduled_at,
            run.info.fired_at,
            "ok" if error is None else "error",
            finished_at=self.now(),
            error=None if error is None else encode_value(error),
        )
        self.record_fire(job, fire, new=False)


def _minus(at: int | None, ms: int) -> int | None:
    return None if at is None else at - ms


def _error_info(exc: PerdureError) -> dict[str, Any]:
    return {"group": exc.group, "code": exc.code, "message": exc.message}
