"""The PostgreSQL backend (needs ``perdure[postgres]``): :class:`PostgresStore`
(:mod:`.store`) over writer connections (:mod:`.writer`, routed per actor by
:mod:`.writer_routing`) that apply commits (:mod:`.ops`, merged by :mod:`.merge`), with
leases (:mod:`.lease`), nodes (:mod:`.nodes`), wake-up notifications (:mod:`.listen`),
outage handling (:mod:`.outage`), the schema (:mod:`.schema`, :mod:`.sql`) and the
read-only twin of ``perdure check`` (:mod:`.read_only`).

``PostgresStore`` is loaded on first use, so importing this package (as the store face
does for type hints) does not import psycopg.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perdure.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]


def __getattr__(name: str) -> Any:
    if name == "PostgresStore":
        from perdure.store.postgres.store import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
