"""Helper process for the lock tests: hold a SQLite store open and keep writing to it.

Usage: ``python lock_holder.py PATH``. Opens a :class:`SQLiteStore` on PATH (taking its
data-directory lock), creates actor ``held``, prints ``ready <pid>`` and then, for each
line read on stdin, commits that line as the actor's state and prints ``ok <line>``.
It closes the store and exits at the end of stdin (or is killed).
"""

from __future__ import annotations

import asyncio
import os
import sys

from perdure.store import ActorCommit, ActorRecord, SQLiteStore


async def main(path: str) -> None:
    store = SQLiteStore(path)
    await store.open()
    try:
        if await store.get_actor("held") is None:
            await store.create_actor(ActorRecord("held", "holder", ("held",), 0))
        print(f"ready {os.getpid()}", flush=True)
        loop = asyncio.get_running_loop()
        while line := (await loop.run_in_executor(None, sys.stdin.readline)).strip():
            await store.commit(ActorCommit("held", state=line.encode()))
            print(f"ok {line}", flush=True)
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
