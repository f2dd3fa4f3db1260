"""The inspector in a real browser: find an actor, watch its workflow history grow live,
retry a failed workflow after fixing its cause, replay from a step, call an action, and
destroy an actor — against a real ``perdure serve`` (tests/scenarios/ui/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from perdure.client import Client
from tests.scenarios.ui.app import GATES_ENV
from tests.support.server import ServerProcess

from .helpers import Api, by_id, click, history_rows, text_of, wait_until

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver
    from selenium.webdriver.remote.webelement import WebElement


def _open_actor(browser: WebDriver, server: ServerProcess, actor_id: str) -> None:
    browser.get(f"{server.url}/ui/actors/{actor_id}")
    wait_until(browser, lambda d: text_of(d, "feed-state") == "live", "the live feed")
    # A marker that a reload would wipe: the page must update without one.
    browser.execute_script("window.perdureProbe = 'same page';")


def _same_page(browser: WebDriver) -> bool:
    return bool(browser.execute_script("return window.perdureProbe === 'same page';"))


def _entry(browser: WebDriver, location: str) -> dict[str, str]:
    return next((row for row in history_rows(browser) if row["location"] == location), {})


def _type_row(name: str) -> Callable[[WebDriver], list[str]]:
    """The overview's cells for type ``name`` (its rows are redrawn as counts refresh)."""
    path = f"//table[@id='types']//tr[th/a[text()='{name}']]/td"
    return lambda d: [cell.text for cell in d.find_elements(By.XPATH, path)]


def _records(browser: WebDriver) -> list[dict[str, str]]:
    return [row for row in history_rows(browser) if row["location"].endswith("/record")]


def test_find_an_actor_by_search(
    browser: WebDriver, server: ServerProcess, api: Api, tag: str
) -> None:
    wanted = api.create("notes", f"{tag}-alpha")
    api.create("notes", f"{tag}-beta")
    api.create("pipeline", f"other-{tag}")
    browser.get(f"{server.url}/ui/")
    wait_until(browser, lambda d: "notes" in text_of(d, "types"), "the actor types")
    # Each type with its kind and counts (other tests' actors count too).
    kind, total, awake = wait_until(browser, _type_row("notes"), "the notes type's row")
    assert kind == "actor"
    assert int(total) >= 2
    assert 0 <= int(awake) <= int(total)

    # `/` jumps to the search box from anywhere on the page.
    browser.find_element(By.TAG_NAME, "body").send_keys("/")
    search = by_id(browser, "search")
    assert browser.switch_to.active_element == search
    search.send_keys(f"{tag}-al")
    wait_until(
        browser,
        lambda d: (
            [r.text for r in d.find_elements(By.CSS_SELECTOR, "#actors tbody th")]
            == [f"{tag}-alpha"]
        ),
        "only the matching actor",
    )
    # The type filter narrows a search by key to one type.
    search.clear()
    search.send_keys(tag + Keys.ENTER)
    wait_until(
        browser,
        lambda d: len(d.find_elements(By.CSS_SELECTOR, "#actors tbody tr")) == 3,
        "three actors",
    )
    Select(by_id(browser, "filter-name")).select_by_value("pipeline")
    wait_until(
        browser,
        lambda d: (
            [r.text for r in d.find_elements(By.CSS_SELECTOR, "#actors tbody th")]
            == [f"other-{tag}"]
        ),
        "the pipeline actor only",
    )
    assert "name=pipeline" in browser.current_url  # the search lives in the URL
    # Just created, the actors are awake: none is asleep.
    Select(by_id(browser, "filter-status")).select_by_value("asleep")
    wait_until(browser, lambda d: text_of(d, "result-status") == "No actors match.", "no match")
    Select(by_id(browser, "filter-status")).select_by_value("all")

    Select(by_id(browser, "filter-name")).select_by_value("")
    search.clear()
    search.send_keys(wanted + Keys.ENTER)  # the id matches too
    click(browser, f"#actors tr[data-actor-id='{wanted}'] a", "the actor found by id")
    wait_until(browser, lambda d: text_of(d, "actor-title") == f"notes · {tag}-alpha", "its page")
    assert text_of(browser, "s-id") == wanted


def test_workflow_history_grows_live(
    browser: WebDriver, server: ServerProcess, api: Api, tag: str
) -> None:
    api.send("pipeline", tag, "jobs", {"n": 1})
    actor_id = api.create("pipeline", tag)
    _open_actor(browser, server, actor_id)
    wait_until(browser, lambda d: len(_records(d)) == 1, "the first record step")

    for n in (2, 3):
        api.send("pipeline", tag, "jobs", {"n": n})
        wait_until(browser, lambda d, n=n: len(_records(d)) == n, f"record step {n}")
    assert all(row["status"] == "completed" for row in _records(browser))
    # The state arrives by the feed too.
    wait_until(browser, lambda d: '"n": 3' in text_of(d, "state"), "the state with the third job")
    assert _same_page(browser), "the page reloaded"
    assert text_of(browser, "wf-status") == "running"


def test_retry_a_failed_workflow_after_fixing_its_cause(
    browser: WebDriver, server: ServerProcess, api: Api, gates: Path, tag: str
) -> None:
    gate = gates / tag
    gate.write_text("closed")
    api.send("pipeline", tag, "jobs", {"n": 1})
    api.send("pipeline", tag, "jobs", {"finish": tag})
    actor_id = api.create("pipeline", tag)
    _open_actor(browser, server, actor_id)

    wait_until(browser, lambda d: text_of(d, "wf-status") == "failed", "the workflow to fail")
    retry = by_id(browser, "wf-retry")
    assert retry.is_displayed()
    wait_until(browser, lambda d: "is closed" in text_of(d, "wf-error"), "the workflow error")
    failed = _entry(browser, "check-gate")
    assert failed["status"] != "completed"
    assert "is closed" in failed["detail"]
    assert failed["attempts"] != ""

    gate.unlink()  # the fix
    retry.click()
    wait_until(
        browser, lambda d: text_of(d, "wf-status") == "completed", "the workflow to complete"
    )
    wait_until(
        browser,
        lambda d: any(
            r["location"] == "finish" and r["status"] == "completed" for r in history_rows(d)
        ),
        "the finish step",
    )
    checked = _entry(browser, "check-gate")
    assert checked["status"] == "completed"
    # The failures stay on record, with the attempts they took (max_retries=1: two).
    assert "1 earlier error" in checked["detail"]
    assert "is closed: remove its file to open it (2 attempts)" in checked["detail"]
    assert not by_id(browser, "wf-retry").is_displayed()
    assert _same_page(browser)


def test_replay_from_a_step(browser: WebDriver, server: ServerProcess, api: Api, tag: str) -> None:
    api.send("pipeline", tag, "jobs", {"finish": tag})
    actor_id = api.create("pipeline", tag)
    _open_actor(browser, server, actor_id)
    wait_until(
        browser, lambda d: text_of(d, "wf-status") == "completed", "the workflow to complete"
    )
    wait_until(browser, lambda d: '"finished": 1' in text_of(d, "state"), "one finish")

    click(browser, "#history button[aria-label='Replay from check-gate']", "the replay button")
    dialog = by_id(browser, "confirm")
    wait_until(browser, lambda d: dialog.is_displayed(), "the confirmation")
    assert "check-gate" in text_of(browser, "confirm-text")
    by_id(browser, "confirm-ok").click()
    wait_until(browser, lambda d: not dialog.is_displayed(), "the dialog to close")
    # The steps from check-gate on ran again (the state is not rewound: finish counts).
    wait_until(browser, lambda d: '"finished": 2' in text_of(d, "state"), "finish to run again")
    wait_until(browser, lambda d: text_of(d, "wf-status") == "completed", "the replayed workflow")
    assert by_id(browser, "wf-op-error").get_attribute("hidden") is not None
    assert _same_page(browser)


def test_pause_resume_and_cancel_a_workflow(
    browser: WebDriver, server: ServerProcess, api: Api, tag: str
) -> None:
    api.send("pipeline", tag, "jobs", {"n": 1})
    actor_id = api.create("pipeline", tag)  # records the job, then waits for the next
    _open_actor(browser, server, actor_id)
    wait_until(browser, lambda d: len(_records(d)) == 1, "the first record step")
    wait_until(browser, lambda d: text_of(d, "wf-status") == "running", "the running workflow")
    assert not by_id(browser, "wf-resume").is_displayed()
    by_id(browser, "wf-pause").click()
    wait_until(browser, lambda d: text_of(d, "wf-status") == "paused", "the paused workflow")
    assert not by_id(browser, "wf-pause").is_displayed()
    by_id(browser, "wf-resume").click()
    wait_until(browser, lambda d: text_of(d, "wf-status") == "running", "the resumed workflow")

    by_id(browser, "wf-cancel").click()
    dialog = by_id(browser, "confirm")
    wait_until(browser, lambda d: dialog.is_displayed(), "the confirmation")
    by_id(browser, "confirm-ok").click()
    wait_until(browser, lambda d: text_of(d, "wf-status") == "cancelled", "the cancelled workflow")
    wait_until(browser, lambda d: "cancelled in the inspector" in text_of(d, "wf-error"), "why")
    assert not by_id(browser, "wf-cancel").is_displayed()
    assert not by_id(browser, "wf-pause").is_displayed()
    assert _same_page(browser)


def test_fork_from_a_step_keeps_the_old_run(
    browser: WebDriver, server: ServerProcess, api: Api, tag: str
) -> None:
    api.send("pipeline", tag, "jobs", {"finish": tag})
    actor_id = api.create("pipeline", tag)
    _open_actor(browser, server, actor_id)
    wait_until(
        browser, lambda d: text_of(d, "wf-status") == "completed", "the workflow to complete"
    )
    wait_until(browser, lambda d: '"finished": 1' in text_of(d, "state"), "one finish")

    click(browser, "#history button[aria-label='Fork from check-gate']", "the fork button")
    dialog = by_id(browser, "fork")
    wait_until(browser, lambda d: dialog.is_displayed(), "the fork dialog")
    assert "check-gate" in text_of(browser, "fork-text")
    by_id(browser, "fork-input").send_keys('{"reason": "fixed"}')
    by_id(browser, "fork-ok").click()
    wait_until(browser, lambda d: not dialog.is_displayed(), "the dialog to close")
    wait_until(browser, lambda d: '"finished": 2' in text_of(d, "state"), "finish to run again")
    wait_until(browser, lambda d: text_of(d, "wf-status") == "completed", "the forked run")
    view = api.http.get(f"/admin/actors/{actor_id}").json()["workflow"]
    assert view["run"] == 2
    assert view["input"] == {"reason": "fixed"}
    assert [run["run"] for run in view["runs"]] == [1]  # the old run, kept
    assert _same_page(browser)


def test_parent_and_child_workflows_link_to_each_other(
    browser: WebDriver, server: ServerProcess, api: Api, tag: str
) -> None:
    parent_id = api.create("family", tag)
    _open_actor(browser, server, parent_id)
    wait_until(browser, lambda d: "pipeline" in text_of(d, "wf-children"), "the child listed")
    assert "running" in text_of(browser, "wf-children")
    browser.find_element(By.CSS_SELECTOR, "#wf-children a").click()
    wait_until(browser, lambda d: text_of(d, "feed-state") == "live", "the child's page")
    wait_until(browser, lambda d: by_id(d, "wf-parent").is_displayed(), "the parent link")
    assert "family" in text_of(browser, "wf-parent")
    assert "at pipeline" in text_of(browser, "wf-parent")
    by_id(browser, "wf-parent-link").click()
    wait_until(browser, lambda d: text_of(d, "feed-state") == "live", "the parent's page")
    assert browser.current_url.endswith(f"/ui/actors/{parent_id}")


def test_actions_and_their_errors(
    browser: WebDriver, server: ServerProcess, api: Api, tag: str
) -> None:
    actor_id = api.create("notes", tag)
    _open_actor(browser, server, actor_id)
    form = _submit(browser, "action-form", {"action-name": "add", "action-args": '["first"]'})
    wait_until(
        browser, lambda d: form.find_element(By.CSS_SELECTOR, ".result").text == "→ 1", "the output"
    )
    wait_until(browser, lambda d: '"first"' in text_of(d, "state"), "the new state")

    # An API error shows its group.code and message inline.
    _submit(browser, "action-form", {"action-name": "nope"})
    error = form.find_element(By.CSS_SELECTOR, ".error")
    wait_until(browser, lambda d: error.is_displayed(), "the error")
    identifier = error.find_element(By.TAG_NAME, "code").text
    assert "." in identifier
    assert error.text.startswith(f"{identifier}: ")

    # A schedule shows up and can be cancelled.
    _submit(browser, "action-form", {"action-name": "plan", "action-args": "[]"})
    wait_until(browser, lambda d: _count(d, "#schedules li") == 2, "two schedules")
    assert "tidy" in text_of(browser, "schedules")
    click(browser, "#schedules button[aria-label='Cancel schedule tidy']", "cancel tidy")
    wait_until(browser, lambda d: _count(d, "#schedules li") == 1, "one schedule left")

    # A queue message sent from the page shows up in the queue.
    queue_form = _submit(
        browser, "queue-form", {"queue-name": "inbox", "queue-body": '{"hello": "inbox"}'}
    )
    wait_until(browser, lambda d: "hello" in text_of(d, "queue"), "the message in the queue")
    assert text_of(browser, "queue-count") == "(1)"
    _submit(browser, "queue-form", {"queue-body": "{not json"})
    error = queue_form.find_element(By.CSS_SELECTOR, ".error")
    wait_until(browser, lambda d: "not valid JSON" in error.text, "the bad-JSON error")
    assert _same_page(browser)


def _submit(browser: WebDriver, form_id: str, fields: dict[str, str]) -> WebElement:
    """Fill ``fields`` (element id → text) and submit the form; the form."""
    for field_id, text in fields.items():
        field = by_id(browser, field_id)
        field.clear()
        field.send_keys(text)
    form = by_id(browser, form_id)
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    return form


def _count(browser: WebDriver, css: str) -> int:
    return len(browser.find_elements(By.CSS_SELECTOR, css))


def test_schedule_fires_show_live(
    browser: WebDriver, server: ServerProcess, api: Api, tag: str
) -> None:
    actor_id = api.create("notes", tag)
    _open_actor(browser, server, actor_id)
    api.call(actor_id, "tick")  # a cron job every 0.3 s, keeping its last 3 fires
    history = "#schedules li[data-schedule-id] summary"
    wait_until(
        browser,
        lambda d: d.find_element(By.CSS_SELECTOR, history).text == "Fire history (3)",
        "three fires kept",
    )
    assert "every 300 ms" in text_of(browser, "schedules")
    # Opened, the fire history stays open while new fires redraw the list.
    click(browser, history, "the fire history")
    rows = "#schedules details[open] tbody tr"
    wait_until(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, rows)) == 3, "the fires")
    fired = api.details(actor_id).json()["schedules"][0]["last_run_at"]
    wait_until(
        browser,
        lambda d: (
            api.details(actor_id).json()["schedules"][0]["last_run_at"] != fired
            and len(d.find_elements(By.CSS_SELECTOR, rows)) == 3
        ),
        "a later fire, the history still open",
    )
    results = wait_until(
        browser,
        lambda d: {b.text for b in d.find_elements(By.CSS_SELECTOR, f"{rows} .badge")},
        "the fires' results",
    )
    assert results <= {"ok", "running"}
    assert _same_page(browser)


def test_connections_and_events_show_live(
    browser: WebDriver, server: ServerProcess, api: Api, tag: str
) -> None:
    actor_id = api.create("notes", tag)
    _open_actor(browser, server, actor_id)
    with Client(server.url) as client:
        conn = client.actor("notes").get_or_create([tag]).connect()
        conn.on("added", lambda text: None)
        conn.wait_open()
        wait_until(browser, lambda d: "added" in text_of(d, "connections"), "the subscriber")
        assert text_of(browser, "connections-count") == "(1)"
        api.call(actor_id, "add", "seen by the page")
        wait_until(browser, lambda d: "seen by the page" in text_of(d, "events"), "the event")
        conn.dispose()
        wait_until(browser, lambda d: by_id(d, "connections-empty").is_displayed(), "no one")
    assert _same_page(browser)


def test_destroy_an_actor(browser: WebDriver, server: ServerProcess, api: Api, tag: str) -> None:
    actor_id = api.create("notes", tag)
    _open_actor(browser, server, actor_id)

    destroy = by_id(browser, "destroy")
    destroy.send_keys(Keys.ENTER)  # by keyboard
    dialog = by_id(browser, "confirm")
    wait_until(browser, lambda d: dialog.is_displayed(), "the confirmation")
    assert browser.switch_to.active_element == by_id(browser, "confirm-cancel")
    browser.switch_to.active_element.send_keys(Keys.ESCAPE)  # changing one's mind
    wait_until(browser, lambda d: not dialog.is_displayed(), "the dialog to close")
    assert browser.switch_to.active_element == destroy
    assert api.details(actor_id).status_code == 200

    by_id(browser, "destroy").click()
    wait_until(browser, lambda d: dialog.is_displayed(), "the confirmation")
    by_id(browser, "confirm-ok").click()
    wait_until(browser, lambda d: "destroyed" in text_of(d, "banner"), "the destroyed banner")
    assert not by_id(browser, "destroy").is_enabled()
    assert api.details(actor_id).status_code == 404


def test_an_unknown_actor(browser: WebDriver, server: ServerProcess) -> None:
    browser.get(f"{server.url}/ui/actors/no-such-actor")
    wait_until(browser, lambda d: "actor.not_found" in text_of(d, "banner"), "the refusal")
    assert text_of(browser, "feed-state") == "closed"


def test_paging_through_results(
    browser: WebDriver, server: ServerProcess, api: Api, tag: str
) -> None:
    for n in range(27):  # one page and a bit (25 a page)
        api.create("notes", f"{tag}-{n:02d}")
    browser.get(f"{server.url}/ui/?q={tag}")
    rows = "#actors tbody tr"
    wait_until(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, rows)) == 25, "page 1")
    first_page = {row.text for row in browser.find_elements(By.CSS_SELECTOR, rows)}
    wait_until(browser, lambda d: by_id(d, "page-next").is_enabled(), "a next page")
    assert not by_id(browser, "page-prev").is_enabled()
    by_id(browser, "page-next").click()
    wait_until(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, rows)) == 2, "page 2")
    assert text_of(browser, "page-number") == "Page 2"
    second_page = {row.text for row in browser.find_elements(By.CSS_SELECTOR, rows)}
    assert not first_page & second_page
    by_id(browser, "page-prev").click()
    wait_until(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, rows)) == 25, "page 1 again")


def test_kv_records_paged_and_filtered(
    browser: WebDriver, server: ServerProcess, api: Api, tag: str
) -> None:
    actor_id = api.create("notes", tag)
    assert api.call(actor_id, "remember", 53) == 53  # and a bytes key: 54 records
    _open_actor(browser, server, actor_id)
    rows = "#kv tbody tr"
    wait_until(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, rows)) == 50, "page 1")
    cells = [cell.text for cell in browser.find_elements(By.CSS_SELECTOR, f"{rows} td")]
    # Key, value, stored size: the bytes key first, then the string keys in order.
    assert cells[:5] == [
        '["$Uint8Array","AXJhdw=="]',
        '"under a bytes key"',
        "18",
        "note:000",
        '{"n":0}',
    ]
    assert int(cells[5]) > 0
    wait_until(browser, lambda d: by_id(d, "kv-next").is_enabled(), "a next page")
    by_id(browser, "kv-next").click()
    wait_until(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, rows)) == 4, "page 2")
    assert text_of(browser, "kv-page") == "Page 2"
    assert browser.find_element(By.CSS_SELECTOR, f"{rows} td code").text == "note:049"
    assert not by_id(browser, "kv-next").is_enabled()
    _submit(browser, "kv-filter", {"kv-prefix": "note:05"})
    wait_until(
        browser,
        lambda d: (
            [c.text for c in d.find_elements(By.CSS_SELECTOR, f"{rows} td:first-child")]
            == ["note:050", "note:051", "note:052"]
        ),
        "the filtered records",
    )
    assert text_of(browser, "kv-page") == "Page 1"
    # An action that writes only KV records sends nothing on the live feed (the page does
    # not show them by itself: checked by hand, it waits in vain); Reload reads them.
    api.call(actor_id, "remember", 56)
    by_id(browser, "kv-reload").click()
    wait_until(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, rows)) == 6, "reloaded")
    assert _same_page(browser)


def test_the_page_reconnects_after_a_restart(
    browser: WebDriver, tmp_path: Path, gates: Path, tag: str
) -> None:
    process = ServerProcess(
        "tests.scenarios.ui.app:registry", tmp_path, env={GATES_ENV: str(gates)}
    )
    process.start()
    try:
        with Api(process.url) as api:
            api.send("pipeline", tag, "jobs", {"n": 1})
            actor_id = api.create("pipeline", tag)
            _open_actor(browser, process, actor_id)
            wait_until(browser, lambda d: len(_records(d)) == 1, "the first record step")
            process.terminate()
            wait_until(browser, lambda d: text_of(d, "feed-state") != "live", "the feed to drop")
            process.start()
            wait_until(browser, lambda d: text_of(d, "feed-state") == "live", "the feed again")
            api.send("pipeline", tag, "jobs", {"n": 2})
            wait_until(browser, lambda d: len(_records(d)) == 2, "a step after the restart")
        assert by_id(browser, "banner").get_attribute("hidden") is not None
        assert _same_page(browser)
    finally:
        process.kill()


def test_dark_when_the_system_is(browser: WebDriver, server: ServerProcess) -> None:
    background = "return getComputedStyle(document.body).backgroundColor;"
    browser.get(f"{server.url}/ui/")
    light = browser.execute_script(background)
    try:
        browser.execute_cdp_cmd(
            "Emulation.setEmulatedMedia",
            {"features": [{"name": "prefers-color-scheme", "value": "dark"}]},
        )
        dark = browser.execute_script(background)
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    assert _luminance(light) > 0.8
    assert _luminance(dark) < 0.2


def _luminance(css_color: str) -> float:
    """0 (black) to 1 (white), from ``rgb(r, g, b)``."""
    red, green, blue = (int(part) for part in css_color[css_color.index("(") + 1 : -1].split(","))
    return (0.2126 * red + 0.7152 * green + 0.0722 * blue) / 255
