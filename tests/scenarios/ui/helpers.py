"""Helpers of the inspector UI tests: HTTP calls to the server, bounded browser waits."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from perdure.keys import serialize_key

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver
    from selenium.webdriver.remote.webelement import WebElement

T = TypeVar("T")
TIMEOUT = 20.0  # seconds: a 2-core CI machine runs the browser and the server side by side


class Api:
    """The server seen from outside: create actors, send them messages, read them."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(base_url=url, timeout=TIMEOUT)

    def __enter__(self) -> Api:
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.close()

    def create(self, name: str, *key: str) -> str:
        """Get or create the actor ``name``/``key`` (management API); its id."""
        answer = self.http.put("/actors", json={"name": name, "key": serialize_key(key)})
        answer.raise_for_status()
        return str(answer.json()["actor"]["actor_id"])

    def send(self, name: str, key: str, queue: str, body: Any) -> None:
        """Send a queue message through the HTTP gateway (as an application would)."""
        answer = self.http.post(
            f"/gateway/{name}/queue/{queue}",
            params={"rvt-namespace": "default", "rvt-method": "getOrCreate", "rvt-key": key},
            json={"name": queue, "body": body},
        )
        answer.raise_for_status()

    def call(self, actor_id: str, action: str, *args: Any) -> Any:
        """Call an action through the admin API; its output."""
        answer = self.http.post(f"/admin/actors/{actor_id}/actions/{action}", json={"args": args})
        answer.raise_for_status()
        return answer.json()["output"]

    def details(self, actor_id: str) -> httpx.Response:
        """``GET /admin/actors/{id}`` (the response, so a test can expect a 404)."""
        return self.http.get(f"/admin/actors/{actor_id}")


def wait_until(driver: WebDriver, condition: Callable[[WebDriver], T], what: str) -> T:
    """``condition``'s first truthy value, or a failure naming ``what`` after TIMEOUT."""
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(driver, TIMEOUT, ignored_exceptions=[StaleElementReferenceException])
    try:
        return wait.until(condition)
    except TimeoutException:
        raise AssertionError(f"timed out after {TIMEOUT} s waiting for {what}") from None


def click(driver: WebDriver, css: str, what: str) -> None:
    """Click the element ``css`` selects, finding it again if a redraw replaced it."""
    from selenium.webdriver.common.by import By

    wait_until(driver, lambda d: d.find_element(By.CSS_SELECTOR, css).click() or True, what)


def by_id(driver: WebDriver, element_id: str) -> WebElement:
    """The element with ``element_id``."""
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, element_id)


def text_of(driver: WebDriver, element_id: str) -> str:
    """The visible text of the element with ``element_id``."""
    return by_id(driver, element_id).text


def history_rows(driver: WebDriver) -> list[dict[str, str]]:
    """The workflow history table as it stands: location, seq, status, kind, attempts, detail."""
    rows = driver.execute_script(
        """return [...document.querySelectorAll('#history tbody tr')].map((row) => ({
             location: row.dataset.location, seq: row.dataset.seq, status: row.dataset.status,
             kind: row.cells[2].textContent, attempts: row.cells[4].textContent,
             detail: row.cells[5].textContent }));"""
    )
    return list(rows)
