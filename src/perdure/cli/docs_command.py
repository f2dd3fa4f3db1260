"""``perdure docs [TOPIC]``: the documentation, as installed with the package.

The help text and the server's warnings name pages as ``perdure docs TOPIC``, which works
wherever perdure is installed, a wheel included: the pages ship inside the package (its
``docs`` folder is the repository's ``docs/``). Without a topic, it lists the pages. A
page of a folder of pages is named with its folder: ``perdure docs workflows/steps``
(``perdure docs workflows``: the folder's README).
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
    docs.add_argument(
        "topic", nargs="?", help="the page, e.g. edge, cli, deploy, workflows, workflows/steps"
    )


def run_docs(args: argparse.Namespace) -> int:
    """Print the page ``args.topic``, or list the pages; 2 for a page that does not exist."""
    pages = _pages()
    if args.topic is None:
        print("Pages (perdure docs TOPIC):")
        width = max(map(len, pages))
        for name, page in sorted(pages.items()):
            print(f"  {name:<{width}}  {_title(page)}")
        return 0
    chosen = pages.get(args.topic.lower().removesuffix(".md").rstrip("/").removesuffix("/readme"))
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
    """The pages by topic: ``edge`` for ``edge.md``, ``workflows/steps`` for a page of a
    folder of pages (a guide), and the folder's name for its ``README.md``."""
    pages: dict[str, Traversable] = {}
    for entry in (files("perdure") / "docs").iterdir():
        if entry.is_dir():
            for page in entry.iterdir():
                if page.name.endswith(".md"):
                    topic = f"{entry.name}/{page.name.removesuffix('.md')}".lower()
                    pages[topic.removesuffix("/readme")] = page
        elif entry.name.endswith(".md"):
            pages[entry.name.removesuffix(".md").lower()] = entry
    return pages


def _title(page: Traversable) -> str:
    """The page's first heading."""
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return ""
