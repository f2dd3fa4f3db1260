"""docs/cli.md documents every ``perdure`` command and every option of each."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from perdure.cli.app import _parser

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _commands(
    parser: argparse.ArgumentParser, prefix: str = "perdure"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix} {name}", sub
                yield from _commands(sub, f"{prefix} {name}")


COMMANDS = dict(_commands(_parser()))


def test_every_command_has_a_place_in_the_doc() -> None:
    text = DOC.read_text()
    missing = [name for name in COMMANDS if name not in text]
    assert not missing, f"docs/cli.md does not mention {missing}"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_option_is_documented(command: str) -> None:
    text = DOC.read_text()
    options = [
        option
        for action in COMMANDS[command]._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    ]
    missing = [option for option in options if f"`{option}" not in text]
    assert not missing, f"docs/cli.md does not document {command} {missing}"
