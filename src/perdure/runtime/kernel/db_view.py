"""A read-only look at an actor's SQL database as committed (the inspector, ``perdure
db``, ``env.db``; docs/inspector.md).

The live actor is not asked (nor woken): its pages are read from the store in one
``kv_list``, so the view is one consistent snapshot of what its commits made durable
(pages read one by one while the actor commits could mix two versions of the file).
The snapshot goes into a private in-memory SQLite (``deserialize``) opened for reading
only: ``PRAGMA query_only``, and an authorizer that allows reads, read pragmas and
functions, nothing else (``db.read_only``). Even a statement that got past both would
change a copy, never the actor's pages. A query stops at :data:`VIEW_MAX_ROWS` rows
(``db.too_many_rows``) and after :data:`VIEW_TIMEOUT` seconds (``db.timeout``, through
SQLite's progress handler), and carries at most :data:`ANSWER_MAX_BYTES` of text and
blobs (``db.too_large``), on a worker thread so the event loop goes on meanwhile.

Reading the whole file costs its size per request, so a database past
:data:`VIEW_MAX_BYTES` is not shown (``db.too_large``): query it from an action.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any

import apsw

from perdure.errors import DbError
from perdure.runtime.kernel.db import DENIED_FUNCTIONS, READ_PRAGMAS
from perdure.runtime.kernel.db_pages import PAGE_SIZE, PAGES_END, page_number
from perdure.store.base import Store
from perdure.store.kv import DB_PAGE_TAG

__all__ = [
    "ANSWER_MAX_BYTES",
    "VIEW_MAX_BYTES",
    "VIEW_MAX_ROWS",
    "VIEW_TIMEOUT",
    "DbRows",
    "db_query",
    "db_rows",
    "db_tables",
]

VIEW_MAX_ROWS = 1000
VIEW_TIMEOUT = 2.0
VIEW_MAX_BYTES = 64 * 1024 * 1024
# The text and blobs one answer carries, at most (and so any one value): every buffer is
# bounded, and `SELECT randomblob(1e9)` must not take a gigabyte.
ANSWER_MAX_BYTES = 16 * 1024 * 1024
# SQLite virtual-machine steps between two looks at the clock.
_PROGRESS_STEPS = 10_000
_NOT_READ = frozenset({"incremental_vacuum"})  # a "read" pragma that frees pages
# Read pragmas whose argument names what to read (the others' argument sets a value).
_NAMED_READS = frozenset(
    """
    foreign_key_check foreign_key_list index_info index_list index_xinfo integrity_check
    quick_check table_info table_list table_xinfo
    """.split()  # noqa: SIM905
)

DbRows = dict[str, Any]
"""``{"columns": [names], "rows": [[values]]}``: values as SQLite gives them."""


async def db_query(
    store: Store, actor_id: str, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()
) -> DbRows:
    """Run the read-only ``sql`` on the actor's committed database (see the module
    docstring). An actor without pages has an empty database."""
    image = await _snapshot(store, actor_id)
    return await asyncio.to_thread(_run_on, image, sql, params)


async def db_tables(store: Store, actor_id: str) -> list[dict[str, Any]]:
    """The actor's tables and views: ``name``, ``type``, ``sql`` (as created) and
    ``columns`` (``name``, ``type``, ``notnull``, ``default``, ``pk``)."""
    image = await _snapshot(store, actor_id)
    return await asyncio.to_thread(_tables_of, image)


async def db_rows(store: Store, actor_id: str, table: str, offset: int, limit: int) -> DbRows:
    """Rows ``[offset, offset + limit)`` of ``table`` in rowid order (a view: in its
    own order), with ``total`` (the table's row count); ``db.no_such_table`` for a name
    that is not one of its tables or views."""
    image = await _snapshot(store, actor_id)
    return await asyncio.to_thread(_rows_of, image, table, offset, limit)


async def _snapshot(store: Store, actor_id: str) -> bytes:
    last = await store.kv_list(actor_id, start=DB_PAGE_TAG, end=PAGES_END, reverse=True, limit=1)
    if not last:
        return b""
    count = page_number(last[0][0]) + 1
    if count * PAGE_SIZE > VIEW_MAX_BYTES:
        raise DbError(
            f"The actor's database is {count * PAGE_SIZE} bytes; the inspector reads at most "
            f"{VIEW_MAX_BYTES}: query it from one of its actions.",
            code="too_large",
            metadata={"max": VIEW_MAX_BYTES},
        )
    rows = await store.kv_list(actor_id, start=DB_PAGE_TAG, end=PAGES_END)
    image = bytearray(len(rows) and (page_number(rows[-1][0]) + 1) * PAGE_SIZE)
    for key, page in rows:  # a page never written reads as zeros, as in the actor's file
        at = page_number(key) * PAGE_SIZE
        image[at : at + len(page)] = page
    return bytes(image)


def _open(image: bytes) -> apsw.Connection:
    conn = apsw.Connection(":memory:")
    conn.limit(apsw.SQLITE_LIMIT_ATTACHED, 0)
    conn.limit(apsw.SQLITE_LIMIT_LENGTH, ANSWER_MAX_BYTES)
    conn.config(apsw.SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0)
    conn.config(apsw.SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0)
    if image:
        conn.deserialize("main", image)
    conn.execute("PRAGMA query_only=ON").fetchall()
    conn.authorizer = _authorize_read
    deadline = time.monotonic() + VIEW_TIMEOUT
    conn.set_progress_handler(lambda: time.monotonic() > deadline, _PROGRESS_STEPS)
    return conn


def _authorize_read(
    action: int, first: str | None, second: str | None, database: str | None, _: str | None
) -> int:
    """Reads only: SELECT, the columns it reads, functions, and pragmas that read."""
    if action in (apsw.SQLITE_SELECT, apsw.SQLITE_READ, apsw.SQLITE_RECURSIVE):
        return int(apsw.SQLITE_OK)
    if action == apsw.SQLITE_FUNCTION:
        denied = (second or "").lower() in DENIED_FUNCTIONS
        return int(apsw.SQLITE_DENY if denied else apsw.SQLITE_OK)
    if action == apsw.SQLITE_PRAGMA:
        name = (first or "").lower()
        if second is not None:
            return int(apsw.SQLITE_OK if name in _NAMED_READS else apsw.SQLITE_DENY)
        readable = name in READ_PRAGMAS and name not in _NOT_READ
        return int(apsw.SQLITE_OK if readable else apsw.SQLITE_DENY)
    return int(apsw.SQLITE_DENY)


def _run_on(image: bytes, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> DbRows:
    conn = _open(image)
    try:
        return _select(conn, sql, params)
    finally:
        conn.close()


def _select(conn: apsw.Connection, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> DbRows:
    rows: list[list[Any]] = []
    columns: list[str] = []
    size = 0
    cursor = conn.cursor()
    try:
        for row in cursor.execute(sql, params):
            size += sum(len(value) for value in row if isinstance(value, (str, bytes)))
            if size > ANSWER_MAX_BYTES:
                raise DbError(
                    f"The answer holds more than {ANSWER_MAX_BYTES} bytes of text and blobs: "
                    "select fewer rows or columns (substr() shows a part of a value).",
                    code="too_large",
                    metadata={"max": ANSWER_MAX_BYTES},
                )
            if len(rows) >= VIEW_MAX_ROWS:
                raise DbError(
                    f"A query of the inspector returns at most {VIEW_MAX_ROWS} rows: "
                    "page with LIMIT and OFFSET.",
                    code="too_many_rows",
                    metadata={"max": VIEW_MAX_ROWS},
                )
            if not columns:
                columns = [column[0] for column in cursor.get_description()]
            rows.append(list(row))
    except apsw.InterruptError:
        raise DbError(
            f"The query ran past {VIEW_TIMEOUT} s and was stopped.",
            code="timeout",
            metadata={"seconds": VIEW_TIMEOUT},
        ) from None
    except (apsw.AuthError, apsw.ReadOnlyError) as exc:
        raise _read_only(exc) from None
    except apsw.SQLError as exc:
        if str(exc).startswith("not authorized"):
            raise _read_only(exc) from None
        raise DbError(str(exc), code="sql", metadata={"sqlite": "SQLError"}) from None
    except apsw.TooBigError:
        raise DbError(
            f"A value past {ANSWER_MAX_BYTES} bytes: the inspector shows smaller ones "
            "(substr() shows a part).",
            code="too_large",
            metadata={"max": ANSWER_MAX_BYTES},
        ) from None
    except (apsw.Error, TypeError, OverflowError) as exc:
        raise DbError(str(exc), code="sql", metadata={"sqlite": type(exc).__name__}) from None
    finally:
        cursor.close()
    return {"columns": columns, "rows": rows}


def _read_only(exc: Exception) -> DbError:
    return DbError(
        f"Statement refused: {exc}. The inspector's queries only read (SELECT, and "
        "pragmas that read).",
        code="read_only",
    )


_TABLES = (
    "SELECT name, type, sql FROM sqlite_schema WHERE type IN ('table', 'view') "
    "AND name NOT LIKE 'sqlite_%' ORDER BY name"
)
_COLUMNS = 'SELECT name, type, "notnull", dflt_value, pk FROM pragma_table_info(?)'


def _tables_of(image: bytes) -> list[dict[str, Any]]:
    conn = _open(image)
    try:
        tables = []
        for name, kind, sql in _select(conn, _TABLES, ())["rows"]:
            columns = [
                {"name": column, "type": type_, "notnull": bool(notnull), "default": default}
                | {"pk": pk}
                for column, type_, notnull, default, pk in _select(conn, _COLUMNS, (name,))["rows"]
            ]
            tables.append({"name": name, "type": kind, "sql": sql, "columns": columns})
        return tables
    finally:
        conn.close()


def _rows_of(image: bytes, table: str, offset: int, limit: int) -> DbRows:
    conn = _open(image)
    try:
        names = {row[0] for row in _select(conn, _TABLES, ())["rows"]}
        if table not in names:
            raise DbError(
                f"The actor's database has no table or view named {table!r}.",
                code="no_such_table",
            )
        quoted = '"' + table.replace('"', '""') + '"'
        total = _select(conn, f"SELECT count(*) FROM {quoted}", ())["rows"][0][0]
        page = _select(conn, f"SELECT * FROM {quoted} LIMIT ? OFFSET ?", (limit, offset))
        if not page["columns"]:
            page["columns"] = [c[0] for c in _select(conn, _COLUMNS, (table,))["rows"]]
        return page | {"total": total, "offset": offset}
    finally:
        conn.close()
