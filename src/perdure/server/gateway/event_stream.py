"""Resumable events on a ``/connect`` socket (docs/events.md).

A perdure client offers the subprotocol of :mod:`perdure.protocol.resume` next to
rivet's; the official RivetKit client never does, and gets today's live events.
Subprotocols travel with a socket piped to the owner of the actor (server/cluster/pipe.py), so
the node that serves the actor is the one that reads it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from perdure.protocol.messages import Event
from perdure.protocol.resume import CONTROL_EVENT, RESUME_PREFIX
from perdure.runtime import LoggedEvent, Since, parse_since
from perdure.server.gateway.outbox import SocketTransport

__all__ = ["NUMBERED", "DirectMessages", "SocketEvents", "resume_from"]

# Sent right after Init, before anything the actor sent during admission: from here on
# this socket's events are numbered (and conn.send's marked 0).
NUMBERED = Event(CONTROL_EVENT, [-1, "numbered"])


def resume_from(offered: Iterable[Any]) -> Since | None:
    """Where the socket resumes events from, or ``None`` (live only, as in rivetkit);
    ``events.invalid_since`` for a value that is not one."""
    for protocol in offered:
        if isinstance(protocol, str) and protocol.startswith(RESUME_PREFIX):
            return parse_since(protocol[len(RESUME_PREFIX) :])
    return None


class SocketEvents:
    """A follower's events, numbered, onto a socket's queue."""

    __slots__ = ("_transport",)

    def __init__(self, transport: SocketTransport) -> None:
        self._transport = transport

    def event(self, event: LoggedEvent) -> None:
        """Queue ``Event{name, [seq, *args]}`` (encoded once for every follower)."""
        self._transport.send_event(event.name, _numbered(event))

    def resumed(self, start: int) -> None:
        """Queue the control frame that says numbered events after ``start`` follow."""
        self._transport.send_event(CONTROL_EVENT, [-1, "resumed", start])

    def gap(self, after: int, resumed_at: int) -> None:
        """Queue the gap frame."""
        self._transport.send_event(CONTROL_EVENT, [-1, "gap", after, resumed_at])


class DirectMessages:
    """The transport the actor sees for a resuming socket: what it sends to this one
    connection (``conn.send``, not logged) goes as ``Event{name, [0, *args]}``, so the
    client tells it from a numbered event."""

    __slots__ = ("_transport",)

    def __init__(self, transport: SocketTransport) -> None:
        self._transport = transport

    def send_event(self, name: str, args: list[Any]) -> None:
        self._transport.send_event(name, [0, *args])

    def close(self, code: int, reason: str) -> None:
        self._transport.close(code, reason)


class _Numbered:
    """The numbered argument list of the last event: one list per event, so the socket
    frame cache (keyed by the list) encodes it once for all the followers it goes to."""

    __slots__ = ("args", "event")

    def __init__(self) -> None:
        self.event: LoggedEvent | None = None
        self.args: list[Any] = []

    def __call__(self, event: LoggedEvent) -> list[Any]:
        if self.event is not event:
            self.event, self.args = event, [event.seq, *event.args]
        return self.args


_numbered = _Numbered()
