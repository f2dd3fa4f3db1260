"""The SQLite backend: :class:`SQLiteStore` (:mod:`.store`) over one writer thread
(:mod:`.writer`) that applies commits (:mod:`.ops`) in group transactions, with the
data-directory lock (:mod:`.lock`), leases (:mod:`.lease`), nodes (:mod:`.nodes`) and
WAL checkpoints (:mod:`.checkpoint`)."""

from __future__ import annotations

from perdure.store.sqlite.store import SQLiteStore

__all__ = ["SQLiteStore"]
