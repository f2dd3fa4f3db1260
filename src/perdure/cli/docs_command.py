"""``perdure docs [TOPIC]``: the documentation, as installed with the package.

The help text and the server's warnings name pages as ``perdure docs TOPIC``, which works
wherever perdure is installed, a wheel included: the pages ship inside the package (its
``docs`` folder is the repository's ``docs/``). Without a topic, it lists the pages.
"""

from __future__ import annotations

import argparse
import sys
from importlib.resources import files
from importlib.resources.abc import Traversable

__all__ = ["add_docs_command", "run_docs"]


def add_docs_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``perdure docs``."""
    docs = commands.add_parser(
        "docs",
        help="print a page of the documentation (the list of pages without TOPIC)",
        description="Print a page of perdure's documentation, as installed with it.",
    )
    docs.add_argument("topic", nargs="?", help="the page, e.g. edge, cli, deploy")


def run_docs(args: argparse.Namespace) -> int:
    """Print the page ``args.topic``, or list the pages; 2 for a page that does not exist."""
    pages = _pages()
    if args.topic is None:
        print("Pages (perdure docs TOPIC):")
        for name, page in sorted(pages.items()):
            print(f"  {name:<22} {_title(page)}")
        return 0
    chosen = pages.get(args.topic.lower().removesuffix(".md"))
    if chosen is None:
        print(
            f"perdure: error: no page named {args.topic!r} [cli.unknown_doc]; "
            f"the pages: {', '.join(sorted(pages))}",
            file=sys.stderr,
        )
        return 2
    sys.stdout.write(chosen.read_text(encoding="utf-8"))
    return 0


def _pages() -> dict[str, Traversable]:
    folder = files("perdure") / "docs"
    return {
        entry.name.removesuffix(".md").lower(): entry
        for entry in folder.iterdir()
        if entry.name.endswith(".md")
    }


def _title(page: Traversable) -> str:
    """The page's first heading."""
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return ""
