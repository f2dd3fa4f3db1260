"""Idempotency keys of one live actor: a keyed request is applied at most once per key
within the retention window, and every retry gets the first answer (docs/idempotency.md).

A keyed request first looks for a request with the same key that this instance is still
running, and waits for its answer; then for the key's record, and replays its answer;
only then does it run, with a :class:`Once` that writes the key's record into the commit
pipeline beside the request's effects, so one commit carries both: after a ``kill -9``
either both are durable or neither is. The key space is per actor; a key reused for
another operation or other arguments is refused (``idempotency.key_reused``).

The record is read from the store only if the actor's :class:`~.key_index.KeyIndex`
(its keys within the window, loaded by one range read at the instance's first keyed
request, then kept by the instance) says it may be there: a fresh key costs no read.

Answers are encoded maps: ``{"o": output}`` (an action's output), ``{"e": error}`` (the
error it raised, as its caller saw it), ``{"m": id, "s": status}`` (a send: the message it added),
``{"x": size}`` (an answer larger than :data:`MAX_ANSWER_SIZE`: applied, not kept).
Records older than ``idempotency_retention`` do not count, and a keyed commit prunes
them now and then (the first of an instance, then at most once a minute).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from perdure.errors import IdempotencyError, InternalError, PerdureError, RemoteError
from perdure.handles import MAX_IDEMPOTENCY_KEY_LENGTH as MAX_KEY_LENGTH
from perdure.handles import check_idempotency_key as check_key
from perdure.runtime.kernel.key_index import INDEX_LIMIT, KeyIndex
from perdure.schemas import to_plain
from perdure.store.base import IdempotencyRecord
from perdure.store.encoding import decode_value, encode_value

if TYPE_CHECKING:
    from perdure.runtime.kernel.core import ActorCore

__all__ = [
    "MAX_ANSWER_SIZE",
    "MAX_KEY_LENGTH",
    "IdempotencyKeys",
    "Once",
    "check_key",
    "fingerprint",
    "replay",
]

MAX_ANSWER_SIZE = 1_048_576  # encoded bytes; a larger answer is not kept for a retry
_PRUNE_EVERY_MS = 60_000


def fingerprint(*parts: Any) -> str:
    """What a retry must repeat: the operation, its name and its arguments, hashed.

    Stored with the key and compared by whichever node or version a retry reaches, so
    its format must not change: SHA-256 of the CBOR array of ``parts`` (a tuple encodes
    as the list it once was; model values as their plain form, by the encoder's hook),
    32 hex digits. SHA-256 is also the fastest of hashlib's here: 0.38 µs for a small
    send against blake2b's 0.33, and faster beyond 200 bytes (hardware SHA).
    """
    try:
        data = encode_value(parts)
    except Exception:
        data = repr(parts).encode()  # arguments only a process can hold (in-process calls)
    return hashlib.sha256(data).hexdigest()[:32]


def replay(answer: dict[str, Any]) -> Any:
    """The output of a kept answer, or raise the error it records."""
    if "e" in answer:
        raise RemoteError(answer["e"])
    if "x" in answer:
        raise IdempotencyError(
            "The request with this idempotency key was applied, but its answer "
            f"({answer['x']} bytes) was too large to keep for a retry.",
            code="answer_not_kept",
            metadata={"size": answer["x"]},
        )
    return answer.get("o")


def _error_fields(exc: BaseException) -> dict[str, Any]:
    """An error as its remote caller sees it (private errors become internal ones)."""
    if not (isinstance(exc, PerdureError) and exc.public):
        exc = InternalError()
    return {
        "group": exc.group,
        "code": exc.code,
        "message": exc.message,
        "metadata": exc.metadata,
        "status": exc.status,
    }


class _Running:
    """A keyed request this instance is running; ``future`` is made by the first retry
    that waits for it (most requests have none)."""

    __slots__ = ("fingerprint", "future")

    def __init__(self, fingerprint: str) -> None:
        self.fingerprint = fingerprint
        self.future: asyncio.Future[Any] | None = None


class Once:
    """Writes one keyed request's record into the next commit, beside its effects."""

    __slots__ = ("_fingerprint", "_index", "_key", "_keys", "raised", "staged")

    def __init__(self, keys: IdempotencyKeys, index: KeyIndex, key: str, fingerprint: str) -> None:
        self._keys = keys
        self._index = index  # told of the key as it is staged (or withdrawn)
        self._key = key
        self._fingerprint = fingerprint
        self.staged = False
        self.raised = False  # the answer staged is the error the action raised

    def answered(self, output: Any) -> None:
        """The action returned ``output``."""
        try:
            self._stage({"o": to_plain(output)})
        except PerdureError as exc:
            self.failed(exc)  # an output that cannot be encoded fails on the wire too

    def failed(self, error: BaseException) -> None:
        """The action raised ``error``."""
        try:
            self._stage({"e": _error_fields(error)})
        except PerdureError:  # metadata that cannot be encoded
            self._stage({"e": _error_fields(InternalError())})
        self.raised = True

    def enqueued(self, message_id: int, status: str) -> None:
        """The send is adding message ``message_id``; ``status``: what it answers when
        it does not wait (staged before the message: both join the same commit)."""
        self._stage({"m": message_id, "s": status})

    def withdraw(self) -> None:
        """The send was refused before it added its message: write no record."""
        self._keys.core.commits.drop_key(self._key)
        self._index.discard(self._key)
        self.staged = False

    def _stage(self, answer: dict[str, Any]) -> None:
        keys = self._keys
        data = encode_value(answer, what="idempotent answer")
        if len(data) > MAX_ANSWER_SIZE:
            data = encode_value({"x": len(data)})
        now = keys.core.clock.now_ms()
        record = IdempotencyRecord(self._key, self._fingerprint, now, data)
        keys.core.commits.put_key(record, keys.prune_bound(now))
        self._index.add(self._key, now)
        self.staged = True


# A keyed request's first run, given its Once; what replays a kept answer.
Run = Callable[["Once"], Awaitable[Any]]
Replayed = Callable[[dict[str, Any]], Awaitable[Any]]


class IdempotencyKeys:
    """The keyed requests of one live actor (see the module docstring)."""

    __slots__ = ("_index", "_loading", "_pruned_at", "_retention_ms", "_running", "core")

    # The keys the index holds at most (a class attribute: tests make it small).
    index_limit = INDEX_LIMIT

    def __init__(self, core: ActorCore) -> None:
        self.core = core
        self._running: dict[str, _Running] = {}
        self._pruned_at: int | None = None
        self._index: KeyIndex | None = None  # loaded by the first keyed request
        self._loading: asyncio.Lock | None = None
        self._retention_ms = int(core.options.idempotency_retention * 1000)

    def prune_bound(self, now: int) -> int | None:
        """The bound a keyed commit prunes with, if it is time to prune."""
        if self._pruned_at is not None and now - self._pruned_at < _PRUNE_EVERY_MS:
            return None
        self._pruned_at = now
        bound = now - self._retention_ms
        if self._index is not None:
            self._index.expire(bound)  # what the commit prunes leaves the index too
        return bound

    async def _load_index(self) -> KeyIndex:
        """The index, loaded once by the instance's first keyed request (the others
        wait; if that one fails or is cancelled, the next one loads)."""
        if self._loading is None:
            self._loading = asyncio.Lock()
        async with self._loading:
            index = self._index
            if index is None:
                core = self.core
                since = core.clock.now_ms() - self._retention_ms
                limit = self.index_limit
                # One more than the limit: whether the actor has more keys than fit.
                newest = await core.store.load_idempotency_keys(core.actor_id, since, limit + 1)
                index = self._index = KeyIndex(newest, since, limit)
                self._loading = None
            return index

    async def perform(self, key: str, fingerprint: str, run: Run, replayed: Replayed) -> Any:
        """Run the request keyed ``key`` (``run``, given the :class:`Once` that records
        it) unless it ran already: then wait for its answer, or give its kept answer
        to ``replayed``."""
        while (running := self._running.get(key)) is not None:
            _same(key, running.fingerprint, fingerprint)
            future = running.future
            if future is None:
                future = running.future = asyncio.get_running_loop().create_future()
            try:
                return await asyncio.shield(future)
            except asyncio.CancelledError:
                if not future.cancelled():
                    raise  # this caller was cancelled, not the first request
        running = self._running[key] = _Running(fingerprint)
        try:
            # The first run, inline (one coroutine fewer on every keyed request).
            core = self.core
            index = self._index
            if index is None:
                index = await self._load_index()
            bound = core.clock.now_ms() - self._retention_ms
            record = None
            if index.may_hold(key, bound):
                record = await core.store.load_idempotency(core.actor_id, key)
            if record is not None and record.created_at >= bound:
                _same(key, record.fingerprint, fingerprint)
                result = await replayed(decode_value(record.answer))
            else:
                once = Once(self, index, key, fingerprint)
                try:
                    result = await run(once)
                except BaseException as failure:
                    if once.staged:
                        # An action that raised answers before its flush: its record
                        # must be durable before a retry may look for it, and its error
                        # only counts as the first answer if it is. If that commit
                        # failed (the store, or in a cluster a newer owner's fence),
                        # nothing of the request was applied: the failure is the answer.
                        flushed = core.commits.request_flush()
                        (outcome,) = await asyncio.gather(flushed, return_exceptions=True)
                        cancelled = isinstance(failure, asyncio.CancelledError)
                        if once.raised and isinstance(outcome, Exception) and not cancelled:
                            raise outcome from failure
                    raise
        except asyncio.CancelledError:
            if running.future is not None:
                running.future.cancel()
            raise
        except BaseException as exc:
            if running.future is not None:
                running.future.set_exception(exc)
                running.future.exception()  # retrieved: the waiters may have gone
            raise
        else:
            if running.future is not None:
                running.future.set_result(result)
            return result
        finally:
            del self._running[key]


def _same(key: str, first: str, this: str) -> None:
    if first != this:
        raise IdempotencyError(
            f"The idempotency key `{key}` was first used for another operation or other "
            "arguments; use a new key for a new request.",
            code="key_reused",
            metadata={"key": key},
        )
