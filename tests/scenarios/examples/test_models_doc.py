"""docs/models.md runs as written: its python blocks, in order, print what it says."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.support.server import REPO_ROOT

DOC = (REPO_ROOT / "docs" / "models.md").read_text()

# Drives the dataclass/TypedDict block, which the page only defines.
NOTES_DRIVER = """
async def notes_main() -> None:
    async with ActorRuntime(setup(use={"notes": notes}), MemoryStore()) as runtime:
        handle = runtime.client().notes.get_or_create("n")
        print(await handle.hit({"text": "a", "stars": 2}))


asyncio.run(notes_main())
"""


def _blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", DOC, flags=re.S)


@pytest.mark.timeout(60)
def test_the_models_page_runs_and_prints_what_it_shows() -> None:
    script = "\n".join(_blocks("python")) + NOTES_DRIVER
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=50
    )
    assert result.returncode == 0, result.stderr[-3000:]
    shown = _blocks("text")[0].splitlines()
    assert result.stdout.splitlines() == [*shown, "{'hits': 2}"]
