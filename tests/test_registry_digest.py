"""registry_digest: the code version a cluster node announces by default (issue 33).

It must be the same for the same code (across restarts, processes with other hash seeds,
code moved to other lines) and change when a workflow's code changes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from perdure import queue, setup, workflow
from perdure.registry import Registry, registry_digest
from tests.scenarios.cluster import versioned_app

_WORKFLOW = """
async def run(ctx):
    await ctx.step("prepare", lambda s: s.state.update(n=STEP_VALUE))
    await ctx.queue.next("go", names={"go", "stop"})
    await ctx.step(STEP_NAME, lambda s: None)
"""


def registry_of(source: str, *, value: int = 1, name: str = "finish") -> Registry:
    code = source.replace("STEP_VALUE", str(value)).replace("STEP_NAME", repr(name))
    scope: dict[str, Any] = {}
    exec(compile(code, "<app>", "exec"), scope)
    job = workflow(state={"n": 0}, queues={"go": queue(), "stop": queue()}, run=scope["run"])
    return setup(use={"job": job})


def test_the_same_code_digests_the_same_wherever_it_sits() -> None:
    first = registry_digest(registry_of(_WORKFLOW))
    assert registry_digest(registry_of(_WORKFLOW)) == first
    assert registry_digest(registry_of("\n\n\n# moved\n" + _WORKFLOW)) == first
    assert len(first) == 12
    assert int(first, 16) >= 0


def test_a_change_to_a_step_body_or_name_changes_it() -> None:
    first = registry_digest(registry_of(_WORKFLOW))
    assert registry_digest(registry_of(_WORKFLOW, value=2)) != first
    assert registry_digest(registry_of(_WORKFLOW, name="done")) != first


def test_other_processes_with_other_hash_seeds_agree() -> None:
    """A frozenset constant (``names={...}``) iterates in a hash-seed order: sorted."""
    script = (
        "from perdure.registry import registry_digest\n"
        "from tests.scenarios.cluster import versioned_app as a\n"
        "from tests.test_registry_digest import _WORKFLOW, registry_of\n"
        "print(registry_digest(a.registry_v1), registry_digest(registry_of(_WORKFLOW)))\n"
    )
    expected = (
        f"{registry_digest(versioned_app.registry_v1)} {registry_digest(registry_of(_WORKFLOW))}"
    )
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == expected.split()


def test_the_test_apps_three_versions_differ() -> None:
    versions = {
        registry_digest(r)
        for r in (versioned_app.registry_v1, versioned_app.registry_v2, versioned_app.registry_v3)
    }
    assert len(versions) == 3
