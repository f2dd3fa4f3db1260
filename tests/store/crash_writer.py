"""Helper process for the crash test: commit in a loop, print each acknowledged commit.

Usage: ``python crash_writer.py STORE`` where STORE is a SQLite path or any store URL
(``open_store``). Several tasks commit concurrently (so group
commit batches them); after each ``await store.commit(...)`` returns, the task prints
``<actor_id> <step>`` and flushes. The test kills this process with SIGKILL and checks
that every printed commit is in the database.
"""

from __future__ import annotations

import asyncio
import sys

from perdure.store import ActorCommit, ActorRecord, QueueMessageRecord, Store, open_store

TASKS = 8


async def _writer(store: Store, actor_id: str) -> None:
    step = 0
    while True:
        step += 1
        await store.commit(
            ActorCommit(
                actor_id,
                state=str(step).encode(),
                history_put={f"loop/~{step}/step": b"done"},
                queue_put=[QueueMessageRecord(step, "jobs", b"body", step)],
            )
        )
        sys.stdout.write(f"{actor_id} {step}\n")
        sys.stdout.flush()


async def main(path: str) -> None:
    store = open_store(path)
    await store.open()
    for index in range(TASKS):
        await store.create_actor(ActorRecord(f"actor-{index}", "crash", (str(index),), 0))
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    await asyncio.gather(*(_writer(store, f"actor-{index}") for index in range(TASKS)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
