"""The SQL database of one live actor (``c.db``, docs/storage.md): SQLite over pages
kept in the actor's KV space, writes that ride in its commits.

One apsw connection per awake actor opens the actor's :class:`~perdure.runtime.kernel.
db_pages.PageFile` through perdure's VFS. Statements run one at a time, in the order
they were asked (an :class:`asyncio.Lock`, which is fair). SQLite's file calls are
synchronous: where the store reads without waiting (memory, SQLite:
``Store.reads_inline``) a statement runs on the event loop's thread and a page SQLite
has not cached is read from the store at once; elsewhere (PostgreSQL) it runs on a
worker thread, which reads a page by calling back into the event loop, free meanwhile.
When a statement returns and the connection is out of any transaction, the
pages it wrote are staged as KV puts (:meth:`ActorDb._stage`), so they are durable
with the actor's next commit, atomically with its state, queue and history, fenced
like them. Pages written inside a transaction stay in the file until it commits (a
rollback puts the old pages back), so no commit ever carries half of one.

Atomicity comes from the actor's commit, so SQLite keeps no journal file
(``journal_mode=MEMORY``: a statement or a transaction can still roll back) and holds
its lock for good (``locking_mode=EXCLUSIVE``: its page cache stays valid between
statements). An authorizer keeps statements inside the actor: no ``ATTACH``, no
extension, no pragma that changes how the database is kept (:func:`authorize`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import apsw

from perdure.errors import DbError
from perdure.runtime.kernel.db_pages import (
    PAGE_SIZE,
    PAGES_END,
    VFS_NAME,
    PageFile,
    page_key,
    page_number,
    register_file,
    unregister_file,
)
from perdure.store.kv import DB_PAGE_TAG

if TYPE_CHECKING:
    from perdure.definition import DatabaseSpec
    from perdure.runtime.kernel.kv import ActorKv

__all__ = ["MAX_ROWS", "ActorDb", "Row", "authorize"]

T = TypeVar("T")
Row = dict[str, Any]

# One statement returns at most this many rows (``db.too_many_rows``): every buffer is
# bounded; page through larger results with LIMIT.
MAX_ROWS = 100_000
# How long a worker waits for a page from the store before the statement fails (the
# store's own timeout, 5 s by default, usually answers first).
_READ_TIMEOUT = 60.0
_WORKERS = 4
# SQLite's page cache per open database, in KiB (filled as pages are read, so a small
# database takes what it has): rivetkit's default. A page it does not hold costs a
# trip to the event loop and a store read (bench/README.md, "An actor's SQL database").
_CACHE_KIB = 8192
# Read with the last page at open, in the same store read: the schema and the top of
# the B-trees, which the first statements after a wake need.
_PRELOAD_PAGES = 32
_executor: concurrent.futures.ThreadPoolExecutor | None = None


def _threads() -> concurrent.futures.ThreadPoolExecutor:
    # Threads of their own: a worker blocks while the loop reads its page, and must not
    # hold a thread the loop itself might need (asyncio's default executor).
    global _executor
    if _executor is None:
        _executor = concurrent.futures.ThreadPoolExecutor(_WORKERS, thread_name_prefix="perdure-db")
    return _executor


class ActorDb:
    """A live actor's SQL database (see the module docstring). ``open`` before use,
    ``close`` when the actor stops."""

    __slots__ = (
        "_closed",
        "_conn",
        "_file",
        "_inline",
        "_kv",
        "_lock",
        "_loop",
        "_name",
        "_running",
        "_spec",
        "_tx",
    )

    def __init__(self, kv: ActorKv, spec: DatabaseSpec, *, inline: bool) -> None:
        self._kv = kv
        self._spec = spec
        # The store reads without waiting (memory, SQLite): statements run on the loop's
        # thread and read pages straight from it; else on a worker (module docstring).
        self._inline = inline
        self._name = f"actor-{uuid.uuid4().hex}"
        self._lock = asyncio.Lock()
        self._conn: apsw.Connection | None = None
        self._file: PageFile | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._running: asyncio.Future[Any] | None = None  # the worker's statement
        # The task whose transaction holds the lock (c.db.execute from it would wait on
        # itself for ever: refused instead).
        self._tx: asyncio.Task[Any] | None = None

    @property
    def spec(self) -> DatabaseSpec:
        """The actor's ``db(...)``."""
        return self._spec

    async def open(self) -> None:
        """Open the connection on the pages stored (none: a new, empty database)."""
        self._loop = asyncio.get_running_loop()
        last = await self._kv.scan(DB_PAGE_TAG, PAGES_END, True, 1)
        count = page_number(last[0][0]) + 1 if last else 0
        first = await self._fetch(0, min(count, _PRELOAD_PAGES)) if count else {}
        reader = self._read_inline if self._inline else self._read_pages
        self._file = PageFile(reader, count, first)
        register_file(self._name, self._file)
        try:
            async with self._lock:
                self._conn = await self._call(self._connect)
        except BaseException:
            unregister_file(self._name)
            raise

    def _connect(self) -> apsw.Connection:
        flags = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
        conn = apsw.Connection(self._name, flags=flags, vfs=VFS_NAME)
        try:
            conn.limit(apsw.SQLITE_LIMIT_ATTACHED, 0)
            conn.config(apsw.SQLITE_DBCONFIG_DEFENSIVE, 1)
            conn.config(apsw.SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0)
            conn.config(apsw.SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0)
            for pragma in (
                "locking_mode=EXCLUSIVE",
                "journal_mode=MEMORY",  # before anything writes: no journal file
                "temp_store=MEMORY",
                f"page_size={PAGE_SIZE}",
                # A new database frees pages with `PRAGMA incremental_vacuum` (VACUUM
                # would attach a scratch database, which the authorizer refuses).
                "auto_vacuum=INCREMENTAL",
                f"max_page_count={max(1, self._spec.max_size // PAGE_SIZE)}",
                f"cache_size=-{_CACHE_KIB}",
            ):
                conn.execute(f"PRAGMA {pragma}").fetchall()
            conn.authorizer = authorize
        except BaseException:
            conn.close()
            raise
        return conn

    def _read_inline(self, first: int, count: int) -> dict[int, bytes]:
        """Pages ``[first, first + count)`` from a store that reads inline."""
        found = self._kv.get_inline([page_key(n) for n in range(first, first + count)])
        return {first + at: page for at, page in enumerate(found) if page is not None}

    def _read_pages(self, first: int, count: int) -> dict[int, bytes]:
        """Pages ``[first, first + count)`` from the KV space (on the worker thread)."""
        loop = self._loop
        assert loop is not None
        future = asyncio.run_coroutine_threadsafe(self._fetch(first, count), loop)
        return future.result(timeout=_READ_TIMEOUT)

    async def _fetch(self, first: int, count: int) -> dict[int, bytes]:
        if count == 1:  # a point read by key: cheaper than a range
            found = (await self._kv.get([page_key(first)]))[0]
            return {} if found is None else {first: found}
        rows = await self._kv.scan(page_key(first), page_key(first + count), False, None)
        return {page_number(key): value for key, value in rows}

    # ----------------------------------------------------------------- statements

    async def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> list[Row]:
        """Run ``sql`` (one or more statements) alone, after the statements asked
        before it; the rows it returns as dicts by column name."""
        if self._tx is not None and self._tx is asyncio.current_task():
            raise DbError(
                "c.db.execute inside c.db.transaction() would wait for the transaction "
                "to end: use the transaction's own execute (tx.execute).",
                code="transaction",
            )
        await self._lock.acquire()
        try:
            self._check_open()
            conn = self._conn
            assert conn is not None
            return await self._call(lambda: _run(conn, sql, params))
        finally:
            self._release_when_idle()

    async def execute_in(self, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> list[Row]:
        """Run ``sql`` inside the transaction that holds the lock (``tx.execute``)."""
        self._check_open()
        conn = self._conn
        assert conn is not None
        return await self._call(lambda: _run(conn, sql, params))

    async def begin(self) -> None:
        """Start a transaction: every other statement waits until :meth:`end`."""
        await self._lock.acquire()
        try:
            self._check_open()
            await self.execute_in("BEGIN", ())
        except BaseException:
            self._release_when_idle()
            raise
        self._tx = asyncio.current_task()

    async def end(self, commit: bool) -> None:
        """Commit (or roll back) the transaction :meth:`begin` started, and let the
        statements waiting run."""
        try:
            conn = self._conn
            if conn is not None and conn.in_transaction:
                await self.execute_in("COMMIT" if commit else "ROLLBACK", ())
            elif commit:
                raise DbError(
                    "The transaction ended before its commit (a statement rolled it back, "
                    "such as INSERT OR ROLLBACK).",
                    code="transaction",
                )
        finally:
            self._tx = None
            self._release_when_idle()

    def _check_open(self) -> None:
        if self._closed or self._conn is None:
            raise DbError(
                "The actor's database is closed: the actor has stopped (a timer or a task "
                "that outlived it?). Stop background work on c.abort_signal.",
                code="closed",
            )

    async def _call(self, work: Callable[[], T]) -> T:
        if self._inline:
            try:
                return work()
            finally:
                self._stage()
        loop = self._loop
        assert loop is not None
        future = self._running = loop.run_in_executor(_threads(), work)
        try:
            return await asyncio.shield(future)  # a cancelled caller does not stop SQLite
        finally:
            if future.done():
                # In the caller's own step, before its code goes on: the KV and state
                # writes it makes next, without an await, join the same commit.
                self._stage()
            else:
                future.add_done_callback(self._stage)

    def _release_when_idle(self) -> None:
        """Let the next statement run once the worker is done: a caller cancelled while
        its statement runs must not let another use the connection meanwhile."""
        running = self._running
        if running is None or running.done():
            self._lock.release()
        else:
            running.add_done_callback(lambda _: self._lock.release())

    def _stage(self, _: object = None) -> None:
        """Stage the pages written (with the next commit), unless a transaction is open."""
        conn, file = self._conn, self._file
        if file is None or (conn is not None and conn.in_transaction):
            return
        truncated, pages = file.take_dirty()
        kv = self._kv
        if truncated is not None:
            kv.delete_pages(page_key(truncated), PAGES_END)
        for number, data in pages.items():
            kv.put_page(page_key(number), data)

    # -------------------------------------------------------------------- closing

    async def close(self) -> None:
        """Close the connection (a transaction still open is rolled back, unwritten)."""
        if self._closed:
            return
        self._closed = True
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close(True)
            unregister_file(self._name)


def _run(conn: apsw.Connection, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> list[Row]:
    """Run ``sql`` (on the thread that runs statements); SQLite's refusals as ``DbError``."""
    rows: list[Row] = []
    cursor = conn.cursor()
    try:
        for row in cursor.execute(sql, params):
            if len(rows) >= MAX_ROWS:
                raise DbError(
                    f"A statement returns at most {MAX_ROWS} rows: page with LIMIT.",
                    code="too_many_rows",
                    metadata={"max": MAX_ROWS},
                )
            names = [column[0] for column in cursor.get_description()]
            rows.append(dict(zip(names, row, strict=True)))
    except apsw.FullError:
        raise DbError(
            "The actor's database is full: it has reached its db(max_size=...).",
            code="full",
        ) from None
    except (apsw.AuthError, apsw.SQLError) as exc:
        if isinstance(exc, apsw.SQLError) and not str(exc).startswith("not authorized"):
            raise DbError(str(exc), code="sql", metadata={"sqlite": "SQLError"}) from None
        raise DbError(
            f"Statement refused: {exc}. An actor's database allows no ATTACH, no "
            "extension and no pragma that changes how it is kept.",
            code="forbidden",
        ) from None
    except apsw.Error as exc:
        if isinstance(exc.__cause__, BaseException) and not isinstance(exc.__cause__, apsw.Error):
            raise exc.__cause__ from None  # the store failed under a page read
        raise DbError(str(exc), code="sql", metadata={"sqlite": type(exc).__name__}) from None
    except (TypeError, OverflowError) as exc:  # a parameter SQLite cannot bind
        raise DbError(str(exc), code="sql", metadata={"sqlite": type(exc).__name__}) from None
    finally:
        cursor.close()
    return rows


# Pragmas a statement may read, or call with an argument that names what to read.
_READ_PRAGMAS = frozenset(
    """
    application_id auto_vacuum cache_size collation_list compile_options data_version
    database_list encoding foreign_key_check foreign_key_list foreign_keys freelist_count
    function_list incremental_vacuum index_info index_list index_xinfo integrity_check
    journal_mode locking_mode max_page_count module_list page_count page_size pragma_list
    quick_check schema_version table_info table_list table_xinfo temp_store user_version
    """.split()  # noqa: SIM905
)
# Pragmas a statement may also set: they change how statements behave, not how or where
# the database is kept.
_SET_PRAGMAS = frozenset(
    """
    analysis_limit application_id automatic_index case_sensitive_like cell_size_check
    defer_foreign_keys foreign_keys ignore_check_constraints incremental_vacuum
    legacy_alter_table optimize recursive_triggers reverse_unordered_selects
    secure_delete user_version foreign_key_check foreign_key_list index_info index_list
    index_xinfo integrity_check quick_check table_info table_xinfo table_list
    """.split()  # noqa: SIM905
)
_DENIED_FUNCTIONS = frozenset({"load_extension", "fts3_tokenizer"})
_TEMP_OBJECTS = frozenset(
    {
        apsw.SQLITE_CREATE_TEMP_INDEX,
        apsw.SQLITE_CREATE_TEMP_TABLE,
        apsw.SQLITE_CREATE_TEMP_TRIGGER,
        apsw.SQLITE_CREATE_TEMP_VIEW,
    }
)


def authorize(
    action: int, first: str | None, second: str | None, database: str | None, _: str | None
) -> int:
    """SQLite's authorizer of every statement an actor runs (see the module docstring)."""
    if action in (apsw.SQLITE_ATTACH, apsw.SQLITE_DETACH):
        return int(apsw.SQLITE_DENY)
    if database not in (None, "main", "temp"):
        return int(apsw.SQLITE_DENY)
    if action in _TEMP_OBJECTS:
        return int(apsw.SQLITE_DENY)  # in memory, beyond the database's size limit
    if action == apsw.SQLITE_PRAGMA:
        name = (first or "").lower()
        allowed = _READ_PRAGMAS if second is None else _SET_PRAGMAS
        return int(apsw.SQLITE_OK if name in allowed else apsw.SQLITE_DENY)
    if action == apsw.SQLITE_FUNCTION and (second or "").lower() in _DENIED_FUNCTIONS:
        return int(apsw.SQLITE_DENY)
    return int(apsw.SQLITE_OK)
