"""Fixtures of the inspector UI tests: a real ``perdure serve`` of ``tests.scenarios.ui.app`` and
a headless Chromium (tests/support/browser.py).

Without Chromium, chromedriver or Selenium the tests skip locally and fail in CI
(``CI=true``), where .ci/run installs the browser.
"""

from __future__ import annotations

import importlib.util
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.scenarios.ui.app import GATES_ENV
from tests.support.browser import BrowserMissing, find_browser, start_browser
from tests.support.server import ServerProcess

from .helpers import Api

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

ADMIN_TOKEN = "ui-test-token-0123"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

if importlib.util.find_spec("selenium") is None and not IN_CI:
    # The test modules import Selenium (the test extra installs it); without it they are
    # not collected here, while CI reports the import error.
    collect_ignore_glob = ["test_*.py"]


def _require_browser() -> None:
    try:
        find_browser()
    except BrowserMissing as exc:
        if IN_CI:
            pytest.fail(f"CI needs the inspector's browser tests: {exc}")
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def gates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder whose files close the ``pipeline`` workflow's gates."""
    return tmp_path_factory.mktemp("gates")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, gates: Path) -> Iterator[ServerProcess]:
    """``perdure serve tests.scenarios.ui.app:registry`` on loopback, no admin token."""
    process = ServerProcess(
        "tests.scenarios.ui.app:registry",
        tmp_path_factory.mktemp("ui-data"),
        env={GATES_ENV: str(gates)},
    )
    process.start()
    yield process
    process.kill()


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """The same app, with an admin token."""
    process = ServerProcess(
        "tests.scenarios.ui.app:registry",
        tmp_path_factory.mktemp("ui-token-data"),
        extra_args=["--admin-token", ADMIN_TOKEN],
    )
    process.start()
    yield process
    process.kill()


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    """One headless Chromium for a test module (starting one is the slow part)."""
    _require_browser()
    driver = start_browser()
    yield driver
    driver.quit()


@pytest.fixture
def api(server: ServerProcess) -> Iterator[Api]:
    """HTTP calls to the server under test (gateway, management and admin API)."""
    with Api(server.url) as client:
        yield client


@pytest.fixture
def tag() -> str:
    """A word unique to this test, for keys that no other test's search will match."""
    return uuid.uuid4().hex[:8]
