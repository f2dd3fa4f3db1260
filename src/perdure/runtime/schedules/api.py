"""``c.schedule`` (one-shot events) and ``c.cron`` (recurring jobs): the user's API.

Every method is a coroutine. Changes are durable when they return, and they commit
together with the state changes the calling action made so far. The scheduled action
receives the configured ``args`` followed by a :class:`ScheduledFireInfo`. Errors are
:class:`~perdure.errors.ScheduleError` with codes ``schedule.invalid_name``,
``invalid_interval``, ``invalid_cron_expression``, ``invalid_timezone``,
``invalid_max_history``, ``invalid_limit``, ``invalid_delay``, ``invalid_time``,
``invalid_arguments``, ``action_not_found`` and ``max_schedules_exceeded``.

Durations are seconds or a ``timedelta``, instants an aware ``datetime`` or epoch
milliseconds. A keyword the method does not take (RivetKit's ``maxHistory``) raises
:class:`~perdure.errors.ArgumentError` ``api.unknown_argument`` naming the snake_case one.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable
from typing import Any

from perdure._names import keywords_checked
from perdure._time import warn_if_epoch_seconds, warn_if_milliseconds
from perdure.errors import ActionNotFound, InvalidRequest, ScheduleError
from perdure.runtime.schedules.cadence import (
    check_history_limit,
    check_max_history,
    check_name,
    cron_zone,
    delay_ms,
    epoch_ms,
    interval_ms,
    next_cron_after,
    plain_args,
    same_fields,
)
from perdure.runtime.schedules.info import (
    CronFire,
    CronJobInfo,
    ScheduledEventInfo,
)
from perdure.runtime.schedules.manager import ScheduleManager, recurring_id
from perdure.store.base import ScheduleRecord
from perdure.store.encoding import decode_value, encode_value

__all__ = ["ActorCron", "ActorSchedule"]

_EventList = list[ScheduledEventInfo]
_JobList = list[CronJobInfo]
_FireList = list[CronFire]


@dataclasses.dataclass(frozen=True, slots=True)
class _Cadence:
    """How a recurring job repeats: a cron expression in a zone, or an interval."""

    kind: str
    expression: str | None = None
    timezone: str | None = None
    interval_ms: int | None = None


def _check_action(manager: ScheduleManager, action: Any, args: list[Any]) -> bytes:
    """Check the action exists and takes ``args`` plus the fire info; encode ``args``."""
    definition = manager.core.definition
    try:
        if not isinstance(action, str):
            raise ActionNotFound(repr(action))
        definition.find_action(action, len(args) + 1)
    except ActionNotFound:
        raise ScheduleError(
            f"Actor `{definition.name}` has no action {action!r} to schedule.",
            code="action_not_found",
        ) from None
    except InvalidRequest as exc:
        raise ScheduleError(
            f"{exc.message} A scheduled call passes the configured args and then the fire info.",
            code="invalid_arguments",
        ) from None
    return encode_value(args, what=f"arguments of scheduled action `{action}`")


def _check_room(manager: ScheduleManager, schedule_id: str) -> None:
    limit = manager.core.options.max_schedules
    if schedule_id not in manager.jobs and len(manager.jobs) >= limit:
        raise ScheduleError(
            f"Actor `{manager.core.name}` already has {limit} schedules "
            "(the max_schedules option).",
            code="max_schedules_exceeded",
        )


class ActorSchedule:
    """``c.schedule``: run an action once, later. Ids are UUID strings."""

    __slots__ = ("_manager",)

    def __init__(self, manager: ScheduleManager) -> None:
        self._manager = manager

    @keywords_checked("schedule.after()")
    async def after(self, delay: Any, action: str, *args: Any) -> str:
        """Run ``action(*args, fire_info)`` after ``delay`` (seconds or timedelta)."""
        warn_if_milliseconds("schedule.after() delay", delay)
        return await self._add(self._manager.now() + delay_ms(delay), action, list(args))

    @keywords_checked("schedule.at()")
    async def at(self, when: Any, action: str, *args: Any) -> str:
        """Run ``action(*args, fire_info)`` at ``when`` (aware datetime or epoch ms).

        A time in the past fires as soon as possible.
        """
        warn_if_epoch_seconds("schedule.at() time", when)
        return await self._add(epoch_ms(when), action, list(args))

    async def _add(self, run_at: int, action: str, args: list[Any]) -> str:
        manager = self._manager
        encoded = _check_action(manager, action, args)
        schedule_id = str(uuid.uuid4())
        _check_room(manager, schedule_id)
        manager.put(ScheduleRecord(schedule_id, "at", action, encoded, run_at, manager.now()))
        manager.sync_alarm()
        await manager.flush()
        return schedule_id

    @keywords_checked("schedule.get()")
    async def get(self, schedule_id: str) -> ScheduledEventInfo | None:
        """The pending one-shot with this id, or ``None`` (fired, cancelled, unknown)."""
        job = self._manager.jobs.get(schedule_id)
        return None if job is None or job.name is not None else _event_info(job)

    @keywords_checked("schedule.list()")
    async def list(self) -> _EventList:
        """Pending one-shots, soonest first."""
        jobs = [job for job in self._manager.jobs.values() if job.name is None]
        return [_event_info(job) for job in sorted(jobs, key=lambda j: (j.run_at, j.id))]

    @keywords_checked("schedule.cancel()")
    async def cancel(self, schedule_id: str) -> bool:
        """Cancel a pending one-shot; ``False`` if there is none with this id."""
        manager = self._manager
        job = manager.jobs.get(schedule_id)
        if job is None or job.name is not None:
            return False
        manager.remove(schedule_id)
        manager.sync_alarm()
        await manager.flush()
        return True


class ActorCron:
    """``c.cron``: recurring jobs by name; setting a name again updates the job."""

    __slots__ = ("_manager",)

    def __init__(self, manager: ScheduleManager) -> None:
        self._manager = manager

    @keywords_checked("cron.every()")
    async def every(
        self,
        *,
        name: str,
        interval: Any,
        action: str,
        args: Iterable[Any] = (),
        max_history: int = 100,
    ) -> CronJobInfo:
        """Run ``action(*args, fire_info)`` every ``interval`` (seconds or timedelta).

        The minimum interval is the actor option ``min_cron_interval`` (5 s by default).
        The first run is one interval from now; if the job exists with the same interval
        its next run is kept.
        """
        warn_if_milliseconds("cron.every() interval", interval)
        manager = self._manager
        minimum = round(manager.core.options.min_cron_interval * 1000)
        step = interval_ms(interval, minimum)
        old = self._prepare(name, max_history)
        if old is not None and old.kind == "every" and old.interval_ms == step:
            run_at = old.run_at
        else:
            run_at = manager.now() + step
        cadence = _Cadence("every", interval_ms=step)
        return await self._upsert(name, action, args, max_history, run_at, cadence, old)

    @keywords_checked("cron.set()")
    async def set(
        self,
        *,
        name: str,
        expression: str,
        action: str,
        args: Iterable[Any] = (),
        timezone: str = "UTC",
        max_history: int = 100,
    ) -> CronJobInfo:
        """Run ``action(*args, fire_info)`` on a five-field cron ``expression`` in ``timezone``.

        Local times that DST skips are skipped. If the job exists with the same
        expression and zone, its next run is kept.
        """
        zone = cron_zone(expression, timezone)
        old = self._prepare(name, max_history)
        if (
            old is not None
            and old.kind == "cron"
            and same_fields(old.expression, expression)
            and old.timezone == timezone
        ):
            run_at = old.run_at
        else:
            run_at = next_cron_after(expression, zone, self._manager.now())
        cadence = _Cadence("cron", expression=expression, timezone=timezone)
        return await self._upsert(name, action, args, max_history, run_at, cadence, old)

    def _prepare(self, name: Any, max_history: Any) -> ScheduleRecord | None:
        check_name(name)
        check_max_history(max_history)
        return self._manager.jobs.get(recurring_id(name))

    async def _upsert(
        self,
        name: str,
        action: str,
        args: Iterable[Any],
        max_history: int,
        run_at: int,
        cadence: _Cadence,
        old: ScheduleRecord | None,
    ) -> CronJobInfo:
        manager = self._manager
        encoded = _check_action(manager, action, plain_args(args))
        job_id = recurring_id(name)
        _check_room(manager, job_id)
        if old is None:
            old = ScheduleRecord(job_id, cadence.kind, action, encoded, run_at, manager.now(), name)
        job = dataclasses.replace(
            old,
            kind=cadence.kind,
            action=action,
            args=encoded,
            run_at=run_at,
            expression=cadence.expression,
            timezone=cadence.timezone,
            interval_ms=cadence.interval_ms,
            max_history=max_history,
        )
        # A lower max_history applies now; 0 clears the history.
        manager.prune(name, job.fire_seq - max_history)
        manager.put(job)
        manager.sync_alarm()
        await manager.flush()
        return _job_info(job)

    @keywords_checked("cron.get()")
    async def get(self, name: str) -> CronJobInfo | None:
        """The recurring job ``name``, or ``None``."""
        job = self._manager.jobs.get(recurring_id(name)) if isinstance(name, str) else None
        return None if job is None else _job_info(job)

    @keywords_checked("cron.list()")
    async def list(self) -> _JobList:
        """Every recurring job, by name."""
        jobs = [job for job in self._manager.jobs.values() if job.name is not None]
        return [_job_info(job) for job in sorted(jobs, key=lambda j: j.id)]

    @keywords_checked("cron.delete()")
    async def delete(self, name: str) -> bool:
        """Delete the job and its history; ``False`` if there is no job of that name."""
        manager = self._manager
        if not isinstance(name, str) or manager.remove(recurring_id(name)) is None:
            return False
        manager.sync_alarm()
        await manager.flush()
        return True

    @keywords_checked("cron.history()")
    async def history(self, name: str, limit: int = 20) -> _FireList:
        """The job's newest fires (``limit`` 1..1000), newest first."""
        check_name(name)
        check_history_limit(limit)
        manager = self._manager
        await manager.flush()  # read what this actor has recorded so far
        core = manager.core
        records = await core.store.load_fire_history(core.actor_id, name, limit)
        return [
            CronFire(
                r.action,
                r.scheduled_at,
                r.fired_at,
                r.finished_at,
                r.result,  # type: ignore[arg-type]
                None if r.error is None else decode_value(r.error),
            )
            for r in records
        ]


def _event_info(job: ScheduleRecord) -> ScheduledEventInfo:
    return ScheduledEventInfo(job.id, job.action, decode_value(job.args), job.run_at)


def _job_info(job: ScheduleRecord) -> CronJobInfo:
    assert job.name is not None
    return CronJobInfo(
        name=job.name,
        kind="cron" if job.kind == "cron" else "every",
        action=job.action,
        args=decode_value(job.args),
        next_run_at=job.run_at,
        last_run_at=job.last_run_at,
        max_history=job.max_history,
        expression=job.expression,
        timezone=job.timezone,
        interval_ms=job.interval_ms,
    )
