"""docs/workflows/, the guide to writing workflows, run as a reader would run it.

Each page is run in a directory of its own:

- every ```` ```python ```` block names the file it is saved as (its first line,
  ``# name.py``), and every one is saved;
- a python block followed by a ```` ```text ```` block is a script: ``python name.py``
  must print exactly that text;
- a ```` ```sh ```` block runs its commands in order (``python …`` and ``perdure …``
  only), each of which must exit 0 unless its line ends in ``# exit status N``; a text
  block after it is what they print together, with actor ids and durations masked;
- no block goes unrun: every file is run, or imported by a file of its page, or named by
  a command.

The pages run on the manual clock of ``perdure.testing`` (days of durable time in
milliseconds), so the whole guide takes a few seconds.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.docs import code_blocks, file_name
from tests.support.server import REPO_ROOT

GUIDE = REPO_ROOT / "docs" / "workflows"
PAGES = sorted(page.name for page in GUIDE.glob("*.md"))
EXIT_STATUS = re.compile(r"#\s*exit status (\d+)\s*$")


def _mask(text: str) -> str:
    """An output with what changes from run to run masked: actor ids, durations."""
    text = re.sub(r"\b[0-9a-f]{24,}\b", "<id>", text)
    text = re.sub(r"\bin \d+(\.\d+)? ?s\b", "in <t> s", text)
    return "\n".join(" ".join(line.split()) for line in text.splitlines())


def _command(line: str) -> tuple[list[str], int]:
    """A line of a sh block as argv, and the exit status it says it ends with."""
    status = EXIT_STATUS.search(line)
    words = shlex.split(line, comments=True)
    program, arguments = words[0], words[1:]
    if program == "python":
        return [sys.executable, *arguments], 0 if status is None else int(status.group(1))
    assert program == "perdure", f"the guide's commands are python and perdure, not {line!r}"
    argv = [sys.executable, "-m", "perdure", *arguments]
    return argv, 0 if status is None else int(status.group(1))


def _run(argv: list[str], where: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=where, capture_output=True, text=True, timeout=60)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("page", PAGES)
def test_the_page_runs_and_prints_what_it_shows(page: str, tmp_path: Path) -> None:
    blocks = code_blocks((GUIDE / page).read_text())
    files: dict[str, str] = {}
    for language, body in blocks:
        assert language in ("python", "sh", "text"), f"{page}: a ```{language} block"
        if language == "python":
            name = file_name(body)
            assert name is not None, f"{page}: a python block names no file:\n{body}"
            assert name not in files, f"{page}: two blocks named {name}"
            files[name] = body
            (tmp_path / name).write_text(body)
    ran: set[str] = set()
    for index, (language, body) in enumerate(blocks):
        after = blocks[index + 1] if index + 1 < len(blocks) else ("", "")
        shown = after[1] if after[0] == "text" else None
        if language == "text":
            before = blocks[index - 1][0] if index > 0 else ""
            assert before in ("python", "sh"), f"{page}: a text block after no script:\n{body}"
        elif language == "python" and shown is not None:
            name = file_name(body)
            assert name is not None
            result = _run([sys.executable, name], tmp_path)
            assert result.returncode == 0, f"{page}: {name}\n{result.stdout}{result.stderr}"
            assert result.stdout == shown, f"{page}: {name} printed\n{result.stdout}"
            ran.add(name)
        elif language == "sh":
            printed = []
            for line in filter(None, (raw.strip() for raw in body.splitlines())):
                argv, status = _command(line)
                result = _run(argv, tmp_path)
                assert result.returncode == status, (
                    f"{page}: `{line}` exited {result.returncode}\n{result.stdout}{result.stderr}"
                )
                printed.append(result.stdout)
                ran.update(word for word in shlex.split(line, comments=True) if word in files)
                ran.update(f"{word.split(':')[0]}" for word in line.split() if ".py:" in word)
            if shown is not None:
                assert _mask("".join(printed)) == _mask(shown), "".join(printed)
    imported = {
        name
        for name in files
        for body in files.values()
        if re.search(rf"^(from|import) {name.removesuffix('.py')}\b", body, re.M)
    }
    unrun = set(files) - ran - imported
    assert not unrun, f"{page}: blocks nothing runs: {sorted(unrun)}"


def test_the_index_lists_every_page_in_reading_order() -> None:
    index = (GUIDE / "README.md").read_text()
    listed = re.findall(r"^\d+\. \[[^]]+\]\(([\w-]+\.md)\)", index, re.M)
    assert sorted(listed) == sorted(set(PAGES) - {"README.md"}), listed
    for page in listed:
        text = (GUIDE / page).read_text()
        assert text.startswith("# "), page
        assert "(README.md)" in text, f"{page} does not link back to the index"


def test_the_readme_and_the_design_link_to_the_guide() -> None:
    assert "docs/workflows/README.md" in (REPO_ROOT / "README.md").read_text()
    assert "docs/workflows/" in (REPO_ROOT / "docs" / "DESIGN.md").read_text()
