"""CORS (``perdure serve --cors-origin``): preflights answered for the allowed origins,
a page of another origin refused; without a policy, no CORS headers at all. The browser
half runs a headless Chromium (Debian's, via Selenium: tests/support/browser.py) on pages
served from two other origins."""

from __future__ import annotations

import http.server
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect
from websockets.typing import Origin, Subprotocol

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


def _refusals(server: ServerProcess, reason: str) -> int:
    """``perdure_edge_refusals_total`` for ``reason``, scraped from ``/metrics``."""
    scrape = httpx.get(
        f"{server.url}/metrics", headers={"authorization": f"Bearer {TOKEN}"}, timeout=WAIT
    )
    assert scrape.status_code == 200, scrape.text
    line = f'perdure_edge_refusals_total{{reason="{reason}"}} '
    found = [row for row in scrape.text.splitlines() if row.startswith(line)]
    return int(float(found[0][len(line) :])) if found else 0


def test_another_origin_is_refused(server: ServerProcess, pages: tuple[_Pages, _Pages]) -> None:
    key = new_key()
    other = pages[1].origin
    refused_before = _refusals(server, "cors.origin_not_allowed")
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
    # Both refusals are counted for the operator.
    assert _refusals(server, "cors.origin_not_allowed") == refused_before + 2


def test_without_a_policy_only_the_servers_own_pages_and_non_browsers_pass(
    tmp_path: Path,
) -> None:
    """No policy: a request a browser marks as another site's is refused before it runs
    (a foreign Origin, Origin: null, Sec-Fetch-Site: cross-site), whatever its content
    type; the server's own pages and clients that send no Origin pass. No CORS headers
    either way (issue 29)."""
    with access_server(tmp_path / "data", token=None) as plain:
        key = new_key()
        url = _action(plain, key)
        host = plain.url.removeprefix("http://")
        body = '{"args":[]}'
        refused = [
            {"origin": "http://page.test"},
            {"origin": "http://page.test", "content-type": "text/plain"},  # a no-cors POST
            {"origin": "null"},
            {"sec-fetch-site": "cross-site"},
            {"origin": f"http://{host}", "sec-fetch-site": "cross-site", "host": "evil.test"},
        ]
        with httpx.Client(timeout=WAIT) as client:
            for headers in refused:
                response = client.post(url, content=body, headers=headers)
                assert response.status_code == 403, (headers, response.text)
                error = response.json()
                assert (error["group"], error["code"]) == ("cors", "origin_not_allowed")
                assert not any(name.startswith("access-control-") for name in response.headers)
            preflight = client.options(
                url, headers={"origin": "http://page.test", "access-control-request-method": "POST"}
            )
            assert preflight.status_code == 403
            assert _actors(plain, key) == 0  # nothing of the refused requests ran
            typed = {"content-type": "application/json"}
            own = client.post(url, content=body, headers={"origin": f"http://{host}", **typed})
            plain_client = client.post(url, content=body, headers=typed)  # curl, the clients
        assert own.status_code == 200, own.text
        assert plain_client.status_code == 200, plain_client.text
        assert not any(name.startswith("access-control-") for name in own.headers)


def test_without_a_policy_a_foreign_page_cannot_open_a_socket(tmp_path: Path) -> None:
    """The upgrade of another site's page is answered with the error frame and close
    1008 before the actor is reached; a socket without an Origin opens as before."""
    with access_server(tmp_path / "data", token=None) as plain:
        key = new_key()
        socket_url = plain.url.replace("http", "ws", 1) + (
            f"/gateway/guarded/connect?rvt-method=getOrCreate&rvt-key={key}"
        )
        protocols = [Subprotocol("rivet"), Subprotocol("rivet_encoding.json")]
        page = Origin("http://page.test")
        with connect(socket_url, origin=page, subprotocols=protocols, open_timeout=WAIT) as ws:
            frame = json.loads(ws.recv(timeout=WAIT))["body"]
            assert frame["tag"] == "Error"
            assert (frame["val"]["group"], frame["val"]["code"]) == ("cors", "origin_not_allowed")
            with pytest.raises(ConnectionClosed):
                ws.recv(timeout=WAIT)
        assert ws.close_code == 1008
        assert _actors(plain, key) == 0
        with connect(socket_url, subprotocols=protocols, open_timeout=WAIT) as ws:
            assert json.loads(ws.recv(timeout=WAIT))["body"]["tag"] == "Init"


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


_FORGE = """
const [url, socketUrl, done] = arguments;
// What any page can send without asking: a no-cors text/plain POST, then a socket.
fetch(url, {method: "POST", mode: "no-cors", headers: {"content-type": "text/plain"},
            body: JSON.stringify({args: []})}).then(
  () => {
    const got = [];
    const ws = new WebSocket(socketUrl, ["rivet", "rivet_encoding.json"]);
    ws.onopen = () => ws.send(JSON.stringify(
      {body: {tag: "ActionRequest", val: {id: 0, name: "whoami", args: []}}}));
    ws.onmessage = (event) => got.push(String(event.data));
    ws.onclose = (event) => done({code: event.code, got});
  },
  (error) => done({error: String(error)}),
);
"""


def test_a_page_of_another_site_cannot_drive_a_default_server(
    tmp_path: Path, pages: tuple[_Pages, _Pages], browser: Any
) -> None:
    """In a real browser, against a server with no CORS policy: a page of another origin
    sends what browsers send without a preflight (a no-cors POST, a WebSocket); neither
    reaches the actor (issue 29)."""
    with access_server(tmp_path / "data", token=None) as plain:
        key = new_key()
        query = f"rvt-method=getOrCreate&rvt-key={key}"
        url = f"{plain.url}/gateway/guarded/action/whoami?{query}"
        socket_url = plain.url.replace("http", "ws", 1) + f"/gateway/guarded/connect?{query}"
        browser.get(f"{pages[1].origin}/index.html")
        result = browser.execute_async_script(_FORGE, url, socket_url)
        assert "error" not in result, result
        assert result["code"] == 1008, result
        (frame,) = [json.loads(text)["body"] for text in result["got"]]
        assert (frame["tag"], frame["val"]["code"]) == ("Error", "origin_not_allowed")
        assert _actors(plain, key) == 0  # neither the POST nor the socket created it


_EVERY_WAY = """
const [base, query, done] = arguments;
const out = {sse: [], sseError: false, fetch: null, ws: [], wsClose: null};
const source = new EventSource(`${base}/gateway/board/events?${query}`);
source.addEventListener("news", (event) => out.sse.push(JSON.parse(event.data)));
source.onerror = () => { out.sseError = true; source.close(); };
let started = false;
const start = () => {
  if (started) return;
  started = true;
  // A change over HTTP, with a JSON body (the stream gets its event) ...
  fetch(`${base}/gateway/board/action/post?${query}`, {
    method: "POST", headers: {"content-type": "application/json"},
    body: JSON.stringify({args: []}),
  }).then((answer) => { out.fetch = answer.status; }, (error) => { out.fetch = String(error); });
  // ... and a read over a WebSocket.
  const ws = new WebSocket(`${base.replace("http", "ws")}/gateway/board/connect?${query}`,
                           ["rivet", "rivet_encoding.json"]);
  ws.onopen = () => ws.send(JSON.stringify(
    {body: {tag: "ActionRequest", val: {id: 0, name: "posts", args: []}}}));
  ws.onmessage = (event) => out.ws.push(JSON.parse(String(event.data)).body);
  ws.onclose = (event) => { out.wsClose = event.code; };
  setTimeout(() => { ws.close(); source.close(); done(out); }, 2500);
};
source.onopen = start;
setTimeout(start, 1000);  // the stream was refused: try the rest anyway
"""


def _posts(server: ServerProcess, key: str) -> int:
    answer = httpx.post(
        f"{server.url}/gateway/board/action/posts?rvt-method=getOrCreate&rvt-key={key}",
        json={"args": []},
        timeout=WAIT,
    )
    assert answer.status_code == 200, answer.text
    return int(answer.json()["output"])


def test_over_http_websocket_and_sse_only_the_allowed_origin_gets_through(
    tmp_path: Path, pages: tuple[_Pages, _Pages], browser: Any
) -> None:
    """A server with no token and one allowed origin, in a real browser: a page of that
    origin changes an actor over HTTP, reads it over a WebSocket and follows its events
    over SSE; a page of another origin does none of the three (issue 29)."""
    allowed, other = pages
    with access_server(tmp_path / "data", "--cors-origin", allowed.origin, token=None) as plain:
        for page, may in ((other, False), (allowed, True)):
            key = new_key()
            assert _posts(plain, key) == 0
            browser.get(f"{page.origin}/index.html")
            seen = browser.execute_async_script(
                _EVERY_WAY, plain.url, f"rvt-method=get&rvt-key={key}"
            )
            tags = [frame["tag"] for frame in seen["ws"]]
            if may:
                assert seen["fetch"] == 200, seen
                assert _posts(plain, key) == 1  # the change happened
                assert tags[0] == "Init", seen
                assert "ActionResponse" in tags, seen
                assert seen["sse"] == [[1]], seen
                assert not seen["sseError"], seen
            else:
                assert "Failed to fetch" in str(seen["fetch"]), seen
                assert _posts(plain, key) == 0  # nothing changed
                assert tags == ["Error"], seen
                assert seen["ws"][0]["val"]["code"] == "origin_not_allowed", seen
                assert seen["wsClose"] == 1008, seen
                assert seen["sseError"], seen
                assert seen["sse"] == [], seen
