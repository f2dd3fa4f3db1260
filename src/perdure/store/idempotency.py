"""What the store keeps of an idempotency key (docs/idempotency.md).

A request with an idempotency key is applied at most once per key and actor: the key's
record is written in the same :class:`~perdure.store.base.ActorCommit` as the request's
effects (``key_put``), so a crash never leaves one without the other, and a retry reads
the first answer back (:meth:`~perdure.store.base.Store.load_idempotency`). The store
only persists: what a fingerprint or an answer holds, and when a record is too old to
count, are decided by the runtime (:mod:`perdure.runtime.actor.idempotency`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["IdempotencyRecord"]


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    """One applied request of an actor, by its key.

    ``fingerprint`` names the operation and its arguments (a retry with other ones is
    refused); ``created_at`` is epoch ms (the retention bound prunes by it); ``answer``
    is the encoded first answer, replayed to every retry.
    """

    key: str
    fingerprint: str
    created_at: int
    answer: bytes
