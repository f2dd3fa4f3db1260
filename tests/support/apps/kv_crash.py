"""An actor whose every action writes several KV records and a state field, for the
``kill -9`` tests of ``c.kv`` (tests/scenarios/crash/test_kv_crash.py).

``apply(n)`` writes ``RECORDS`` records ``op:<n>:<i>`` (each ``PAD`` bytes, so a commit
takes a moment to write), overwrites ``last``, deletes the previous op's marker
``mark:<n - 1>`` (when there is one) and writes its own ``mark:<n>``, and appends ``n``
to ``state["ops"]``: one commit. ``audit()`` reads it all back and says what is
whole and what is not.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from perdure import ActionContext, actor, setup

RECORDS = 5
PAD = 512


async def apply(c: ActionContext, n: int) -> int:
    c.kv.put_batch({f"op:{n:08}:{i}": {"n": n, "pad": "x" * PAD} for i in range(RECORDS)})
    c.kv.put("last", n)
    previous = c.state["last"]
    if previous is not None:
        c.kv.delete(f"mark:{previous:08}")
    c.kv.put(f"mark:{n:08}", n)
    c.state["ops"].append(n)
    c.state["last"] = n
    return n


async def audit(c: ActionContext) -> dict[str, Any]:
    ops: list[int] = c.state["ops"]
    records = Counter(value["n"] for _, value in await c.kv.list("op:"))
    marks = [value for _, value in await c.kv.list("mark:")]
    return {
        "ops": ops,
        "records": {str(n): count for n, count in records.items()},
        "marks": marks,
        "last": await c.kv.get("last"),
        "state_last": c.state["last"],
    }


ledger = actor(state={"ops": [], "last": None}, actions={"apply": apply, "audit": audit})
registry = setup(use={"ledger": ledger})
