"""``perdure check`` on a large store (run by hand: ``python bench/check_bench.py``).

Fills a SQLite store with ``--workflows`` (default 10,000) workflows through the real
runtime, a quarter at each point a deploy meets them: finished, sleeping, mid-loop
(three iterations done, waiting on a receive in the fourth) and waiting on a receive in
the first iteration. Then times the real ``perdure check`` command (a subprocess) on it,
against the same code: every workflow replays up to its frontier, none diverges.

``--data DIR`` keeps the store there (and reuses it when it is already filled).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from perdure import ActorRuntime, Loop, StepContext, WorkflowContext, setup, workflow
from perdure import queue as queue_definition
from perdure.store import SQLiteStore

BATCH = 500


def _count(step: StepContext) -> int:
    step.state["steps"] += 1
    return int(step.state["steps"])


async def _round(ctx: WorkflowContext, done: int) -> Any:
    await ctx.step("apply", _count)
    if done >= 3 or int(ctx.key[0]) % 4 == 3:
        message = await ctx.queue.next("wait", names="go")
        return Loop.break_(message.body)
    return Loop.continue_(done + 1)


async def _order(ctx: WorkflowContext) -> Any:
    await ctx.step("reserve", _count)
    await ctx.step("charge", _count)
    kind = int(ctx.key[0]) % 4
    if kind == 0:
        return "finished"
    if kind == 1:
        await ctx.sleep("cool-off", 86400)
    return await ctx.loop("rounds", _round, state=0)


registry = setup(
    use={
        "order": workflow(
            state={"steps": 0},
            queues={"go": queue_definition()},
            run=_order,
            actions={"steps": lambda c: c.state["steps"]},
        )
    }
)

# Steps each kind has run when it reaches its point (finished, sleeping, mid-loop, waiting).
_STEPS = {0: 2, 1: 2, 2: 6, 3: 3}


async def fill(database: Path, workflows: int) -> float:
    """Run ``workflows`` workflows to their points; seconds taken."""
    started = time.perf_counter()
    async with ActorRuntime(registry, SQLiteStore(database)) as runtime:
        client = runtime.client()
        for first in range(0, workflows, BATCH):
            keys = range(first, min(first + BATCH, workflows))
            handles = {key: client.order.get_or_create(str(key)) for key in keys}
            async with asyncio.timeout(300):
                for key, handle in handles.items():
                    while await handle.steps() < _STEPS[key % 4]:
                        await asyncio.sleep(0.01)
            print(f"filled {first + len(keys)}/{workflows}", file=sys.stderr, flush=True)
    return time.perf_counter() - started


def check(data: Path) -> tuple[float, dict[str, Any]]:
    """Time ``perdure check`` on the store; seconds and its JSON report."""
    command = [sys.executable, "-m", "perdure", "check", f"{__file__}:registry"]
    started = time.perf_counter()
    done = subprocess.run(
        [*command, "--data", str(data), "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    elapsed = time.perf_counter() - started
    sys.stderr.write(done.stderr)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"perdure check failed ({done.returncode}): {done.stderr}")
    return elapsed, json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflows", type=int, default=10_000)
    parser.add_argument("--data", type=Path, help="keep (or reuse) the store in DIR")
    parser.add_argument("--runs", type=int, default=1, help="time the check N times")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data: Path = args.data or Path(tmp)
        data.mkdir(parents=True, exist_ok=True)
        database = data / "perdure.db"
        if not database.exists():
            seconds = asyncio.run(fill(database, args.workflows))
            print(f"filled {args.workflows} workflows in {seconds:.1f} s", flush=True)
        for _ in range(args.runs):
            elapsed, report = check(data)
            print(
                json.dumps(
                    {
                        "workflows": report["workflows"],
                        "outcomes": report["outcomes"],
                        "ok": report["ok"],
                        "check_s": round(report["seconds"], 2),
                        "command_s": round(elapsed, 2),
                        "workflows_per_s": round(report["workflows"] / report["seconds"]),
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
