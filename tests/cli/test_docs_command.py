"""``perdure docs``: the pages the help text names are there, installed with the package
(the wheel's copy is checked by scripts/smoke-wheel)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from perdure.cli.app import _parser, main

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_without_a_topic_it_lists_every_page_with_its_title(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["docs"]) == 0
    listed = capsys.readouterr().out
    for page in DOCS.glob("*.md"):
        assert re.search(rf"^  {re.escape(page.stem.lower())} +\S", listed, re.MULTILINE), page
    assert "The network edge" in listed  # edge.md's title
    # A folder of pages (a guide): its pages by folder/name, its README by the folder's.
    guide = sorted((DOCS / "workflows").glob("*.md"))
    assert len(guide) > 1
    for page in guide:
        topic = "workflows" if page.stem == "README" else f"workflows/{page.stem.lower()}"
        assert re.search(rf"^  {re.escape(topic)} +\S", listed, re.MULTILINE), page
    assert re.search(r"^  workflows/steps +Steps and retries$", listed, re.MULTILINE)


def test_a_topic_prints_its_page_whatever_the_case_or_suffix(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["docs", "Edge.md"]) == 0
    assert capsys.readouterr().out == (DOCS / "edge.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("topic", "page"),
    [
        ("workflows/steps", "workflows/steps.md"),
        ("Workflows/Steps.md", "workflows/steps.md"),
        ("workflows", "workflows/README.md"),
        ("workflows/README.md", "workflows/README.md"),
    ],
)
def test_a_page_of_a_guide_is_named_with_its_folder(
    topic: str, page: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["docs", topic]) == 0
    assert capsys.readouterr().out == (DOCS / page).read_text(encoding="utf-8")


def test_an_unknown_topic_is_refused_with_a_code_and_the_list(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["docs", "nowhere"]) == 2
    error = capsys.readouterr().err
    assert "[cli.unknown_doc]" in error
    assert "edge" in error


def test_every_page_the_help_text_names_exists(capsys: pytest.CaptureFixture[str]) -> None:
    parser = _parser()
    texts = [parser.format_help()]
    for command in ("serve", "check", "reset-cluster-secret", "actor"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        texts.append(capsys.readouterr().out)
    named = set(re.findall(r"perdure docs ([a-z-]+)", "\n".join(texts)))
    assert {"edge", "deploy", "inspector", "check"} <= named
    assert not re.search(r"docs/[a-z-]+\.md", "\n".join(texts))  # no repository paths
    for topic in named:
        assert main(["docs", topic]) == 0, topic
