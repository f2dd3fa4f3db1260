"""The registry of the raw handler tests: ``perdure serve tests.scenarios.edge.raw_app:registry``.

``rawy`` answers raw requests (``on_request``) and raw sockets (``on_websocket``) and
counts its wakes; ``plain`` has neither hook, so its raw routes answer 404.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket

from perdure import UserError, actor, setup


def _on_wake(c: Any) -> None:
    c.state["wakes"] += 1


async def _on_request(c: Any, request: Request) -> Any:
    path = request.url.path
    if path == "/bump":
        c.state["count"] += (await request.json())["by"]
        return {"count": c.state["count"], "wakes": c.state["wakes"]}
    if path == "/slow":
        await asyncio.sleep(float(request.query_params["seconds"]))
        c.state["count"] += 1
        return {"count": c.state["count"], "wakes": c.state["wakes"]}
    if path == "/state":
        return {"count": c.state["count"], "wakes": c.state["wakes"]}
    if path == "/teapot":
        raise UserError("No coffee here.", code="teapot", metadata={"brew": "tea"})
    if path == "/boom":
        raise RuntimeError("a bug in the handler")
    if path == "/text":
        return "plain text"
    if path == "/page":
        return Response("<p>hi</p><script>1</script>", media_type="text/html")
    if path == "/own-policy":
        headers = {"content-security-policy": "default-src 'self'"}
        return Response("<p>mine</p>", media_type="text/html", headers=headers)
    body = await request.body()
    return Response(
        body,
        status_code=201,
        headers={"x-path": path, "x-query": str(request.url.query), "x-method": request.method},
    )


async def _on_websocket(c: Any, websocket: WebSocket) -> None:
    await websocket.send_text(f"hello {websocket.url.path}")
    async for text in websocket.iter_text():
        if text == "bump":
            c.state["count"] += 1
            await websocket.send_text(f"count {c.state['count']}")
        elif text == "fail":
            raise UserError("Refused.", code="refused")
        else:
            await websocket.send_text(f"echo {text}")


rawy = actor(
    state={"count": 0, "wakes": 0},
    on_wake=_on_wake,
    on_request=_on_request,
    on_websocket=_on_websocket,
    actions={"count": lambda c: c.state["count"]},
    options={"sleep_timeout": 0.3},
)

plain = actor(state={}, actions={"hi": lambda c: "hi"})

registry = setup(use={"rawy": rawy, "plain": plain})
