"""The file of an actor's SQL database (``c.db``): SQLite pages kept as KV records.

SQLite reads and writes its database file through a VFS; perdure registers one
(:data:`VFS_NAME`, through apsw) whose files are not on disk: each is a
:class:`PageFile`, a sequence of :data:`PAGE_SIZE`-byte pages, page ``n`` being the
actor's KV record :func:`page_key` ``(n)`` (tag :data:`~perdure.store.kv.DB_PAGE_TAG`).
So the database is in the store with the rest of the actor, moves with it to another
node, and its writes go out in the actor's commits (docs/DESIGN.md, "An actor's SQL
database").

SQLite calls the file from the thread that runs a statement (``runtime/kernel/db.py``:
the event loop's, or a worker's). A write lands in :attr:`PageFile.dirty` (what the
file holds that the KV space does not have yet); the runtime takes those pages
(:meth:`PageFile.take_dirty`) once the connection is out of any transaction and stages
them as KV puts. A read looks in the dirty pages, then in a small cache of pages read
before, then asks the KV space (the store, through the actor's overlay of writes in
flight) for its page, or for a run of pages when SQLite reads forward. SQLite keeps its
own page cache besides (locking mode ``EXCLUSIVE``), so a warm database reads nothing.

Journals are never files: the connection runs with ``journal_mode=MEMORY`` and
``temp_store=MEMORY``, and this VFS refuses to open anything but a main database, so
``VACUUM INTO`` or a stray journal cannot write beside the node.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import apsw

from perdure.store.kv import DB_PAGE_TAG

__all__ = [
    "PAGES_END",
    "PAGE_SIZE",
    "READ_AHEAD",
    "VFS_NAME",
    "PageFile",
    "PageReader",
    "page_key",
    "page_number",
    "register_file",
    "unregister_file",
]

PAGE_SIZE = 2048
VFS_NAME = "perdure-pages"
# A read of a page not held asks for this many pages from it on (one trip to the event
# loop and one store read, not one per page, for a scan), kept in a cache of as many.
READ_AHEAD = 16
_CACHED_PAGES = 64  # also bounds the pages preloaded at open
# The smallest key past every page key (the end of a range over all of them).
PAGES_END = bytes([DB_PAGE_TAG[0] + 1])

PageReader = Callable[[int, int], dict[int, bytes]]
"""Reads pages ``[first, first + count)`` from the KV space (blocking, on the thread
that runs the statement); returns those that exist."""


def page_key(number: int) -> bytes:
    """The KV key of page ``number`` (0-based): the tag and 4 big-endian bytes."""
    return DB_PAGE_TAG + number.to_bytes(4, "big")


def page_number(key: bytes) -> int:
    """The page number of a page key (the inverse of :func:`page_key`)."""
    return int.from_bytes(key[len(DB_PAGE_TAG) :], "big")


class PageFile:
    """One actor's database file as SQLite sees it (see the module docstring).

    ``page_count`` is the file's size in pages as stored when it was opened;
    ``preloaded``, pages read with it (they start the cache).
    """

    def __init__(
        self, read: PageReader, page_count: int, preloaded: dict[int, bytes] | None = None
    ) -> None:
        self._read = read
        self.page_count = page_count
        self.dirty: dict[int, bytes] = {}
        self._truncated_at: int | None = None
        self._cache: dict[int, bytes] = dict(preloaded or {})
        self._last_miss = -2

    # ---------------------------------------------------------- the runtime's side

    def take_dirty(self) -> tuple[int | None, dict[int, bytes]]:
        """The pages written since the last take and the page count it was truncated
        to, if it was (the runtime stages them in the actor's commit); the file keeps
        them readable in its cache."""
        truncated, pages = self._truncated_at, self.dirty
        self._truncated_at, self.dirty = None, {}
        cache = self._cache
        for number, data in pages.items():
            if number in cache:
                cache[number] = data
        return truncated, pages

    # ------------------------------------------------------------- SQLite's side

    def xRead(self, amount: int, offset: int) -> bytes:  # noqa: N802 (apsw's names)
        out = bytearray()
        while len(out) < amount:
            number, within = divmod(offset + len(out), PAGE_SIZE)
            if number >= self.page_count:
                break  # past the end: apsw fills the rest with zeros (a short read)
            page = self._page(number)
            out += page[within : within + amount - len(out)]
        return bytes(out)

    def _page(self, number: int) -> bytes:
        page = self.dirty.get(number)
        if page is None:
            page = self._cache.get(number)
        if page is None:
            # Read ahead when SQLite reads forward (a scan, which may skip the pages it
            # does not need), not for a lone page (a B-tree descent jumps about).
            ahead = READ_AHEAD if 0 < number - self._last_miss <= READ_AHEAD else 1
            self._last_miss = number
            found = self._read(number, min(ahead, self.page_count - number))
            cache = self._cache
            for at, data in found.items():
                if at not in self.dirty:
                    cache[at] = data
            while len(cache) > _CACHED_PAGES:
                del cache[next(iter(cache))]  # the oldest read
            page = found.get(number, bytes(PAGE_SIZE))
        return page

    def xWrite(self, data: bytes, offset: int) -> None:  # noqa: N802
        number, within = divmod(offset, PAGE_SIZE)
        if within or len(data) != PAGE_SIZE:
            # SQLite writes whole pages of the database; the page size is fixed.
            raise apsw.IOError(f"unaligned write of {len(data)} bytes at {offset}")
        self.dirty[number] = bytes(data)
        self._cache.pop(number, None)
        self.page_count = max(self.page_count, number + 1)

    def xTruncate(self, newsize: int) -> None:  # noqa: N802
        count = -(-newsize // PAGE_SIZE)
        if count >= self.page_count:
            return
        self.dirty = {n: page for n, page in self.dirty.items() if n < count}
        self._cache = {n: page for n, page in self._cache.items() if n < count}
        if self._truncated_at is None or count < self._truncated_at:
            self._truncated_at = count
        self.page_count = count

    def xFileSize(self) -> int:  # noqa: N802
        return self.page_count * PAGE_SIZE

    def xSync(self, flags: int) -> None:  # noqa: N802
        """Nothing to sync: durability is the actor's commit."""

    def xLock(self, level: int) -> None:  # noqa: N802
        """One connection per file: nothing to lock against."""

    def xUnlock(self, level: int) -> None:  # noqa: N802
        """See :meth:`xLock`."""

    def xCheckReservedLock(self) -> bool:  # noqa: N802
        return False

    def xFileControl(self, op: int, ptr: int) -> bool:  # noqa: N802
        return False  # SQLITE_NOTFOUND: no file control is understood

    def xSectorSize(self) -> int:  # noqa: N802
        return PAGE_SIZE

    def xDeviceCharacteristics(self) -> int:  # noqa: N802
        # Pages are replaced whole, and a write is never seen half done.
        return int(apsw.SQLITE_IOCAP_ATOMIC4K | apsw.SQLITE_IOCAP_SAFE_APPEND)

    def xClose(self) -> None:  # noqa: N802
        """Nothing to release: the pages belong to the actor's KV space."""


_files: dict[str, PageFile] = {}
_files_lock = threading.Lock()


def register_file(name: str, file: PageFile) -> None:
    """Make ``file`` what the VFS opens under ``name`` (one per live actor)."""
    _ensure_vfs()
    with _files_lock:
        _files[name] = file


def unregister_file(name: str) -> None:
    """Forget the file named ``name`` (the actor's connection is closed)."""
    with _files_lock:
        _files.pop(name, None)


class _PagesVfs(apsw.VFS):
    """The VFS whose files are :class:`PageFile` objects, found by name."""

    def __init__(self) -> None:
        super().__init__(VFS_NAME, base="")

    def xOpen(self, name: Any, flags: list[int]) -> Any:  # noqa: N802 (a PageFile)
        filename = name.filename() if isinstance(name, apsw.URIFilename) else name
        with _files_lock:
            file = _files.get(filename) if isinstance(filename, str) else None
        if file is None or not flags[0] & apsw.SQLITE_OPEN_MAIN_DB:
            # Only an actor's own main database: no journal, temp or other file.
            raise apsw.CantOpenError(f"{VFS_NAME} opens actor databases only")
        flags[1] = flags[0]
        return file

    def xAccess(self, pathname: str, flags: int) -> bool:  # noqa: N802
        return False  # no journal or WAL file ever exists

    def xDelete(self, filename: str, syncdir: bool) -> None:  # noqa: N802
        """No file is ever deleted through this VFS."""

    def xFullPathname(self, name: str) -> str:  # noqa: N802
        return name


_vfs: _PagesVfs | None = None


def _ensure_vfs() -> None:
    global _vfs
    with _files_lock:
        if _vfs is None:
            _vfs = _PagesVfs()
