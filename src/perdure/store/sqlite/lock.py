"""One process per SQLite database: an OS advisory lock on a file beside it.

A SQLite database (the data directory of ``perdure serve``) is served by one process: a
second server on the same file would run the same actors twice (two alarm schedulers,
two live instances fencing each other out). So opening a :class:`~perdure.store.sqlite.store.
SQLiteStore` takes an exclusive ``flock`` on ``<database>.lock`` (``perdure.db.lock`` in
the data directory) and keeps it until the store closes, with the holder's pid, host,
command line and start time written in the file, so that the process refused can say
who holds it.

Why ``flock`` on a file of its own:

- the OS drops the lock when the process dies, ``kill -9`` included: a crashed holder
  never blocks a restart, and no stale-pid guessing is needed;
- ``flock`` belongs to the open file description, not the process (unlike ``fcntl``
  record locks, which any ``close()`` of the same file by the process would release,
  SQLite's own included), and it is independent of the locks SQLite takes on the
  database;
- the lock file is never deleted: deleting it would let a newcomer lock a new inode
  while an old holder still has the unlinked one.

Within one process the lock is shared: every store of the process on the same database
holds one reference to a single ``flock``, released with the last one. One process is
one deployment, and a second store on the file there is a reader or a test's second
look (the generation fencing of DESIGN §8 still applies between them). A store opened
with ``exclusive=False`` (``perdure actors``, which only reads) takes no lock at all.

Not on Windows (no ``flock``): there the lock is not taken.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from perdure.errors import StoreLocked

__all__ = ["DataLock", "acquire_data_lock", "lock_file_for"]

LOCK_SUFFIX = ".lock"
# How long a refused process waits for the holder's details to appear in the file: a
# holder writes them just after it has locked, so a refusal can land in between.
_HOLDER_WAIT = 1.0


def lock_file_for(database: Path) -> Path:
    """The lock file of a database: ``perdure.db`` -> ``perdure.db.lock``, beside it."""
    return database.with_name(database.name + LOCK_SUFFIX)


@dataclass(slots=True)
class _Held:
    """This process's lock on one database: the file descriptor and how many hold it."""

    fd: int
    count: int


_registry_lock = threading.Lock()  # stores may be opened from several threads' loops
_held: dict[str, _Held] = {}  # real path of the lock file -> this process's lock


class DataLock:
    """One reference to this process's lock on a database; :meth:`release` drops it.

    Also a context manager (releasing on exit).
    """

    __slots__ = ("_key", "database", "lock_file")

    def __init__(self, database: Path, lock_file: Path, key: str) -> None:
        self.database = database
        self.lock_file = lock_file
        self._key: str | None = key

    def release(self) -> None:
        """Drop this reference; the last one unlocks the file. Idempotent."""
        key, self._key = self._key, None
        if key is None:
            return
        with _registry_lock:
            held = _held[key]
            held.count -= 1
            if held.count:
                return
            del _held[key]
            # Leave the file with no holder's details: whoever reads it next finds the
            # lock free anyway. Closing the descriptor is what unlocks it.
            with contextlib.suppress(OSError):
                os.ftruncate(held.fd, 0)
            os.close(held.fd)

    def __enter__(self) -> DataLock:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()


def acquire_data_lock(database: Path) -> DataLock:
    """Take (or, within this process, share) the lock of ``database``.

    Creates the directory and the lock file if needed. Raises
    :class:`~perdure.errors.StoreLocked` at once, without waiting, if another
    process holds it.
    """
    database = Path(os.path.realpath(database))
    lock_file = lock_file_for(database)
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    key = str(lock_file)
    with _registry_lock:
        held = _held.get(key)
        if held is not None:
            held.count += 1
            return DataLock(database, lock_file, key)
        fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by children
        try:
            locked = _try_lock(fd)
            if locked:
                _write_holder(fd)
        except BaseException:
            os.close(fd)
            raise
        if locked:
            _held[key] = _Held(fd, 1)
            return DataLock(database, lock_file, key)
    try:
        holder = _read_holder(fd)
    finally:
        os.close(fd)
    raise StoreLocked(database, lock_file, holder)


if sys.platform == "win32":  # pragma: no cover - perdure serve runs on POSIX (uvloop)

    def _try_lock(fd: int) -> bool:
        return True

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


def _write_holder(fd: int) -> None:
    """Write who holds the lock (after locking: only the holder ever writes)."""
    details = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": _command_line(),
        "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    data = (json.dumps(details) + "\n").encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


def _command_line() -> str:
    """This process's command line, as a person would type it."""
    argv = list(sys.argv)
    if not argv or not argv[0]:
        return sys.executable
    program = Path(argv[0])
    # `python -m perdure serve …` shows up as the path of perdure/__main__.py.
    argv[0] = f"python -m {program.parent.name}" if program.name == "__main__.py" else argv[0]
    return " ".join(argv)


def _read_holder(fd: int) -> dict[str, object]:
    """The holder's details, waiting briefly for a holder that has just locked to write
    them; ``{}`` if none appear."""
    deadline = time.monotonic() + _HOLDER_WAIT
    while True:
        try:
            size = os.fstat(fd).st_size
            details = json.loads(os.pread(fd, max(size, 1), 0).decode())
        except (OSError, ValueError):
            details = None
        if isinstance(details, dict) and details.get("pid") is not None:
            return details
        if time.monotonic() >= deadline:
            return {}
        time.sleep(0.02)
