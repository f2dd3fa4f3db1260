"""The argument helpers: camelCase keywords and attributes, durations, instants."""

from __future__ import annotations

import datetime as dt
import logging
import math
from pathlib import Path
from typing import Any

import pytest

from perdure import CronJobInfo, ScheduledEventInfo
from perdure._names import VarsDict, keywords_checked, snake_case, vars_value
from perdure._time import duration_seconds, instant_ms, optional_duration
from perdure.errors import ArgumentError
from perdure.queue_message import QueueMessage
from tests.support.apps.porting import make_registry
from tests.support.porting import fresh_porting_warnings  # noqa: F401  (autouse)
from tests.support.schedule_rig import Rig


@pytest.mark.parametrize(
    ("camel", "snake"),
    [
        ("maxHistory", "max_history"),
        ("scheduledAt", "scheduled_at"),
        ("retryBackoffMS", "retry_backoff_ms"),
        ("timeout", "timeout"),
    ],
)
def test_snake_case(camel: str, snake: str) -> None:
    assert snake_case(camel) == snake


@keywords_checked("every()")
async def every(*, name: str, max_history: int = 100) -> str:
    return f"{name}:{max_history}"


async def test_a_checked_call_takes_its_keywords_and_refuses_others_at_the_call() -> None:
    assert await every(name="tick", max_history=3) == "tick:3"
    with pytest.raises(TypeError) as caught:
        every(name="tick", maxHistory=3)  # raises here: no coroutine is even created
    error = caught.value
    assert isinstance(error, ArgumentError)
    assert error.identifier == "api.unknown_argument"
    assert str(error) == "every(): unknown argument `maxHistory`; did you mean `max_history`?"
    assert error.metadata == {"argument": "maxHistory", "suggestion": "max_history"}


def test_an_unknown_keyword_with_nothing_close_lists_the_accepted_ones() -> None:
    with pytest.raises(ArgumentError) as caught:
        every(name="tick", color="red")
    assert str(caught.value) == (
        "every(): unknown argument `color` (it takes `max_history`, `name`)"
    )


@keywords_checked("ctx.step()")
async def step(name: str, run: Any, *, max_retries: int = 3) -> str:
    return name


@keywords_checked("schedule.after()")
async def after(delay: float, action: str, *args: Any) -> tuple[Any, ...]:
    return args


async def test_an_options_object_says_to_pass_keywords_renamed() -> None:
    with pytest.raises(ArgumentError) as caught:
        step({"name": "s", "run": print, "maxRetries": 2})  # RivetKit's step({...})
    assert caught.value.identifier == "api.options_object"
    assert str(caught.value) == (
        "ctx.step() takes keyword arguments, not an options object: pass each option as a "
        "snake_case keyword (renamed: `maxRetries` -> `max_retries`)."
    )
    # A dict that fits the signature is an argument like any other.
    assert await after(5, "record", {"maxRetries": 2}) == ({"maxRetries": 2},)


@pytest.mark.parametrize(
    ("value", "attribute", "hint"),
    [
        (QueueMessage(1, "jobs", {}, 0), "createdAt", "created_at"),
        (ScheduledEventInfo("id", "tick", [], 0), "runAt", "run_at"),
        (CronJobInfo("j", "every", "tick", [], 0, None, 100), "nextRunAt", "next_run_at"),
    ],
)
def test_camel_case_attributes_name_the_snake_case_one(
    value: Any, attribute: str, hint: str
) -> None:
    with pytest.raises(AttributeError, match=f"did you mean `{hint}`"):
        getattr(value, attribute)


def test_instants_handed_out_have_datetime_twins() -> None:
    message = QueueMessage(1, "jobs", {}, 1_704_067_200_000)
    assert message.created_time == dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    job = CronJobInfo("j", "every", "tick", [], 1_704_067_200_000, 1_704_067_190_000, 100)
    assert job.last_run_time == dt.datetime(2024, 1, 1, tzinfo=dt.UTC) - dt.timedelta(seconds=10)
    assert ScheduledEventInfo("i", "a", [], 0).run_time == dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def test_vars_dicts_keep_being_dicts() -> None:
    held = vars_value({"resource": None})
    assert type(held) is VarsDict
    assert held == {"resource": None}
    assert isinstance(held, dict)
    other = object()
    assert vars_value(other) is other


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(5, 5.0), (0.25, 0.25), (dt.timedelta(milliseconds=1500), 1.5), (0, 0.0)],
)
def test_durations_are_seconds_or_timedelta(value: Any, seconds: float) -> None:
    assert duration_seconds(value, "d") == seconds


@pytest.mark.parametrize("value", ["1000", None, True, math.nan, math.inf, -1, [1]])
def test_other_durations_fail_with_a_code(value: Any) -> None:
    with pytest.raises(ArgumentError) as caught:
        duration_seconds(value, "ctx.sleep() duration")
    assert caught.value.identifier == "api.invalid_duration"
    assert caught.value.message.startswith("ctx.sleep() duration must be")


def test_a_negative_duration_is_allowed_only_where_said() -> None:
    assert duration_seconds(-2, "d", negative_ok=True) == -2.0
    assert optional_duration(None, "t") is None


def test_an_int_duration_in_whole_thousands_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="perdure.porting")
    assert duration_seconds(7000, "test.sleep() duration") == 7000.0  # unchanged
    duration_seconds(7000, "test.sleep() duration")
    for quiet in (7000.0, dt.timedelta(seconds=7000), 999, 1500):
        duration_seconds(quiet, "test.sleep() duration")
    (record,) = caplog.records
    assert record.getMessage().startswith("test.sleep() duration is 7000 seconds (1:56:40).")
    assert "timedelta(milliseconds=7000) or 7" in record.getMessage()


def test_instants_are_aware_datetimes_or_epoch_milliseconds() -> None:
    assert instant_ms(dt.datetime(2024, 1, 1, tzinfo=dt.UTC), "t") == 1_704_067_200_000
    assert instant_ms(1_704_067_200_000, "t") == 1_704_067_200_000
    with pytest.raises(ValueError, match="naive datetime") as caught:
        instant_ms(dt.datetime(2024, 1, 1), "ctx.sleep_until() time")
    assert caught.value.code == "invalid_time"  # type: ignore[attr-defined]
    with pytest.raises(ArgumentError, match="epoch milliseconds"):
        instant_ms("2024-01-01", "t")


def test_epoch_seconds_given_as_an_instant_warn(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="perdure.porting")
    assert instant_ms(1_704_067_200, "test.at() time") == 1_704_067_200  # unchanged
    (record,) = caplog.records
    assert "a moment of January 1970" in record.getMessage()


async def test_a_millisecond_looking_interval_keeps_its_meaning_and_warns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="perdure.porting")
    rig = Rig(tmp_path, make_registry())
    await rig.start()
    try:
        c = await rig.ctx("fires")
        job = await c.cron.every(name="literal", interval=60000, action="record")
        with pytest.raises(ArgumentError, match="did you mean `max_history`"):
            await c.cron.set(name="x", expression="* * * * *", action="record", maxHistory=1)
        with pytest.raises(ArgumentError, match="unknown argument `delayMs`"):
            await c.schedule.after(1, "record", delayMs=5)
    finally:
        await rig.stop()
    assert job.interval == 60000.0  # 16.7 hours, as written
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("cron.every() interval is 60000 seconds") for m in messages)
