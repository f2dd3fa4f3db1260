"""The code blocks of a document, for the tests that run a guide's examples as written."""

from __future__ import annotations

import re

__all__ = ["code_blocks", "file_name", "named_files", "python_blocks"]

_FILE_NAME = re.compile(r"# (\w+\.py)\n")


def python_blocks(text: str) -> list[str]:
    """The bodies of the document's ```` ```python ```` blocks, in order."""
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def code_blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced block of the document, in order, as ``(language, body)``."""
    return re.findall(r"^```(\w*)\n(.*?)^```$", text, flags=re.S | re.M)


def file_name(block: str) -> str | None:
    """The file a reader saves the block as (its first line ``# name.py``), if it says."""
    match = _FILE_NAME.match(block)
    return None if match is None else match.group(1)


def named_files(blocks: list[str]) -> dict[str, str]:
    """The blocks that name the file a reader saves them as (a first line ``# name.py``)."""
    return {name: block for block in blocks if (name := file_name(block)) is not None}
