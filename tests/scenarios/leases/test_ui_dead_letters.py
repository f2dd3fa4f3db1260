"""The inspector's actor page shows an actor's dead letters and requeues or drops them,
in a real headless Chromium against a real ``perdure serve`` (tests/support/browser.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import httpx
import pytest

from perdure.client import Client
from tests.scenarios.ui.helpers import by_id, text_of, wait_until
from tests.support.browser import BrowserMissing, find_browser, start_browser

from .conftest import StartServer
from .test_dead_letters_admin import _two_dead_letters

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    """A headless Chromium; without one the test skips here and fails in CI."""
    try:
        find_browser()
    except BrowserMissing as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI needs the inspector's browser tests: {exc}")
        pytest.skip(str(exc))
    driver = start_browser()
    try:
        yield driver
    finally:
        driver.quit()


def _items(browser: WebDriver, list_id: str) -> list[str]:
    texts: list[str] = browser.execute_script(
        f"return [...document.querySelectorAll('#{list_id} > li')].map((li) => li.innerText);"
    )
    return texts


def test_requeue_and_drop_dead_letters_in_the_inspector(
    browser: WebDriver, start_server: StartServer
) -> None:
    from selenium.webdriver.common.by import By

    server = start_server(30.0)
    actor_id = _two_dead_letters(server.url, "ui")
    browser.get(f"{server.url}/ui/actors/{actor_id}")
    wait_until(browser, lambda d: text_of(d, "feed-state") == "live", "the live feed")
    letters = wait_until(browser, lambda d: _items(d, "dead-letters"), "the dead letters")
    assert len(letters) == 2
    assert letters[0].splitlines()[:3] == ["jobs", "#1", "3 attempts"]
    assert "max_attempts 3); last error: bad" in letters[0]
    assert text_of(browser, "dead-letters-count") == "(2)"
    if os.environ.get("PERDURE_SCREENSHOT"):
        browser.save_screenshot(os.environ["PERDURE_SCREENSHOT"])
    assert by_id(browser, "queue-empty").is_displayed()

    browser.find_element(By.CSS_SELECTOR, '[aria-label="Requeue dead letter 1"]').click()
    wait_until(browser, lambda d: len(_items(d, "dead-letters")) == 1, "the requeued one to go")
    wait_until(browser, lambda d: len(_items(d, "queue")) == 1, "it in the live queue")
    with Client(server.url) as client:
        worker = client.worker.get_or_create("ui")
        assert worker.take() == {"id": 1, "body": {"n": 1}, "attempts": 1}
        worker.complete(1)

    browser.find_element(By.CSS_SELECTOR, '[aria-label="Drop dead letter 2"]').click()
    dialog = by_id(browser, "confirm")
    wait_until(browser, lambda d: dialog.is_displayed(), "the confirmation")
    assert "deleted for good" in text_of(browser, "confirm-text")
    by_id(browser, "confirm-ok").click()
    wait_until(browser, lambda d: by_id(d, "dead-letters-empty").is_displayed(), "none left")
    wait_until(browser, lambda d: by_id(d, "queue-empty").is_displayed(), "an empty queue")
    answer = httpx.get(f"{server.url}/admin/actors/{actor_id}/dead-letters", timeout=10)
    assert answer.json() == {"dead_letters": []}
