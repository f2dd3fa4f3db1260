"""No credential reaches a log line of a real ``perdure serve --log-level debug``: the
server token in each form a client may carry it (query, ``id@token`` path, header,
bearer, WebSocket subprotocol), the admin token, and a wrong token a client tried."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
from websockets.asyncio.client import connect

from perdure.observe.redaction import MASK
from tests.scenarios.edge.access_server import ADMIN_TOKEN, TOKEN, access_server, new_key

WAIT = 10.0
WRONG = "wrong-token-but-still-a-secret-42"
JSON = {"content-type": "application/json"}


def _action(base: str, key: str, *, token: str | None = None) -> str:
    query = f"rvt-method=getOrCreate&rvt-key={key}"
    if token is not None:
        query += f"&rvt-token={token}"
    return f"{base}/gateway/guarded/action/whoami?{query}"


async def _use_every_form(base: str) -> None:
    key = new_key()
    async with httpx.AsyncClient(timeout=WAIT) as client:
        by_query = await client.post(_action(base, key, token=TOKEN), json={"args": []})
        assert by_query.status_code == 200, by_query.text
        by_header = await client.post(
            _action(base, key), json={"args": []}, headers={"x-rivet-token": TOKEN}
        )
        assert by_header.status_code == 200, by_header.text
        listed = await client.get(
            f"{base}/actors",
            params={"name": "guarded", "key": key},
            headers={"authorization": f"Bearer {TOKEN}"},
        )
        actor_id = listed.json()["actors"][0]["actor_id"]
        by_path = await client.post(
            f"{base}/gateway/{actor_id}@{TOKEN}/action/whoami", json={"args": []}, headers=JSON
        )
        assert by_path.status_code == 200, by_path.text
        refused = await client.post(_action(base, key, token=WRONG), json={"args": []})
        assert refused.status_code == 403
        admin = await client.get(
            f"{base}/admin/actors", headers={"authorization": f"Bearer {ADMIN_TOKEN}"}
        )
        assert admin.status_code == 200, admin.text
    ws_base = base.replace("http://", "ws://", 1)
    url = f"{ws_base}/gateway/guarded/connect?rvt-method=getOrCreate&rvt-key={key}"
    async with connect(
        f"{url}&rvt-token={TOKEN}",
        subprotocols=["rivet", "rivet_encoding.json"],  # type: ignore[list-item]
    ) as ws:
        assert json.loads(await asyncio.wait_for(ws.recv(), WAIT))["body"]["tag"] == "Init"
    async with connect(
        url,
        subprotocols=["rivet", "rivet_encoding.json", f"rivet_token.{TOKEN}"],  # type: ignore[list-item]
    ) as ws:
        assert json.loads(await asyncio.wait_for(ws.recv(), WAIT))["body"]["tag"] == "Init"


def test_no_token_reaches_the_debug_log(tmp_path: Path) -> None:
    with access_server(tmp_path, "--log-level", "debug", "--admin-token", ADMIN_TOKEN) as server:
        asyncio.run(_use_every_form(server.url))
        server.terminate()  # flushes the last lines
        log = server.log()
    # The requests were logged (uvicorn's access and WebSocket lines at debug) ...
    assert "/gateway/guarded/action/whoami" in log
    assert f"rvt-token={MASK}" in log
    assert f"@{MASK}/action/whoami" in log
    # ... and no credential with them, in any form.
    for secret in (TOKEN, ADMIN_TOKEN, WRONG):
        assert secret not in log, [line for line in log.splitlines() if secret in line][:3]


def test_json_lines_are_masked_too(tmp_path: Path) -> None:
    args = ("--log-level", "debug", "--log-format", "json")
    with access_server(tmp_path, *args) as server:
        with httpx.Client(timeout=WAIT) as client:
            answer = client.post(_action(server.url, new_key(), token=TOKEN), json={"args": []})
            assert answer.status_code == 200, answer.text
        server.terminate()
        log = server.log()
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    access = [entry for entry in lines if "/gateway/guarded/action/whoami" in entry["message"]]
    assert access, log[-2000:]
    assert all(f"rvt-token={MASK}" in entry["message"] for entry in access)
    assert TOKEN not in log
