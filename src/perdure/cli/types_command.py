"""``perdure types MODULE:registry``: write the typed client module of a registry
(:mod:`perdure.typed.generate`; docs/clients.md, "Typed clients").

Without ``-o`` the module is printed. With ``--check`` nothing is written: the exit
status says whether the file given with ``-o`` is what the command would write (0) or
not (1, with a line saying how to bring it up to date), for a CI step.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from perdure.cli import loading

__all__ = ["add_types_command", "run_types"]


def add_types_command(commands: Any) -> None:
    """Add ``perdure types`` to the ``perdure`` subcommands."""
    types = commands.add_parser(
        "types",
        help="write the typed client module of a registry (AppClient, SyncAppClient)",
        description="Write a module of typed clients for the registry given: a misspelt "
        "actor or action, a wrong argument or a wrong use of a result is then a type error "
        "(docs/clients.md, 'Typed clients').",
    )
    types.add_argument("registry", help="module:attribute or path/to/file.py:attribute")
    types.add_argument("-o", "--output", help="the file to write (default: print it)")
    types.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if the --output file is not what would be written",
    )


def run_types(args: argparse.Namespace) -> int:
    """Run ``perdure types``; the exit status."""
    from perdure.typed.generate import generate  # loads the definitions: only when run

    if args.check and not args.output:
        raise loading.CliError("--check needs the file to check: -o FILE")
    text = generate(loading.load_registry(args.registry), args.registry)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    path = Path(args.output)
    if args.check:
        current = path.read_text() if path.is_file() else None
        if current == text:
            return 0
        state = "is missing" if current is None else "is out of date"
        print(
            f"{path} {state}: run perdure types {args.registry} -o {args.output}",
            file=sys.stderr,
        )
        return 1
    path.write_text(text)
    return 0
