"""Signing in to the inspector of a server with an admin token, and the sign-in route's
rules (cookie flags, cross-site forms, where it redirects)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import httpx
from selenium.webdriver.common.by import By

from tests.support.server import ServerProcess

from .conftest import ADMIN_TOKEN
from .helpers import by_id, text_of, wait_until

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver


def _sign_in(browser: WebDriver, token: str) -> None:
    field = by_id(browser, "token")
    field.clear()
    field.send_keys(token)
    browser.find_element(By.CSS_SELECTOR, "#login-form button[type=submit]").click()


def test_sign_in_with_the_token(browser: WebDriver, token_server: ServerProcess) -> None:
    browser.delete_all_cookies()
    browser.get(f"{token_server.url}/ui/")
    # Refused for lack of a token: the sign-in page, not a JSON error.
    wait_until(browser, lambda d: d.find_elements(By.ID, "login-form"), "the sign-in form")
    assert browser.switch_to.active_element == by_id(browser, "token")

    _sign_in(browser, "not-the-token")
    wait_until(
        browser,
        lambda d: "not this server's admin token" in text_of(d, "login-problem"),
        "the refusal",
    )
    assert browser.get_cookie("perdure_admin") is None

    _sign_in(browser, ADMIN_TOKEN)
    wait_until(browser, lambda d: "pipeline" in text_of(d, "types"), "the overview, with data")
    assert browser.current_url == f"{token_server.url}/ui/"
    cookie = browser.get_cookie("perdure_admin")
    assert cookie is not None
    assert cookie["value"] == ADMIN_TOKEN
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert cookie["path"] == "/"

    browser.find_element(By.CSS_SELECTOR, "form.signout button").click()
    wait_until(browser, lambda d: d.find_elements(By.ID, "login-form"), "the sign-in form again")
    assert browser.get_cookie("perdure_admin") is None
    browser.get(f"{token_server.url}/ui/")
    wait_until(browser, lambda d: d.find_elements(By.ID, "login-form"), "the overview refused")


def test_sign_in_returns_to_the_page_asked_for(
    browser: WebDriver, token_server: ServerProcess
) -> None:
    browser.delete_all_cookies()
    with httpx.Client(
        base_url=token_server.url, headers={"authorization": f"Bearer {ADMIN_TOKEN}"}
    ) as http:
        created = http.put("/actors", json={"name": "notes", "key": "back-here"})
        actor_id = created.json()["actor"]["actor_id"]
    browser.get(f"{token_server.url}/ui/actors/{actor_id}")
    wait_until(browser, lambda d: d.find_elements(By.ID, "login-form"), "the sign-in form")
    _sign_in(browser, ADMIN_TOKEN)
    wait_until(browser, lambda d: text_of(d, "feed-state") == "live", "the actor page, live")
    assert text_of(browser, "s-id") == actor_id


def test_sign_in_rules(token_server: ServerProcess) -> None:
    with httpx.Client(base_url=token_server.url, timeout=10) as http:
        page = http.get("/ui/")
        assert page.status_code == 401
        assert "text/html" in page.headers["content-type"]
        assert 'id="login-form"' in page.text
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]

        # A form posted from another site is refused, whatever token it carries.
        forged = http.post(
            "/ui/login",
            data={"token": ADMIN_TOKEN},
            headers={"origin": "http://evil.example", "sec-fetch-site": "cross-site"},
        )
        assert forged.status_code == 403
        assert "set-cookie" not in forged.headers

        signed = http.post(
            "/ui/login", data={"token": ADMIN_TOKEN, "next": "https://evil.example/"}
        )
        assert signed.status_code == 303
        assert signed.headers["location"] == "/ui/"  # only inspector paths
        cookie = signed.headers["set-cookie"]
        assert cookie.startswith(f"perdure_admin={ADMIN_TOKEN};")
        for flag in ("HttpOnly", "Path=/", "SameSite=strict"):
            assert flag.lower() in cookie.lower()

        assert http.get("/ui/static/inspector.css").status_code == 200  # the sign-in page's
        assert http.get("/ui/static/nothing.js").status_code == 404


def test_no_admin_turns_the_inspector_off(tmp_path: Path) -> None:
    process = ServerProcess("tests.scenarios.ui.app:registry", tmp_path, extra_args=["--no-admin"])
    process.start()
    try:
        with httpx.Client(base_url=process.url, timeout=10) as http:
            for path in ("/ui/", "/ui/login", "/ui/static/inspector.css"):
                answer = http.get(path)
                assert answer.status_code == 403, path
                assert "admin.disabled" in answer.text
    finally:
        process.kill()


def test_loopback_needs_no_token(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as http:
        assert http.get("/ui/").status_code == 200
        assert http.get("/ui", follow_redirects=False).headers["location"] == "/ui/"
        # Nothing to sign in to: the sign-in page sends a loopback browser on.
        login = http.get("/ui/login?next=/ui/actors/x", follow_redirects=False)
        assert login.status_code == 303
        assert login.headers["location"] == "/ui/actors/x"
        # A DNS name pointed at 127.0.0.1 (DNS rebinding) does not count as loopback.
        rebound = http.get("/ui/", headers={"host": "rebind.example"})
        assert rebound.status_code == 403
        assert "admin.forbidden" in rebound.text


def test_a_link_from_another_site_asks_to_continue(server: ServerProcess) -> None:
    # The access rule refuses whatever another site starts, links included: the page
    # offers the same link, which the browser then follows as this site's own.
    with httpx.Client(base_url=server.url, timeout=10) as http:
        followed = http.get(
            "/ui/?q=orders",
            headers={"sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate"},
        )
        assert followed.status_code == 403
        assert 'id="continue" href="/ui/?q=orders"' in followed.text
        fetched = http.get(
            "/ui/", headers={"sec-fetch-site": "cross-site", "sec-fetch-mode": "cors"}
        )
        assert fetched.status_code == 403
        assert 'id="continue"' not in fetched.text
