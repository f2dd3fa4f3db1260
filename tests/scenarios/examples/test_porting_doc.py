"""docs/porting.md shows the examples as they are: each Python block marked
``<!-- example: examples/X.py -->`` is a verbatim excerpt of that file (so the page
cannot drift from the code that the example tests run), and every other Python block
compiles. The TypeScript blocks are the seed's programs, all three of them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
PAGE = (REPO_ROOT / "docs" / "porting.md").read_text()
BLOCK = re.compile(
    r"(?:<!-- example: (?P<source>\S+) -->\n\n)?```(?P<lang>\w+)\n(?P<code>.*?)\n```", re.S
)
BLOCKS = [m.groupdict() for m in BLOCK.finditer(PAGE)]
EXCERPTS = [b for b in BLOCKS if b["lang"] == "python" and b["source"]]
SNIPPETS = [b for b in BLOCKS if b["lang"] == "python" and not b["source"]]


def test_the_page_shows_the_three_programs_in_both_languages() -> None:
    sources = {b["source"] for b in EXCERPTS}
    assert sources == {
        "examples/progress.py",
        "examples/progress_client.py",
        "examples/cron.py",
        "examples/setup_teardown.py",
    }
    typescript = [b["code"] for b in BLOCKS if b["lang"] == "ts"]
    for name in ("progressActor", "cronActor", "setupRunTeardownActor", "createClient"):
        assert sum(name in code for code in typescript) >= 1, name


@pytest.mark.parametrize("block", EXCERPTS, ids=[b["source"] for b in EXCERPTS])
def test_each_python_port_is_the_example_as_it_is(block: dict[str, str]) -> None:
    source = (REPO_ROOT / block["source"]).read_text()
    assert block["code"] in source, (
        f"docs/porting.md's block from {block['source']} no longer matches the file: "
        "copy the file's current text into the page"
    )


@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_other_python_blocks_compile(index: int) -> None:
    compile(SNIPPETS[index]["code"], f"docs/porting.md block {index}", "exec")


def test_every_example_block_is_marked() -> None:
    # A marker must sit right above its block, or the block would be checked only as a
    # snippet (compiled) and could drift from its file.
    assert PAGE.count("<!-- example:") == len(EXCERPTS)
