"""The registry of the per-client caps tests: ``perdure serve
tests.scenarios.edge.caps_app:registry``. ``room`` has an event (for SSE streams and
subscriptions), an action, and a raw ``on_websocket`` that greets and echoes."""

from __future__ import annotations

from typing import Any

from starlette.websockets import WebSocket

from perdure import actor, event, setup


def _ping(c: Any) -> str:
    c.broadcast("changed", "ping")
    return "pong"


async def _on_websocket(c: Any, websocket: WebSocket) -> None:
    await websocket.send_text("hello")
    async for text in websocket.iter_text():
        await websocket.send_text(text)


room = actor(
    state={},
    events={"changed": event()},
    actions={"ping": _ping},
    on_websocket=_on_websocket,
)

registry = setup(use={"room": room})
