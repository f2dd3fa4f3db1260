"""The inspector's templates and static files ship with a (non-editable) install: each
one matches a ``[tool.setuptools.package-data]`` pattern, and the server serves only
kinds of files it knows."""

from __future__ import annotations

import fnmatch
import tomllib

from perdure.server.admin.ui.routes import _asset
from tests.support.server import REPO_ROOT

UI = REPO_ROOT / "src" / "perdure" / "server" / "admin" / "ui"


def test_every_ui_file_is_package_data() -> None:
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["perdure"]
    package = UI.parents[2]  # src/perdure
    files = [p for p in UI.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")]
    assert files
    for path in files:
        relative = path.relative_to(package).as_posix()
        assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns), relative


def test_every_static_file_is_served() -> None:
    # /ui/static/NAME answers only for the media types it knows.
    for path in (UI / "static").iterdir():
        assert _asset(path.name) is not None, path.name
