"""A store opened read-only, so that the database itself refuses every write
(``perdure check``): SQLite ``query_only``, PostgreSQL ``default_transaction_read_only``.

The read-only variants live here, beside the stores whose insides they reuse.
"""

from __future__ import annotations

from perdure.errors import ReadOnlyUnavailable, StoreLocked
from perdure.store.base import Store
from perdure.store.sqlite.store import SQLiteStore
from perdure.store.sqlite.writer import connect

__all__ = ["ReadOnlyUnavailable", "open_read_only"]


class _ReadOnlySQLite(SQLiteStore):
    """A SQLite store with no writer: one connection that SQLite itself keeps from
    writing (``query_only``). With no server on the file, the data lock is held while
    the check reads (so none starts meanwhile) and the file is opened ``immutable``:
    not even the ``-wal``/``-shm`` files are created. Beside a running server it reads
    as that server's own readers do."""

    async def open(self) -> None:
        file = self.path.resolve()
        if not file.is_file():
            raise ReadOnlyUnavailable(f"no database at {file}")
        try:
            lock = self.lock()
        except StoreLocked:
            lock = None  # a server runs: read beside it
        wal = file.with_name(file.name + "-wal")
        unflushed = wal.exists() and wal.stat().st_size > 0
        mode = "immutable=1" if lock is not None and not unflushed else "mode=ro"
        try:
            reader = connect(f"{file.as_uri()}?{mode}", uri=True)
            reader.execute("PRAGMA query_only = ON").fetchall()
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        self._reader, self._lock = reader, lock


def open_read_only(store: Store) -> Store:
    """The same database as ``store`` (built, not opened), opened so that it refuses
    writes: SQLite ``query_only``; PostgreSQL ``default_transaction_read_only``."""
    if isinstance(store, SQLiteStore):
        return _ReadOnlySQLite(store.path, exclusive=False)
    from perdure.store.postgres.store import PostgresStore

    if isinstance(store, PostgresStore):
        from perdure.store.postgres.read_only import read_only_postgres

        return read_only_postgres(store)
    raise ReadOnlyUnavailable(
        f"{type(store).__name__} holds nothing between runs: check a SQLite or PostgreSQL store"
    )
