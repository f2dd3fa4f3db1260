"""CORS (``perdure serve --cors-origin``): preflights answered for the allowed origins,
a page of another origin refused; without a policy, no CORS headers at all. The browser
half runs a headless Chromium (Debian's, via Selenium: tests/support/browser.py) on pages
served from two other origins."""

from __future__ import annotations

import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.browser import BrowserMissing, find_browser, start_browser
from tests.support.server import ServerProcess, free_port

from .access_server import TOKEN, access_server, new_key

WAIT = 10.0
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


class _Pages:
    """A static page server on 127.0.0.1 (its own origin)."""

    def __init__(self, root: Path) -> None:
        handler = _quiet_handler(root)
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(WAIT)


def _quiet_handler(root: Path) -> type[http.server.SimpleHTTPRequestHandler]:
    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, format: str, *args: Any) -> None:
            """No request log on stderr."""

    return Handler


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[_Pages, _Pages]]:
    root = tmp_path_factory.mktemp("pages")
    (root / "index.html").write_text("<!doctype html><title>page</title><p>page</p>\n")
    allowed, other = _Pages(root), _Pages(root)
    try:
        yield allowed, other
    finally:
        allowed.close()
        other.close()


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, pages: tuple[_Pages, _Pages]
) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("cors")
    with access_server(data, "--cors-origin", pages[0].origin) as process:
        yield process


def _action(server: ServerProcess, key: str) -> str:
    return f"{server.url}/gateway/guarded/action/whoami?rvt-method=getOrCreate&rvt-key={key}"


def _actors(server: ServerProcess, key: str) -> int:
    response = httpx.get(
        f"{server.url}/actors",
        params={"name": "guarded", "key": key},
        headers={"authorization": f"Bearer {TOKEN}"},
        timeout=WAIT,
    )
    assert response.status_code == 200, response.text
    return len(response.json()["actors"])


def test_preflight_of_an_allowed_origin(
    server: ServerProcess, pages: tuple[_Pages, _Pages]
) -> None:
    allowed = pages[0].origin
    response = httpx.options(
        _action(server, new_key()),
        headers={
            "origin": allowed,
            "access-control-request-method": "POST",
            "access-control-request-headers": "content-type,x-rivet-encoding,x-rivet-token",
        },
        timeout=WAIT,
    )
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == allowed
    assert response.headers["access-control-allow-credentials"] == "true"
    offered = {h.strip() for h in response.headers["access-control-allow-headers"].split(",")}
    assert {"content-type", "x-rivet-encoding", "x-rivet-conn-params", "x-rivet-token"} <= offered
    assert "POST" in response.headers["access-control-allow-methods"]


def test_another_origin_is_refused(server: ServerProcess, pages: tuple[_Pages, _Pages]) -> None:
    key = new_key()
    other = pages[1].origin
    preflight = httpx.options(
        _action(server, key),
        headers={"origin": other, "access-control-request-method": "POST"},
        timeout=WAIT,
    )
    assert preflight.status_code == 403
    assert "access-control-allow-origin" not in preflight.headers
    # A request sent without a preflight is refused too, and does nothing.
    direct = httpx.post(
        _action(server, key),
        json={"args": []},
        headers={"origin": other, "x-rivet-token": TOKEN},
        timeout=WAIT,
    )
    assert direct.status_code == 403
    assert (direct.json()["group"], direct.json()["code"]) == ("cors", "origin_not_allowed")
    assert _actors(server, key) == 0


def test_without_a_policy_there_are_no_cors_headers(tmp_path: Path) -> None:
    with access_server(tmp_path / "data", token=None) as plain:
        response = httpx.post(
            _action(plain, new_key()),
            json={"args": []},
            headers={"origin": "http://page.test"},
            timeout=WAIT,
        )
        preflight = httpx.options(
            _action(plain, new_key()),
            headers={"origin": "http://page.test", "access-control-request-method": "POST"},
            timeout=WAIT,
        )
    assert response.status_code == 200
    assert not any(name.startswith("access-control-") for name in response.headers)
    assert preflight.status_code == 405
    assert not any(name.startswith("access-control-") for name in preflight.headers)


# ------------------------------------------------------------------- in a browser

_FETCH = """
const [url, token, done] = arguments;
fetch(url, {
  method: "POST",
  credentials: "include",  // as the official client's fetch
  headers: {"content-type": "application/json", "x-rivet-encoding": "json", "x-rivet-token": token},
  body: JSON.stringify({args: []}),
}).then(
  async (response) => done({ok: true, status: response.status, body: await response.json(),
                            error: response.headers.get("x-rivet-error")}),
  (error) => done({ok: false, error: String(error)}),
);
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        find_browser()
    except BrowserMissing as exc:  # a local run without Chromium skips; CI must have it
        (pytest.fail if IN_CI else pytest.skip)(f"the CORS browser tests need: {exc}")
    driver = start_browser()
    driver.set_script_timeout(WAIT)
    yield driver
    driver.quit()


def _fetch_from(browser: Any, page: _Pages, url: str, token: str = TOKEN) -> dict[str, Any]:
    browser.get(f"{page.origin}/index.html")
    result: dict[str, Any] = browser.execute_async_script(_FETCH, url, token)
    return result


def test_a_page_of_the_allowed_origin_calls_an_action(
    server: ServerProcess, pages: tuple[_Pages, _Pages], browser: Any
) -> None:
    result = _fetch_from(browser, pages[0], _action(server, new_key()))
    assert result["ok"], result
    assert result["status"] == 200
    seen = result["body"]["output"]["action"]
    assert seen["origin"] == pages[0].origin  # c.request shows the page's origin
    # The page reads the error code of a refused call (the CORS headers are on errors too).
    refused = _fetch_from(browser, pages[0], _action(server, new_key()), "wrong-token-0123456789")
    assert refused["ok"], refused
    assert refused["status"] == 403
    assert refused["error"] == "auth.forbidden"


def test_the_browser_refuses_a_page_of_another_origin(
    server: ServerProcess, pages: tuple[_Pages, _Pages], browser: Any
) -> None:
    key = new_key()
    result = _fetch_from(browser, pages[1], _action(server, key))
    assert not result["ok"], result
    assert "Failed to fetch" in result["error"]
    assert _actors(server, key) == 0
