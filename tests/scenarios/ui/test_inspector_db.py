"""The inspector's "SQL database" card in a real browser: the tables with their schema,
a table's rows a page at a time, the read-only query box (a statement that writes shows
``db.read_only``), every value shown as text (a row holding HTML runs nothing), and no
card for an actor without ``db=``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from selenium.webdriver.common.by import By

from tests.scenarios.ui.app import HOSTILE
from tests.support.server import ServerProcess

from .helpers import Api, by_id, text_of, wait_until

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

ROWS = "#db-rows tbody tr"


def _cells(browser: WebDriver, css: str) -> list[str]:
    return [cell.text for cell in browser.find_elements(By.CSS_SELECTOR, css)]


def test_tables_rows_and_a_read_only_query(
    browser: WebDriver, server: ServerProcess, api: Api, tag: str
) -> None:
    actor_id = api.create("ledger", tag)
    assert api.call(actor_id, "write", 53) == 53
    browser.get(f"{server.url}/ui/actors/{actor_id}")
    table = wait_until(
        browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#db-tables li"), "the tables"
    )
    assert table[0].text == ("entries table (id INTEGER PRIMARY KEY, memo TEXT NOT NULL, raw BLOB)")
    table[0].find_element(By.CSS_SELECTOR, "button").click()
    wait_until(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ROWS)) == 50, "page 1")
    assert _cells(browser, "#db-rows thead th") == ["id", "memo", "raw"]
    assert _cells(browser, f"{ROWS}:first-child td") == [
        "1",
        f"{HOSTILE}1",
        '["$Uint8Array","AP8="]',
    ]
    assert text_of(browser, "db-rows-page") == "Rows 1–50 of 53"
    by_id(browser, "db-next").click()
    wait_until(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ROWS)) == 3, "page 2")
    assert not by_id(browser, "db-next").is_enabled()
    sql = by_id(browser, "db-sql")
    sql.send_keys("SELECT count(*) AS n, max(memo) AS last FROM entries")
    by_id(browser, "db-query-form").find_element(By.CSS_SELECTOR, "button").click()
    wait_until(
        browser, lambda d: _cells(d, "#db-result tbody td") == ["53", f"{HOSTILE}9"], "the answer"
    )
    sql.clear()
    sql.send_keys("DELETE FROM entries")
    by_id(browser, "db-query-form").find_element(By.CSS_SELECTOR, "button").click()
    wait_until(browser, lambda d: "db.read_only" in text_of(d, "db-query-error"), "the refusal")
    # Nothing was deleted; a row written since shows on Reload (the card reads again).
    assert api.call(actor_id, "write", 1) == 1
    by_id(browser, "db-reload").click()
    wait_until(browser, lambda d: text_of(d, "db-rows-page") == "Rows 51–54 of 54", "reloaded")
    # Values went in as text: no element was made of them, no script ran.
    assert not browser.find_elements(By.CSS_SELECTOR, "#db-card img")
    assert browser.execute_script("return window.perdureXss === undefined;")


def test_no_card_without_a_database(
    browser: WebDriver, server: ServerProcess, api: Api, tag: str
) -> None:
    actor_id = api.create("notes", tag)
    browser.get(f"{server.url}/ui/actors/{actor_id}")
    wait_until(browser, lambda d: text_of(d, "feed-state") == "live", "the live feed")
    assert not by_id(browser, "db-card").is_displayed()
