"""Pieces every backend shares: the closed-store error, the contract's error messages,
settling the futures of written operations, lease arithmetic and node records."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from perdure.errors import ActorNotFound, InvalidRequest
from perdure.store.base import ActorRecord, Lease, NodeRecord, QueueMessageRecord

__all__ = [
    "WrittenOp",
    "actor_id_taken",
    "actor_missing",
    "check_ttl",
    "first_error",
    "lease_from_rows",
    "lease_is_live",
    "message_row",
    "new_node",
    "node_from_row",
    "normalize_record",
    "settle_ops",
    "wall_clock_ms",
]


def actor_missing(actor_id: str) -> ActorNotFound:
    """The error of a write to an actor that does not exist."""
    return ActorNotFound(
        f"Actor `{actor_id}` does not exist, was destroyed, or was claimed by a newer instance."
    )


def actor_id_taken(actor_id: str) -> InvalidRequest:
    """The error of creating an actor whose id is already used."""
    return InvalidRequest(f"Actor id `{actor_id}` is already taken.", code="duplicate_actor_id")


def normalize_record(record: ActorRecord) -> ActorRecord:
    """``record`` with an immutable key and byte values, as every backend returns it.

    Callers sometimes pass a list as key or a ``bytearray``; storing those as given would
    let a later mutation by the caller change stored data (in memory) or differ from what
    a database hands back.
    """
    key = tuple(record.key)
    input_ = None if record.input is None else bytes(record.input)
    state = None if record.state is None else bytes(record.state)
    if key == record.key and input_ is record.input and state is record.state:
        return record
    return dataclasses.replace(record, key=key, input=input_, state=state)


class WrittenOp(Protocol):
    """A write operation whose outcome is known: ``error`` if it failed, else ``result``."""

    future: asyncio.Future[Any]
    result: Any
    error: BaseException | None


def first_error(ops: Iterable[WrittenOp]) -> BaseException | None:
    """The first failure among written operations (what a batch's span ends with)."""
    for op in ops:
        if op.error is not None:
            return op.error
    return None


def settle_ops(ops: Iterable[WrittenOp]) -> None:
    """Hand each operation's outcome to its caller (on the caller's event loop thread)."""
    for op in ops:
        future = op.future
        if future.done():
            continue  # the caller was cancelled; the write happened anyway
        if op.error is not None:
            future.set_exception(op.error)
        else:
            future.set_result(op.result)


def wall_clock_ms() -> int:
    """Now, in epoch milliseconds: the lease clock of the memory and SQLite stores."""
    return time.time_ns() // 1_000_000


def check_ttl(ttl_ms: int) -> None:
    """A lease (or a node's heartbeat) lasts a positive number of milliseconds."""
    if ttl_ms <= 0:
        raise ValueError(f"ttl_ms must be positive, not {ttl_ms}")


def lease_is_live(
    owner_node: str | None,
    expires_at: int | None,
    now: int,
    *,
    node_expires_at: int | None = None,
) -> bool:
    """Whether a stored lease keeps other nodes out at ``now``: its own expiry has not
    passed, or its node (registered until ``node_expires_at``) heartbeats. The SQL
    backends say the same in their statements."""
    if owner_node is None:
        return False
    if expires_at is not None and expires_at > now:
        return True
    return node_expires_at is not None and node_expires_at > now


def lease_from_rows(actor_id: str, rows: list[Any]) -> Lease | None:
    """The lease of a ``SELECT generation, owner_node, lease_expires_at`` read (rows of an
    actor that has an owner), or ``None`` when it found none."""
    if not rows:
        return None
    generation, owner, expires_at = rows[0]
    return Lease(actor_id, owner, generation, expires_at)


def new_node(
    node_id: str, address: str, ttl_ms: int, now: int, code_version: str | None = None
) -> NodeRecord:
    """The record of a node (re)registered at ``now`` (memory and SQLite)."""
    check_ttl(ttl_ms)
    return NodeRecord(node_id, address, now, now, now + ttl_ms, code_version=code_version)


def node_from_row(row: Sequence[Any]) -> NodeRecord:
    """The record of a row ``node_id, address, started_at, heartbeat_at, expires_at,
    draining`` (an integer on SQLite), ``code_version``, optionally followed by the count
    of actors."""
    node_id, address, started_at, heartbeat_at, expires_at, draining, version = row[:7]
    actors = row[7] if len(row) > 7 else 0
    return NodeRecord(
        node_id, address, started_at, heartbeat_at, expires_at, bool(draining), actors, version
    )


def message_row(message: QueueMessageRecord) -> tuple[Any, ...]:
    """A queue message's columns after ``actor_id``, in the SQL backends' order (the
    order :class:`QueueMessageRecord` takes them back in)."""
    return (
        message.id,
        message.name,
        bytes(message.body),
        message.created_at,
        message.trace,
        message.attempts,
        message.visible_at,
        message.dead_at,
        message.error,
    )
