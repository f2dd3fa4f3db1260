"""Several PostgreSQL writers, each actor's writes always on the same one.

One writer (:mod:`perdure.store.postgres.writer`) has one transaction in flight at a
time: while the server executes a batch and flushes its WAL, the next batch only queues,
and the process waits. With several writers, each on its own connection, the batches of
different actors are in flight at once: the server executes them side by side and
flushes their commits to the WAL together, while this process builds the next ones.

An actor's writes all go to the writer its id maps to, so they keep their submission
order (the store contract) and a claim or a lease change is still ordered after the
actor's commits queued before it. Actors of different writers touch disjoint rows; the
one place two writers' transactions can meet is the unique name-and-key index, when two
actors are created with the same name and key at once (one waits for the other's
transaction, and gets "already exists").

The store uses one writer unless told otherwise (``PostgresStore(writers=N)``): measured
on a 2-core machine with the database on it, the process's Python, not the wait for the
server, limited 100 busy actors, and two writers did not raise their throughput.
"""

from __future__ import annotations

import asyncio

from perdure.store.postgres.ops import WriteOp
from perdure.store.postgres.writer import Connect, Connection, PostgresWriter
from perdure.telemetry import Observer

__all__ = ["PostgresWriters"]


class PostgresWriters:
    """``count`` writers; :meth:`submit` routes an op by its actor's id."""

    def __init__(self, connect: Connect, *, count: int, timeout: float) -> None:
        if count < 1:
            raise ValueError(f"need at least one writer, not {count}")
        self._writers = [PostgresWriter(connect, timeout=timeout) for _ in range(count)]

    @property
    def writers(self) -> tuple[PostgresWriter, ...]:
        """Every writer."""
        return tuple(self._writers)

    def set_observer(self, observer: Observer) -> None:
        """Tell every writer's batches to ``observer``."""
        for writer in self._writers:
            writer.observer = observer

    async def start(self, conn: Connection) -> None:
        """Start the first writer on ``conn``, the others on new connections."""
        started: list[PostgresWriter] = []
        try:
            for index, writer in enumerate(self._writers):
                await writer.start(conn if index == 0 else None)
                started.append(writer)
        except BaseException:
            if not started:
                await conn.close()
            await asyncio.gather(*(writer.stop() for writer in started))
            raise

    def writer_for(self, actor_id: str) -> PostgresWriter:
        """The writer of every write of ``actor_id``."""
        writers = self._writers
        # hash() of a str is stable within the process: all the routing needs.
        return writers[hash(actor_id) % len(writers)] if len(writers) > 1 else writers[0]

    def submit(self, op: WriteOp, actor_id: str) -> None:
        """Queue ``op`` on the writer of ``actor_id``."""
        self.writer_for(actor_id).submit(op)

    async def stop(self) -> None:
        """Write everything accepted so far on every writer, then close them."""
        results = await asyncio.gather(
            *(writer.stop() for writer in self._writers), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result
