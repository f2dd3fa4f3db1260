"""The machine's floor for the server figures: a minimal Starlette app on the same
uvicorn setup as ``perdure serve`` (uvloop, httptools, the websockets sans-I/O
protocol). ``POST /empty`` answers an empty 200; ``/echo`` sends every frame back.
Started by ``bench/floor.py``; not part of perdure."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect


async def empty(request: Request) -> Response:
    await request.body()
    return Response(b"", 200)


async def echo(websocket: WebSocket) -> None:
    await websocket.accept(subprotocol="rivet")
    try:
        while True:
            await websocket.send_text(await websocket.receive_text())
    except WebSocketDisconnect:
        return


app = Starlette(routes=[Route("/empty", empty, methods=["POST"]), WebSocketRoute("/echo", echo)])
