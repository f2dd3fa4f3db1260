"""``c.db``: the API of an actor's SQL database (docs/storage.md).

``await c.db.execute(sql, *params)`` runs one statement (or several, separated by
``;``) and returns its rows as dicts by column name. Parameters are positional (``?``)
or, given as one mapping, named (``:name``). ``c.db.transaction()`` holds the database
for a block (``async with c.db.transaction() as tx: await tx.execute(...)``), or runs a
function (``await c.db.transaction(fn)``, rivetkit's form): committed when the block
returns, rolled back when it raises; other statements of the actor wait until it ends.

Writes are durable with the actor's next commit (an action's, after it returns), in
the same transaction as its state and KV writes.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from types import TracebackType
from typing import Any

from perdure.errors import DbError
from perdure.runtime.kernel.db import ActorDb, Row

__all__ = ["Database", "Transaction"]


def _params(params: tuple[Any, ...]) -> Sequence[Any] | Mapping[str, Any]:
    if len(params) == 1 and isinstance(params[0], Mapping):
        return params[0]  # named parameters (:name)
    return params


class Database:
    """An actor's SQL database (see the module docstring)."""

    __slots__ = ("_db",)

    def __init__(self, db: ActorDb) -> None:
        self._db = db

    async def execute(self, sql: str, *params: Any) -> list[Row]:
        """Run ``sql`` with ``params``; its rows, as dicts by column name."""
        return await self._db.execute(sql, _params(params))

    def transaction(
        self, fn: Callable[[Transaction], Any] | None = None, *, timeout: float | None = None
    ) -> Transaction:
        """A transaction: ``async with c.db.transaction() as tx``, or ``await
        c.db.transaction(fn)`` (``fn(tx)``, sync or async, returns the result; with
        ``timeout`` seconds, a transaction still open then is rolled back and fails)."""
        return Transaction(self._db, fn, timeout)


class Transaction:
    """One transaction of the actor's database (``tx``): its ``execute`` runs inside
    it; usable only while it is open (``db.transaction`` after)."""

    __slots__ = ("_db", "_fn", "_state", "_timeout")

    def __init__(
        self, db: ActorDb, fn: Callable[[Transaction], Any] | None, timeout: float | None
    ) -> None:
        self._db = db
        self._fn = fn
        self._timeout = timeout
        self._state = "new"  # open, then committed, rolled back or expired

    async def execute(self, sql: str, *params: Any) -> list[Row]:
        """Run ``sql`` inside this transaction."""
        if self._state != "open":
            ended = "has not begun" if self._state == "new" else f"was already {self._state}"
            raise DbError(
                f"This transaction {ended}: run its statements inside its block.",
                code="transaction",
            )
        return await self._db.execute_in(sql, _params(params))

    def transaction(self, fn: Callable[[Transaction], Any] | None = None) -> Transaction:
        """Transactions do not nest (``db.transaction``); use a SAVEPOINT statement."""
        raise DbError("Transactions do not nest: use SAVEPOINT inside one.", code="transaction")

    async def __aenter__(self) -> Transaction:
        if self._state != "new":
            raise DbError("A transaction is entered once.", code="transaction")
        await self._db.begin()
        self._state = "open"
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._state == "open":
            self._state = "committed" if error is None else "rolled back"
        await self._db.end(commit=error is None)

    def __await__(self) -> Generator[Any, None, Any]:
        return self._run().__await__()

    async def _run(self) -> Any:
        fn = self._fn
        if fn is None:
            raise DbError(
                "Await c.db.transaction(fn), or use `async with c.db.transaction() as tx`.",
                code="transaction",
            )
        async with self as tx:
            result = fn(tx)
            if inspect.isawaitable(result):
                try:
                    async with asyncio.timeout(self._timeout):
                        result = await _awaited(result)
                except TimeoutError:
                    self._state = "expired"
                    raise DbError(
                        f"The transaction expired after {self._timeout:g} s and was rolled back.",
                        code="transaction",
                    ) from None
        return result


async def _awaited(result: Awaitable[Any]) -> Any:
    return await result
