"""perdure mounted in a FastAPI app (docs/embedding.md), run by a real uvicorn process:
one process, one port, the host's own routes beside perdure's at ``/perdure`` (and at
``/``, after everything else). The Python client, the official TypeScript client, a raw
HTTP client for SSE and raw handlers, and a headless Chromium for the inspector all go
through the prefix; the host's routes reach the same actors through the shared runtime.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
import websockets

from perdure.client import AsyncClient
from tests.scenarios.compat.runner import run_program
from tests.support.browser import BrowserMissing, find_browser, start_browser
from tests.support.server import HostAppProcess

WAIT = 10.0
DATA_ENV = "PERDURE_EMBED_DATA"  # host.py's (importing host.py would build its runtime)
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostAppProcess]:
    """``uvicorn tests.scenarios.embed.host:app``, one process for the module."""
    data = tmp_path_factory.mktemp("embed-data")
    process = HostAppProcess("tests.scenarios.embed.host:app", data, env={DATA_ENV: str(data)})
    process.start()
    yield process
    process.kill()


@pytest.fixture
def key() -> str:
    return uuid.uuid4().hex[:10]


def _query(key: str) -> dict[str, str]:
    return {"rvt-method": "getOrCreate", "rvt-key": key}


async def test_the_host_routes_and_perdure_share_one_runtime(
    host: HostAppProcess, key: str
) -> None:
    async with httpx.AsyncClient(base_url=host.url, timeout=WAIT) as http:
        assert (await http.get("/hello")).json() == {"hello": "from the host app"}
        answer = await http.post(f"/counters/{key}/increment", params={"by": 2})
        assert answer.json() == {"count": 2}
        async with AsyncClient(f"{host.url}/perdure") as client:
            # The same actor, through the network client at the prefix.
            assert await client.compatCounter.get_or_create(key).increment(3) == 5
        answer = await http.post(f"/counters/{key}/increment")
        assert answer.json() == {"count": 6}


async def test_the_python_client_calls_connects_and_follows_events_through_the_prefix(
    host: HostAppProcess, key: str
) -> None:
    async with AsyncClient(f"{host.url}/perdure") as client:
        handle = client.compatCounter.get_or_create(key)
        assert await handle.increment(1) == 1  # HTTP: {prefix}/gateway/…/action/…
        conn = handle.connect()  # WebSocket: {prefix}/gateway/…/connect
        seen: list[int] = []
        conn.on("newCount", seen.append)
        await conn.wait_open()
        assert await conn.increment(2) == 3
        # The event comes before the action's answer (and the one just before connect()
        # may come too: docs/events.md).
        assert seen[-1] == 3
        await conn.dispose()
        created = await client.compatCounter.create(f"{key}-created")  # POST {prefix}/actors
        actor_id = await created.resolve()
        assert await client.compatCounter.get_for_id(actor_id).increment(4) == 4


async def test_server_sent_events_stream_through_the_prefix(host: HostAppProcess, key: str) -> None:
    async with httpx.AsyncClient(base_url=f"{host.url}/perdure", timeout=WAIT) as http:
        url = "/gateway/compatCounter/events"
        async with http.stream("GET", url, params=_query(key)) as stream:
            assert stream.status_code == 200
            lines = stream.aiter_lines()
            assert await anext(lines) == ": open"
            call = await http.post(
                "/gateway/compatCounter/action/increment", params=_query(key), json={"args": [7]}
            )
            assert call.json() == {"output": 7}
            event = await _next_message(lines)
        assert event[1:] == ["event: newCount", "data: [7]"]


async def _next_message(lines: AsyncIterator[str]) -> list[str]:
    """The lines of the stream's next SSE message (comments and blank lines skipped)."""
    message: list[str] = []
    async for line in lines:
        if line and not line.startswith(":"):
            message.append(line)
            if line.startswith("data:"):
                break
    return message


async def test_raw_handlers_answer_through_the_prefix(host: HostAppProcess, key: str) -> None:
    async with httpx.AsyncClient(base_url=f"{host.url}/perdure", timeout=WAIT) as http:
        added = await http.post(
            "/gateway/compatRaw/request/add", params=_query(key), json={"by": 2}
        )
        assert added.json() == {"count": 2}
    ws_url = f"ws://127.0.0.1:{host.port}/perdure/gateway/compatRaw/websocket/room"
    async with websockets.connect(f"{ws_url}?rvt-method=getOrCreate&rvt-key={key}") as socket:
        assert await socket.recv() == "hello /room"  # the handler sees its own path
        await socket.send("add")
        assert await socket.recv() == "count 3"


async def test_the_edge_defaults_hold_under_the_prefix(host: HostAppProcess, key: str) -> None:
    action = "/perdure/gateway/compatCounter/action/increment"
    async with httpx.AsyncClient(base_url=host.url, timeout=WAIT) as http:
        other_site = await http.post(
            action,
            params=_query(key),
            json={"args": []},
            headers={"origin": "https://elsewhere.example"},
        )
        assert other_site.status_code == 403
        assert other_site.headers["x-rivet-error"] == "cors.origin_not_allowed"
        form_post = await http.post(
            action, params=_query(key), content=b"args", headers={"content-type": "text/plain"}
        )
        assert form_post.status_code == 415
        assert (await http.get("/perdure/admin/overview")).status_code == 200  # loopback
        proxied = await http.get("/perdure/admin/overview", headers={"x-forwarded-for": "1.2.3.4"})
        assert proxied.status_code == 403
        assert proxied.headers["x-rivet-error"] == "admin.forbidden"
        document = (await http.get("/perdure/admin/openapi.json")).json()
        assert document["servers"] == [{"url": "/perdure"}]


def test_the_official_client_works_against_the_mounted_endpoint(host: HostAppProcess) -> None:
    run = run_program("embed.ts", [f"{host.url}/perdure", "cbor"], timeout=60)
    assert run.done is not None, run.report()
    assert run.done["failed"] == 0, run.report()
    assert run.returncode == 0, run.report()
    assert len(run.checks) == 6, run.report()


def test_the_inspector_loads_its_assets_and_live_feed_under_the_prefix(
    host: HostAppProcess, key: str
) -> None:
    try:
        find_browser()
    except BrowserMissing as exc:  # a local run without Chromium skips; CI must have it
        (pytest.fail if IN_CI else pytest.skip)(f"the inspector test needs: {exc}")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    answer = httpx.put(f"{host.url}/perdure/actors", json={"name": "compatCounter", "key": key})
    actor_id = answer.json()["actor"]["actor_id"]
    browser = start_browser()
    try:
        wait = WebDriverWait(browser, WAIT)
        browser.get(f"{host.url}/perdure/ui/")
        # The overview's script ran and read the admin API under the prefix.
        wait.until(lambda d: "compatCounter" in d.find_element(By.ID, "types").text)
        browser.get(f"{host.url}/perdure/ui/actors/{actor_id}")
        wait.until(lambda d: d.find_element(By.ID, "feed-state").text == "live")  # EventSource
        loaded = browser.execute_script(
            "return [document.styleSheets[0].href, document.styleSheets[0].cssRules.length,"
            " performance.getEntriesByType('resource').map((r) => r.name)];"
        )
        stylesheet, rules, resources = loaded
        assert stylesheet == f"{host.url}/perdure/ui/static/inspector.css"
        assert rules > 0
        assert resources
        assert all(url.startswith(f"{host.url}/perdure/") for url in resources)
        browser.find_element(By.CSS_SELECTOR, "a.brand").click()  # the layout's links
        wait.until(lambda d: d.current_url == f"{host.url}/perdure/ui/")
    finally:
        browser.quit()


async def test_a_mount_at_the_root_still_works(host: HostAppProcess, key: str) -> None:
    async with AsyncClient(host.url) as client:
        assert await client.compatCounter.get_or_create(key).increment(5) == 5
    async with httpx.AsyncClient(base_url=host.url, timeout=WAIT) as http:
        page = (await http.get("/ui/")).text
        assert '<meta name="perdure-root" content="">' in page
        assert 'href="/ui/static/inspector.css"' in page
        assert (await http.get("/ui/static/api.js")).status_code == 200
        assert "servers" not in (await http.get("/admin/openapi.json")).json()
        answer = await http.post(f"/counters/{key}/increment")  # the host's route still first
        assert answer.json() == {"count": 6}
