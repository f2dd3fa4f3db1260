"""The type checker sees the actors: mypy over the sample app (tests/typing_sample)
reports exactly the mistakes planted in its user code, and nothing else.

``usage.py`` calls the sample's actors through the three clients (the async network
client, the blocking one and the in-process one); each line marked ``# planted: <code>``
is a mistake (a misspelt actor, a misspelt action, a wrong argument type, a wrong use
of a result, a misspelt queue or event …) that mypy must report with that error code.
The app and its generated module must check clean under ``--strict``: a stray error
anywhere fails the test as surely as a missed one.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "tests" / "typing_sample"
PLANTED = re.compile(r"#\s*planted:\s*([a-z-]+)")
ERROR = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): error: .*\[(?P<code>[a-z-]+)\]$")


def _planted() -> set[tuple[str, int, str]]:
    found = set()
    for path in sorted(SAMPLE.glob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            match = PLANTED.search(line)
            if match:
                found.add((path.relative_to(ROOT).as_posix(), number, match.group(1)))
    return found


def _require_mypy() -> None:
    if importlib.util.find_spec("mypy") is None:
        message = "mypy is not installed: pip install -e '.[dev]'"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def test_the_sample_plants_each_kind_of_mistake() -> None:
    planted = _planted()
    lines = {
        number: line
        for number, line in enumerate((SAMPLE / "usage.py").read_text().splitlines(), start=1)
    }
    kinds = {
        "a misspelt actor": "client.countr.",
        "a misspelt action": "counter.incremnt(",
        "a wrong argument type": 'counter.increment("five")',
        "a wrong use of a result": "name: str = await counter.increment(1)",
    }
    for kind, text in kinds.items():
        marked = [n for (_, n, _) in planted if text in lines.get(n, "")]
        assert marked, f"usage.py plants no {kind} ({text!r})"


def test_mypy_reports_exactly_the_planted_mistakes(tmp_path: Path) -> None:
    _require_mypy()
    # The repository's mypy settings (strict, the stubs it lacks); perdure from this tree.
    command = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        "pyproject.toml",
        "--strict",
        "--cache-dir",
        str(tmp_path / "mypy-cache"),
        "--no-color-output",
        "--no-error-summary",
        "--show-error-codes",
        "--hide-error-context",
        SAMPLE.relative_to(ROOT).as_posix(),
    ]
    env = {**os.environ, "MYPYPATH": str(ROOT / "src")}
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    reported = set()
    for line in result.stdout.splitlines():
        match = ERROR.match(line)
        if match:
            reported.add((Path(match["path"]).as_posix(), int(match["line"]), match["code"]))
    assert not result.stderr.strip(), result.stderr[-2000:]
    planted = _planted()
    output = result.stdout[-4000:]
    assert sorted(planted - reported) == [], f"mypy missed planted mistakes:\n{output}"
    assert sorted(reported - planted) == [], f"mypy reported what was not planted:\n{output}"
    assert result.returncode == 1
