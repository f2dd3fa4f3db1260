"""How the admin commands print what the admin API answers: the ``perdure inspect`` report,
a workflow's status and history, aligned tables, times as local time and "in 3m".

Pure functions of the API's JSON (and the current time, passed in), for
:mod:`perdure.cli.admin`; like it, this module imports no engine module.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from perdure.keys import serialize_key

__all__ = ["actor_label", "inspect_report", "workflow_lines"]

Json = Any
_BODY_WIDTH = 60  # queue bodies, arguments and outputs are cut to this many characters
_LAST_FIRES = 5  # fires shown per schedule (--json has them all)
_ROWS_SHOWN = 20  # connections and queued messages listed (the oldest first)


def actor_label(name: str, key: Sequence[str]) -> str:
    """``name [key]``, the key in its serialised form (``[]`` for the empty key)."""
    return f"{name} [{serialize_key(key) if key else ''}]"


def inspect_report(detail: Mapping[str, Json], *, now_ms: float) -> list[str]:
    """The readable report of ``GET /admin/actors/{id}``, as lines."""
    row = detail["actor"]
    alarm = row.get("wake_at")
    lines = [
        actor_label(row["name"], row.get("key") or []),
        f"  id          {row['actor_id']}",
        f"  created     {_when(row.get('created_at'), now_ms)}",
        f"  status      {'awake' if row.get('awake') else 'asleep'}",
        f"  next alarm  {'none' if alarm is None else _when(alarm, now_ms)}",
        "",
        "state",
        *_indent(json.dumps(detail.get("state"), indent=2, ensure_ascii=False).splitlines()),
    ]
    for section in (_connections, _queue, _schedules):
        lines += ["", *section(detail, now_ms)]
    flow = detail.get("workflow")
    if flow is not None:
        lines += ["", *workflow_lines(flow, now_ms=now_ms)]
    return lines


def _connections(detail: Mapping[str, Json], now_ms: float) -> list[str]:
    connections = detail.get("connections") or []
    if not connections:
        return ["connections: none"]
    rows = (
        [
            c["id"],
            _compact(c.get("params")),
            _compact(c.get("state")),
            _join(c.get("subscriptions")),
        ]
        for c in connections[:_ROWS_SHOWN]
    )
    head = ["ID", "PARAMS", "STATE", "SUBSCRIPTIONS"]
    return [f"connections ({len(connections)})", *_table(head, rows), *_more(connections)]


def _queue(detail: Mapping[str, Json], now_ms: float) -> list[str]:
    messages = detail.get("queue") or []
    if not messages:
        return ["queue: empty"]
    rows = (
        [
            str(m["id"]),
            m["name"],
            _when(m.get("created_at"), now_ms),
            "held" if m.get("held") else "",
            _compact(m.get("body")),
        ]
        for m in messages[:_ROWS_SHOWN]
    )
    head = ["ID", "QUEUE", "SENT", "HELD", "BODY"]
    return [
        f"queue ({len(messages)} message{'s' if len(messages) != 1 else ''})",
        *_table(head, rows),
        *_more(messages),
    ]


def _more(items: Sequence[Json]) -> list[str]:
    """The line that says how many rows were left out, if any were."""
    left = len(items) - _ROWS_SHOWN
    return [f"  … and {left} more (--json lists them all)"] if left > 0 else []


def _schedules(detail: Mapping[str, Json], now_ms: float) -> list[str]:
    schedules = detail.get("schedules") or []
    if not schedules:
        return ["schedules: none"]
    rows = (
        [
            s.get("name") or _short(s["id"]),
            _cadence(s),
            f"{s['action']}({_compact(s.get('args') or [])[1:-1]})",
            _when(s.get("run_at"), now_ms),
        ]
        for s in schedules
    )
    lines = [f"schedules ({len(schedules)})"]
    lines += _table(["SCHEDULE", "RUNS", "ACTION", "NEXT RUN"], rows)
    fires = [
        _fire_row(schedule, fire, now_ms)
        for schedule in schedules
        for fire in _newest(schedule.get("history") or [])
    ]
    if fires:
        lines += ["", "last fires"]
        lines += _table(["SCHEDULE", "SEQ", "FIRED", "RESULT", "ERROR"], fires)
    return lines


def _newest(fires: list[Json]) -> list[Json]:
    return sorted(fires, key=lambda fire: -int(fire.get("seq") or 0))[:_LAST_FIRES]


def _fire_row(schedule: Mapping[str, Json], fire: Mapping[str, Json], now_ms: float) -> list[str]:
    return [
        schedule.get("name") or _short(schedule["id"]),
        str(fire.get("seq", "")),
        _when(fire.get("fired_at"), now_ms),
        str(fire.get("result", "")),
        _error_text(fire.get("error")),
    ]


def _cadence(schedule: Mapping[str, Json]) -> str:
    kind = schedule.get("kind")
    if kind == "cron":
        return f"cron {schedule.get('expression')} {schedule.get('timezone') or ''}".rstrip()
    if kind == "every" and schedule.get("interval_ms") is not None:
        return f"every {_duration(float(schedule['interval_ms']))}"
    return "once"


def workflow_lines(flow: Mapping[str, Json], *, now_ms: float) -> list[str]:
    """The workflow's status, error, output and history table."""
    lines = _workflow_summary(flow)
    history = flow.get("history") or []
    if not history:
        return [*lines, "  history: empty"]
    rows = (
        [
            e["location"],
            str(e.get("kind", "")),
            _entry_status(e, now_ms),
            "-" if e.get("attempts") is None else str(e["attempts"]),
            _last_error(e),
        ]
        for e in history
    )
    return [*lines, "", *_table(["LOCATION", "KIND", "STATUS", "ATTEMPTS", "LAST ERROR"], rows)]


def _workflow_summary(flow: Mapping[str, Json]) -> list[str]:
    """The workflow's status line, then its error and output if it has them."""
    lines = [f"workflow: {flow.get('status')}"]
    if flow.get("error"):
        lines.append(f"  error   {_error_text(flow['error'])}")
    if flow.get("output") is not None:
        lines.append(f"  output  {_compact(flow['output'])}")
    return lines


def _entry_status(entry: Mapping[str, Json], now_ms: float) -> str:
    status = str(entry.get("status", ""))
    if status == "completed":
        return status
    if entry.get("retry_at") is not None:
        return f"{status} (retry {_relative(entry['retry_at'] - now_ms)})"
    if entry.get("deadline") is not None:
        return f"{status} (deadline {_relative(entry['deadline'] - now_ms)})"
    return status


def _last_error(entry: Mapping[str, Json]) -> str:
    if entry.get("error"):
        return _error_text(entry["error"])
    past = entry.get("errors") or []
    return f"(before) {_error_text(past[-1])}" if past else ""


def _error_text(error: Json) -> str:
    if not error:
        return ""
    if not isinstance(error, dict):
        return str(error)
    message = str(error.get("message", ""))
    if error.get("group") and error.get("code"):
        return f"{message} ({error['group']}.{error['code']})"
    return message


# ----------------------------------------------------------------------- printing


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """An aligned table, indented two spaces; the last column is not padded."""
    lines = [list(headers), *([_one_line(cell) for cell in row] for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    return [
        "  "
        + "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    ]


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _indent(lines: Iterable[str]) -> list[str]:
    return [f"  {line}" for line in lines]


def _compact(value: Json) -> str:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text if len(text) <= _BODY_WIDTH else text[: _BODY_WIDTH - 1] + "…"


def _join(values: Json) -> str:
    return ", ".join(str(v) for v in values or []) or "-"


def _short(identifier: str) -> str:
    return identifier[:8]


def _when(ms: Json, now_ms: float) -> str:
    """Epoch milliseconds as local time and how far from now: ``… (in 3m)``."""
    if ms is None:
        return "-"
    local = _dt.datetime.fromtimestamp(float(ms) / 1000).astimezone()
    return f"{local:%Y-%m-%d %H:%M:%S %Z} ({_relative(float(ms) - now_ms)})"


def _relative(delta_ms: float) -> str:
    if abs(delta_ms) < 1000:
        return "now"
    text = _duration(abs(delta_ms))
    return f"in {text}" if delta_ms > 0 else f"{text} ago"


def _duration(ms: float) -> str:
    """``42s``, ``3m``, ``2h 5m``, ``3d 4h``: two units at most, rounded down."""
    seconds = int(ms // 1000)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        hours, minutes = divmod(seconds // 60, 60)
        return f"{hours}h {minutes}m" if minutes else f"{hours}h"
    days, hours = divmod(seconds // 3600, 24)
    return f"{days}d {hours}h" if hours else f"{days}d"
