"""Retrying a request whose outcome is unknown (docs/clients.md, "Retries").

A send or an action call over HTTP whose answer is lost (the connection broke after the
request went out, no answer in time) may or may not have been applied. The clients send
every such request with an idempotency key (the caller's, or one made here when retrying
is on) and try it again with the same key a bounded number of times, so the server
applies it once and the caller gets its first answer. What counts as unknown, and the
pauses between tries, are decided here once for both clients; they only sleep.
"""

from __future__ import annotations

import random
import uuid

from perdure.client._errors import ActorError, ConnectionDisposed, TransportError
from perdure.handles import check_idempotency_key

__all__ = ["DEFAULT_RETRIES", "Retrying", "outcome_unknown", "request_key"]

DEFAULT_RETRIES = 3
"""Tries after the first, for a request whose outcome is unknown."""

FIRST_PAUSE = 0.25  # seconds before the first retry; doubles each time (with jitter)
LONGEST_PAUSE = 2.0

# A server (or a proxy in front of it) that answers these has not served the request
# now (actor.unavailable, actor.owner_unreachable, actor.owner_no_answer, actor.stopping,
# store.unavailable …, or a proxy's page): it is worth asking again shortly.
RETRY_STATUSES = frozenset({503})


def request_key(retries: int, key: str | None) -> str | None:
    """The idempotency key a keyable request carries: the caller's ``key`` (checked), a
    fresh one when retrying is on (so a retry is safe), else none."""
    if key is not None:
        return check_idempotency_key(key)
    return f"perdure-{uuid.uuid4().hex}" if retries > 0 else None


def check_retries(retries: int) -> int:
    """``retries`` if it is a count of retries (an ``int``, 0 or more)."""
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries must be a whole number, 0 or more, not {retries!r}.")
    return retries


def outcome_unknown(exc: BaseException) -> bool:
    """Whether ``exc`` leaves a request worth trying again: no answer came (a refused,
    broken or timed-out exchange), or a 503 (the server or its proxy could not serve
    it now). An answer (any other error) and a closed client are final."""
    if isinstance(exc, ConnectionDisposed):
        return False
    if isinstance(exc, ActorError):
        return exc.http_status in RETRY_STATUSES
    return isinstance(exc, TransportError) and exc.retryable


class Retrying:
    """The retries left to one request, and the pause before each."""

    __slots__ = ("_left", "_pause")

    def __init__(self, retries: int) -> None:
        self._left = retries
        self._pause = FIRST_PAUSE

    def pause(self, exc: BaseException) -> float | None:
        """Seconds to wait before trying again after ``exc``, or ``None``: raise it."""
        if self._left <= 0 or not outcome_unknown(exc):
            return None
        self._left -= 1
        pause = self._pause * random.uniform(0.5, 1.0)
        self._pause = min(self._pause * 2, LONGEST_PAUSE)
        return pause
