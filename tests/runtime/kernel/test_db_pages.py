"""c.db's file by itself (runtime/kernel/db_pages.py) under a real SQLite connection:
what SQLite writes is held as dirty pages until taken, a truncation is reported as the
page count to delete from, a lone page miss reads one page and misses in order read
ahead, the VFS opens no journal or other file, and a store failure under a page read
surfaces as the store's own error with the database still usable after it."""

from __future__ import annotations

import itertools

import apsw
import pytest

from perdure.errors import DbError, StoreUnavailable
from perdure.runtime.kernel import db_pages
from perdure.runtime.kernel.db import _run
from perdure.runtime.kernel.db_pages import PAGE_SIZE, READ_AHEAD, PageFile

_names = itertools.count()
SETUP = ("locking_mode=EXCLUSIVE", "journal_mode=MEMORY", f"page_size={PAGE_SIZE}")


class Pages:
    """A store of pages, counting the reads asked of it; ``fail`` makes them fail."""

    def __init__(self) -> None:
        self.pages: dict[int, bytes] = {}
        self.reads: list[tuple[int, int]] = []
        self.fail = False

    def read(self, first: int, count: int) -> dict[int, bytes]:
        if self.fail:
            raise StoreUnavailable("the test's store", timeout=5.0)
        self.reads.append((first, count))
        return {n: self.pages[n] for n in range(first, first + count) if n in self.pages}


def _open(file: PageFile, *, cache_kib: int = 2000) -> apsw.Connection:
    name = f"test-{next(_names)}"
    db_pages.register_file(name, file)
    conn = apsw.Connection(name, vfs=db_pages.VFS_NAME)
    for pragma in (*SETUP, f"cache_size=-{cache_kib}"):
        conn.execute(f"PRAGMA {pragma}").fetchall()
    return conn


@pytest.fixture
def stored() -> Pages:
    """A store holding a database of about 300 rows of 3,000 bytes (~450 pages)."""
    pages = Pages()
    file = PageFile(pages.read, 0)
    conn = _open(file)
    _run(conn, "CREATE TABLE t (x BLOB)", ())
    _run(
        conn,
        "WITH RECURSIVE s(v) AS (SELECT 1 UNION ALL SELECT v + 1 FROM s WHERE v < 300) "
        "INSERT INTO t SELECT randomblob(3000) FROM s",
        (),
    )
    truncated, dirty = file.take_dirty()
    assert truncated is None
    assert file.dirty == {}
    pages.pages.update(dirty)
    conn.close()
    return pages


def test_written_pages_wait_to_be_taken_and_a_truncation_is_reported(stored: Pages) -> None:
    count = len(stored.pages)
    assert count > 400
    file = PageFile(stored.read, count)
    conn = _open(file)
    _run(conn, "DELETE FROM t WHERE rowid > 10", ())
    truncated, dirty = file.take_dirty()
    assert truncated is None  # no auto_vacuum here: the freed pages stay in the file
    assert dirty
    assert all(len(page) == PAGE_SIZE for page in dirty.values())
    _run(conn, "DELETE FROM t", ())
    _run(conn, "VACUUM", ())  # (perdure's authorizer refuses it; the VFS handles it)
    truncated, dirty = file.take_dirty()
    assert truncated is not None
    assert truncated < 10
    assert file.page_count == truncated
    assert max(dirty) < truncated


def test_a_lone_miss_reads_one_page_and_misses_in_order_read_ahead(stored: Pages) -> None:
    file = PageFile(stored.read, len(stored.pages))
    for number in (50, 51, 52, 80):
        assert file.xRead(PAGE_SIZE, number * PAGE_SIZE) == stored.pages[number]
    # 50 alone; 51 follows the last miss: a run ahead, which 52 then finds cached.
    assert stored.reads == [(50, 1), (51, READ_AHEAD), (80, 1)]
    file = PageFile(stored.read, len(stored.pages))
    conn = _open(file, cache_kib=64)
    stored.reads.clear()
    _run(conn, "SELECT sum(length(x)) FROM t", ())  # a scan: pages in order
    assert len(stored.reads) < len(stored.pages) / 4


def test_a_store_failure_under_a_read_is_the_stores_error_and_passes(stored: Pages) -> None:
    file = PageFile(stored.read, len(stored.pages))
    conn = _open(file, cache_kib=64)
    stored.fail = True
    with pytest.raises(StoreUnavailable):
        _run(conn, "SELECT count(*) AS n FROM t", ())
    stored.fail = False
    assert _run(conn, "SELECT count(*) AS n FROM t", ()) == [{"n": 300}]


def test_the_vfs_opens_no_file_but_an_actor_database(stored: Pages) -> None:
    file = PageFile(stored.read, len(stored.pages))
    conn = _open(file)
    with pytest.raises(apsw.CantOpenError):
        apsw.Connection("not-registered", vfs=db_pages.VFS_NAME).execute("SELECT 1")
    with pytest.raises(DbError, match="opens actor databases only"):
        _run(conn, "PRAGMA journal_mode=DELETE; CREATE TABLE u (y)", ())
