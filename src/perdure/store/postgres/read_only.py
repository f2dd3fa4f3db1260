"""A read-only PostgreSQL store (``perdure check``, see read_only.py): reads through a
pool whose every session is ``default_transaction_read_only``, with no writer and no
migration."""

from __future__ import annotations

from perdure.store.postgres.store import Connection, PostgresStore

__all__ = ["read_only_postgres"]


class _ReadOnlyPostgres(PostgresStore):
    """Only the read pool of a :class:`PostgresStore`; the server refuses any write."""

    async def open(self) -> None:
        self._pool = await self._open_pool("perdure-check")

    async def _configure(self, conn: Connection) -> None:
        await super()._configure(conn)
        await conn.execute("SET default_transaction_read_only = on")


def read_only_postgres(store: PostgresStore) -> PostgresStore:
    """A read-only twin of ``store`` (same database, schema and timeouts), not opened."""
    return _ReadOnlyPostgres(
        store.url,
        schema=store.schema,
        pool_min=1,
        pool_max=2,
        connect_timeout=store.connect_timeout,
        store_timeout=store.store_timeout,
    )
