"""The code blocks of a document, for the tests that run a guide's examples as written."""

from __future__ import annotations

import re

__all__ = ["named_files", "python_blocks"]


def python_blocks(text: str) -> list[str]:
    """The bodies of the document's ```` ```python ```` blocks, in order."""
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def named_files(blocks: list[str]) -> dict[str, str]:
    """The blocks that name the file a reader saves them as (a first line ``# name.py``)."""
    return {
        match.group(1): block
        for block in blocks
        if (match := re.match(r"# (\w+\.py)\n", block)) is not None
    }
