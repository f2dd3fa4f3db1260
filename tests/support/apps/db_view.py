"""Actors that keep data in ``c.kv`` and ``c.db`` for the ``perdure check`` test
(tests/scenarios/check/test_check_storage.py), the admin API and ``perdure db``
(tests/scenarios/admin/test_db_admin.py):

- ``stash``: a workflow whose steps write and read the actor's KV space (``step.kv``),
  then waits for a ``go`` message; it has an SQL database too (``db=``);
- ``notes``: a plain actor with an SQL database and KV records.

``storage`` serves them and is also the "unchanged code" the check judges.
"""

from __future__ import annotations

from typing import Any

from perdure import ActionContext, StepContext, WorkflowContext, actor, db, setup, workflow
from perdure import queue as queue_definition


async def migrate(database: Any) -> None:
    await database.execute(
        "CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL, n REAL)"
    )


async def add(c: ActionContext, body: str, n: float = 0.0) -> int:
    rows = await c.db.execute("INSERT INTO notes (body, n) VALUES (?, ?) RETURNING id", body, n)
    await c.kv.put(f"note:{rows[0]['id']}", body)
    return int(rows[0]["id"])


async def _put(step: StepContext) -> str:
    await step.kv.put("seen", {"by": "put"})
    return "put"


async def _read(step: StepContext) -> Any:
    return await step.kv.get("seen")


async def _stash(ctx: WorkflowContext) -> Any:
    await ctx.step("put", _put)
    seen = await ctx.step("read", _read)
    message = await ctx.queue.next("wait", names="go")
    return {"seen": seen, "message": message.body}


storage = setup(
    use={
        "stash": workflow(
            state={},
            db=db(on_migrate=migrate),
            queues={"go": queue_definition()},
            run=_stash,
            actions={"ping": lambda c: "pong"},
        ),
        "notes": actor(state={}, db=db(on_migrate=migrate), actions={"add": add}),
    }
)
