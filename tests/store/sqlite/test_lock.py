"""One process per SQLite database: the data-directory lock of SQLiteStore.

The holder is a real second process (``lock_holder.py``); the lock is an OS advisory
lock, so only another process (or another open file description) can see it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import sqlite3
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from perdure.store import SQLiteStore, StoreLocked, open_store
from perdure.store.migrations import SchemaTooNew

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="flock and SIGKILL")

TIMEOUT = 10.0
HOLDER = Path(__file__).with_name("lock_holder.py")


class Holder:
    """``lock_holder.py`` on a database: holds it open and commits what it is sent."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.pid = process.pid

    async def write(self, text: str) -> None:
        """Have the holder commit ``text`` as its actor's state, and wait for it."""
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(text.encode() + b"\n")
        await self.process.stdin.drain()
        line = await asyncio.wait_for(self.process.stdout.readline(), TIMEOUT)
        assert line == f"ok {text}\n".encode()

    async def quit(self) -> int:
        """End of input: the holder closes its store and exits."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        return await asyncio.wait_for(self.process.wait(), TIMEOUT)

    async def kill(self) -> None:
        """``kill -9``: no cleanup at all."""
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        await asyncio.wait_for(self.process.wait(), TIMEOUT)


async def start_holder(path: Path) -> tuple[asyncio.subprocess.Process, bytes]:
    """Start ``lock_holder.py`` on ``path``; its first line (or, if it exits, its stderr)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HOLDER),
        str(path),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    first = await asyncio.wait_for(process.stdout.readline(), 30)
    if first:
        return process, first
    await asyncio.wait_for(process.wait(), TIMEOUT)
    return process, await process.stderr.read()


@contextlib.asynccontextmanager
async def holding(path: Path) -> AsyncIterator[Holder]:
    """A holder process that has the database open; killed at the end whatever happened."""
    process, first = await start_holder(path)
    holder = Holder(process)
    try:
        assert first == f"ready {holder.pid}\n".encode(), first
        yield holder
    finally:
        await holder.kill()


@contextlib.contextmanager
def raw_flock(lock_file: Path) -> Iterator[bool]:
    """Try the lock as another holder would (a new open file description): True if it
    was free (it is then held until the block ends)."""
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
        else:
            yield True
    finally:
        os.close(fd)


def state_on_disk(path: Path) -> bytes | None:
    with contextlib.closing(sqlite3.connect(path)) as db:
        row = db.execute("SELECT state FROM actors WHERE actor_id = 'held'").fetchone()
    return None if row is None else row[0]


async def test_a_second_process_is_refused_at_once_and_the_first_goes_on(
    tmp_path: Path,
) -> None:
    path = tmp_path / "data" / "perdure.db"
    async with holding(path) as holder:
        await holder.write("before")
        store = SQLiteStore(path)
        started = time.monotonic()
        with pytest.raises(StoreLocked) as refused:
            await asyncio.wait_for(store.open(), TIMEOUT)
        assert time.monotonic() - started < 3
        error = refused.value
        assert error.identifier == "store.locked"
        message = str(error)
        assert str(path.parent) in message  # the data directory
        assert f"process {holder.pid}" in message  # who holds it
        assert "lock_holder.py" in message  # its command line
        assert error.holder["pid"] == holder.pid
        assert error.lock_file == path.with_name("perdure.db.lock")
        with pytest.raises(Exception, match="not open"):
            await store.get_actor("held")  # the refused store is not half-open
        await store.close()
        # The holder goes on untouched.
        await holder.write("after")
        assert state_on_disk(path) == b"after"
        assert await holder.quit() == 0
    # Closed by its holder: the database is free again.
    store = SQLiteStore(path)
    await asyncio.wait_for(store.open(), TIMEOUT)
    try:
        held = await store.get_actor("held")
        assert held is not None
        assert held.state == b"after"
    finally:
        await store.close()


async def test_a_holder_killed_with_sigkill_never_blocks_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "perdure.db"
    async with holding(path) as holder:
        await holder.write("acknowledged")
        await holder.kill()
    # Its lock file is left behind, with its details; the OS released the lock itself.
    assert path.with_name("perdure.db.lock").exists()
    store = SQLiteStore(path)
    await asyncio.wait_for(store.open(), TIMEOUT)
    try:
        held = await store.get_actor("held")
        assert held is not None
        assert held.state == b"acknowledged"
    finally:
        await store.close()
    # And again from another process, after this one closed.
    async with holding(path) as holder:
        assert await holder.quit() == 0


async def test_stores_of_one_process_share_the_lock_until_the_last_closes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "perdure.db"
    one, two = SQLiteStore(path), SQLiteStore(path)
    await asyncio.wait_for(asyncio.gather(one.open(), two.open()), TIMEOUT)
    try:
        await one.close()
        # `two` still holds it for this process: another process is refused, naming us.
        process, stderr = await start_holder(path)
        assert process.returncode not in (None, 0)
        assert f"process {os.getpid()}".encode() in stderr
        assert b"StoreLocked" in stderr
        # Reopening within the process works while the lock is held …
        await asyncio.wait_for(one.open(), TIMEOUT)
        await one.close()
    finally:
        await two.close()
    # … and after the last store closed, another process gets it.
    async with holding(path) as holder:
        assert await holder.quit() == 0


async def test_the_lock_is_held_exactly_while_a_store_is_open(tmp_path: Path) -> None:
    path = tmp_path / "perdure.db"
    store = SQLiteStore(path)
    assert store.lock_file == tmp_path / "perdure.db.lock"
    await store.open()
    with raw_flock(store.lock_file) as free:
        assert not free
    await store.close()
    with raw_flock(store.lock_file) as free:
        assert free
    await store.open()  # reopening after close, in the same process
    await store.open()  # idempotent: one reference, released by one close
    await store.close()
    with raw_flock(store.lock_file) as free:
        assert free


async def test_a_store_that_fails_to_open_releases_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "perdure.db"
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE perdure_migrations (version PRIMARY KEY, name, applied_at)")
        db.execute("INSERT INTO perdure_migrations VALUES (999, 'future', 0)")
        db.commit()
    store = SQLiteStore(path)
    with pytest.raises(SchemaTooNew):
        await asyncio.wait_for(store.open(), TIMEOUT)
    with raw_flock(store.lock_file) as free:
        assert free


async def test_a_holder_that_wrote_nothing_is_reported_without_a_pid(tmp_path: Path) -> None:
    path = tmp_path / "perdure.db"
    lock_file = path.with_name("perdure.db.lock")
    with raw_flock(lock_file) as free:
        assert free
        started = time.monotonic()
        with pytest.raises(StoreLocked, match="pid unknown"):
            await asyncio.wait_for(SQLiteStore(path).open(), TIMEOUT)
        assert time.monotonic() - started < 3  # waits briefly for details, then answers


async def test_a_non_exclusive_store_reads_beside_the_holder(tmp_path: Path) -> None:
    path = tmp_path / "perdure.db"
    async with holding(path) as holder:
        await holder.write("visible")
        reader = open_store(str(path), exclusive=False)
        await asyncio.wait_for(reader.open(), TIMEOUT)
        try:
            held = await reader.get_actor("held")
            assert held is not None
            assert held.state == b"visible"
        finally:
            await reader.close()
        await holder.write("still mine")
