"""The registry of the deadline and fork scenarios (``perdure serve
tests.scenarios.workflows.operator_app:registry``).

``limited`` reserves (with a compensation that writes to the state's log), then sleeps an
hour, with a deadline of ``PERDURE_DEADLINE_S`` seconds (6 unless set); ``greeter``
fetches, then greets the run's input (``ctx.input["who"]``), logging each step it runs.
"""

from __future__ import annotations

import os
from typing import Any

from perdure import StepContext, WorkflowContext, setup, workflow

DEADLINE_S = float(os.environ.get("PERDURE_DEADLINE_S", "6"))


def _logged(what: str, value: Any = None) -> Any:
    def step(s: StepContext, *output: Any) -> Any:
        s.state["log"] = [*s.state["log"], what]
        return value

    return step


async def _limited(ctx: WorkflowContext) -> str:
    await ctx.rollback_checkpoint("start")
    await ctx.step("reserve", _logged("reserve"), rollback=_logged("undo reserve"))
    await ctx.sleep("wait", 3600)
    await ctx.step("ship", _logged("ship"))
    return "shipped"


async def _greeter(ctx: WorkflowContext) -> str:
    await ctx.step("fetch", _logged("fetch"))
    who = ctx.input["who"]
    return str(await ctx.step("greet", _logged(f"greet {who}", f"hello {who}")))


def _log(c: Any) -> Any:
    return c.state["log"]


registry = setup(
    use={
        "limited": workflow(
            state={"log": []}, run=_limited, timeout=DEADLINE_S, actions={"log": _log}
        ),
        "greeter": workflow(state={"log": []}, run=_greeter, actions={"log": _log}),
    }
)
