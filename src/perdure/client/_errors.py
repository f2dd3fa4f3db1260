"""The errors a client raises.

- :class:`ActorError`: the server (or the actor) answered with an error body or frame
  ``{group, code, message, metadata, actor}``; ``except ActorError`` and look at
  ``group``/``code``.
- :class:`TransportError`: the request never got a protocol answer (server unreachable,
  connection lost, malformed reply). :class:`TransportTimeout` and
  :class:`ConnectionDisposed` are the two special cases callers usually tell apart.
"""

from __future__ import annotations

import re
from typing import Any

from perdure.errors import PerdureError
from perdure.protocol.messages import ActorInfo

__all__ = [
    "ActorError",
    "ConnectionDisposed",
    "TransportError",
    "TransportTimeout",
    "error_from_close",
]


class ActorError(PerdureError):
    """An error reported by the server: ``group``, ``code``, ``message``, ``metadata``.

    ``actor`` says which actor (id, generation, key) raised it when the server knows;
    ``http_status`` is the HTTP status of a failed request (``None`` over a connection).
    A ``UserError(message, code="x", metadata=m)`` raised by an action arrives as
    ``ActorError`` with ``group == "user"``, ``code == "x"``, ``metadata == m``.
    """

    def __init__(
        self,
        group: str,
        code: str,
        message: str,
        metadata: Any = None,
        actor: ActorInfo | None = None,
        *,
        http_status: int | None = None,
    ) -> None:
        super().__init__(message, code=code, metadata=metadata, group=group)
        self.actor = actor
        self.http_status = http_status

    def __str__(self) -> str:
        return f"{self.group}.{self.code}: {self.message}"

    def __repr__(self) -> str:
        return f"ActorError({self.group}.{self.code}: {self.message!r})"


class TransportError(ConnectionError):
    """The server could not be reached, the connection broke, or it answered with
    something that is not the protocol (a proxy's HTML error page, say).

    ``retryable``: the request got no answer (refused, broken or timed out) or a proxy's
    502/503/504, so a keyed request may be tried again (docs/clients.md, "Retries")."""

    def __init__(self, *args: object, retryable: bool = False) -> None:
        super().__init__(*args)
        self.retryable = retryable


class TransportTimeout(TransportError, TimeoutError):
    """A request or a wait for the connection ran out of time."""


class ConnectionDisposed(TransportError):
    """The connection (or the whole client) was disposed while this call was pending."""


# A close reason the server sets for a connection-level error: "group.code".
_ERROR_REASON = re.compile(r"^([a-z0-9_]+)\.([a-z0-9_.]+)$")


def error_from_close(code: int, reason: str) -> ActorError | None:
    """The :class:`ActorError` a server close frame carries, if any.

    The server closes with code 1011 (or 1007/1009 for frame problems) and the reason
    ``"{group}.{code}"`` after a connection-level error; a plain close carries no error.
    """
    if code == 1000 or not reason:
        return None
    match = _ERROR_REASON.match(reason)
    if match is None:
        return None
    group, err_code = match.groups()
    return ActorError(group, err_code, f"The server closed the connection: {reason}.")
