"""The inspector's actor page shows a queue's limits and its busiest keys, in a real
headless Chromium against a real ``perdure serve`` (tests/support/browser.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from perdure.client import Client
from tests.scenarios.ui.helpers import wait_until
from tests.support.server import ServerProcess

from .test_ui_dead_letters import _items, browser

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

__all__ = ["browser"]  # the fixture, shared with the dead letters' page test

pytestmark = pytest.mark.timeout(120)


def test_the_limits_of_a_queue_in_the_inspector(browser: WebDriver, tmp_path: Path) -> None:
    server = ServerProcess("tests.support.apps.tenant_limits:registry", tmp_path).start()
    try:
        with Client(server.url) as client:
            jobs = client.jobs.get_or_create("ui")
            for tenant in ("acme", "acme", "acme", "globex"):
                jobs.send("jobs", {"tenant": tenant})
            assert len(jobs.take(4)) == 3  # acme's third waits for a slot
            actor_id = jobs.resolve()
        browser.get(f"{server.url}/ui/actors/{actor_id}")
        items = wait_until(browser, lambda d: _items(d, "limits"), "the limits")
    finally:
        server.kill()
    assert items[0].splitlines() == [
        "jobs",
        "at most 2 in progress, 10 per 1 s per tenant",
        "3 in progress · 2 keys busy",
        "Key\tIn progress\tStarted in window",
        "acme\t2\t2",
        "globex\t1\t1",
    ]
