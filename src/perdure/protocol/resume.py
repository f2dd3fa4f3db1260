"""The resumable-events extension of the connection protocol (docs/events.md).

Negotiated by the perdure clients and never by the official RivetKit client, which
therefore keeps rivetkit's live events. A socket that offers the subprotocol
``RESUME_PREFIX + since`` (``s<seq>``: after that event; ``a<ms>``: the events of the
last ``ms`` milliseconds) gets, right after ``Init``, the control frame
``Event{CONTROL_EVENT, [-1, "numbered"]}`` (this socket's events are numbered), then
``Event{CONTROL_EVENT, [-1, "resumed", start]}`` (events after number ``start``
follow), then ``Event{CONTROL_EVENT, [-1, "gap", after, resumed_at]}`` when the log no
longer holds what was asked for, and every event as ``Event{name, [seq, *args]}``.
Sequence numbers start at 1, so ``-1`` in the first place marks a control frame and
``0`` what the actor sent to this connection alone (``conn.send``: not logged, not
numbered).
"""

from __future__ import annotations

from typing import Any

from perdure.errors import InvalidRequest

__all__ = ["CONTROL_EVENT", "RESUME_PREFIX", "check_since", "resume_protocol"]

RESUME_PREFIX = "perdure_events."
CONTROL_EVENT = "$perdure.events"


def resume_protocol(after_seq: int | None, age_ms: int) -> str:
    """The subprotocol that asks for the events after ``after_seq`` or, when there is
    none yet, for those of the last ``age_ms`` milliseconds."""
    return f"{RESUME_PREFIX}s{after_seq}" if after_seq is not None else f"{RESUME_PREFIX}a{age_ms}"


def check_since(since: Any) -> int | None:
    """``since`` as a client may give it: ``None`` (from now) or an event number
    (``>= 0``); anything else raises ``events.invalid_since``."""
    if since is None or (isinstance(since, int) and not isinstance(since, bool) and since >= 0):
        return since
    raise InvalidRequest(
        f"`since` must be an event number (an int >= 0) or None, not {since!r:.40}.",
        code="invalid_since",
        group="events",
    )
