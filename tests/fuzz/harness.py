"""In-process calls of the server's ASGI app with fuzzed requests and frames.

One input is raw bytes (so a crashing input saved by a fuzzer replays as it is):

- byte 0 picks the route, byte 1 the ``x-rivet-encoding`` (or subprotocol), byte 2 the
  HTTP method;
- the rest, up to the first ``\\0\\0``, is extra: appended to the path and query (HTTP) or
  given as a raw header value; after it comes the body (HTTP) or the frames (WebSocket,
  split on :data:`FRAME_SEPARATOR`).

A *crash* is an exception escaping the app, an answer of 500 or more or a socket closed
with ``*.internal_error`` (nothing this registry's actor code does fails), or a call
taking longer than :data:`CALL_SECONDS`.
"""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote_from_bytes, unquote

from perdure import ActorRuntime
from perdure.server import create_app
from perdure.store.memory import MemoryStore
from tests.fuzz.app import registry

CALL_SECONDS = 5.0
_TARGET = "rvt-namespace=default&rvt-method=getOrCreate&rvt-key=fuzz"
_HTTP_ROUTES = (
    "/gateway/box/action/echo?" + _TARGET,
    "/gateway/box/action/put?" + _TARGET,
    "/gateway/box/queue/q?" + _TARGET,
    "/gateway/box/request/x?" + _TARGET,  # a raw handler route (box has none: 404)
    "/gateway/box/action/",
    "/gateway/",
    "/actors",
    "/",
)
_WS_PATH = "/gateway/box/connect"
_ENCODINGS = (b"json", b"cbor", b"bare", b"")
_METHODS = ("POST", "GET", "PUT", "OPTIONS")
_SEPARATOR = b"\0\0"
_PATH_SAFE = "/:@!$&'()*+,;=-._~%"
_QUERY_SAFE = _PATH_SAFE + "?"
FRAME_SEPARATOR = b"\xffFRAME\xff"


class Crash(AssertionError):
    """The app did something no input may make it do."""


@dataclass
class _Exchange:
    """What the app was given and what it sent back."""

    inbox: list[dict[str, Any]]
    sent: list[MutableMapping[str, Any]] = field(default_factory=list)

    async def receive(self) -> dict[str, Any]:
        if self.inbox:
            return self.inbox.pop(0)
        await asyncio.sleep(0)  # let the app answer before it sees the disconnect
        return {"type": "websocket.disconnect", "code": 1000}

    async def send(self, message: MutableMapping[str, Any]) -> None:
        self.sent.append(message)


class AppHarness:
    """A started memory-store runtime and its app, on a private event loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.runtime = ActorRuntime(registry, MemoryStore())
        self.app = create_app(self.runtime, metrics=False)
        self.loop.run_until_complete(self.runtime.start())

    def close(self) -> None:
        self.loop.run_until_complete(self.runtime.stop())
        self.loop.close()

    def http(self, data: bytes) -> int:
        """Send ``data`` as an HTTP request (see the module doc); the status answered."""
        route, enc, method, extra, body = _split(data)
        path, _, query = (_HTTP_ROUTES[route % len(_HTTP_ROUTES)]).partition("?")
        # As uvicorn passes them on: the HTTP parser refuses raw bytes outside ASCII in the
        # request target (request.malformed), so fuzzed bytes arrive percent-encoded.
        raw_path = path.encode() + _quoted(extra.partition(b"?")[0], _PATH_SAFE)
        query_bytes = query.encode() + b"&" + _quoted(extra.partition(b"?")[2], _QUERY_SAFE)
        content_type = bytes(b for b in extra[:64] if b >= 0x20 and b != 0x7F)
        headers = [(b"x-rivet-encoding", _ENCODINGS[enc % 4]), (b"content-type", content_type)]
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": _METHODS[method % len(_METHODS)],
            "scheme": "http",
            "path": unquote(raw_path.decode("ascii")),
            "raw_path": raw_path,
            "query_string": query_bytes,
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8080),
        }
        exchange = _Exchange([{"type": "http.request", "body": body, "more_body": False}])
        self._run(scope, exchange)
        starts = [m for m in exchange.sent if m["type"] == "http.response.start"]
        if len(starts) != 1:
            raise Crash(f"{len(starts)} response starts for one request")
        status: int = starts[0]["status"]
        if status >= 500:
            body_sent = b"".join(m.get("body", b"") for m in exchange.sent[1:])
            raise Crash(f"answered {status}: {body_sent[:300]!r}")
        return status

    def websocket(self, data: bytes) -> list[MutableMapping[str, Any]]:
        """Open ``/connect`` and send the frames of ``data``; what the app sent."""
        _route, enc, _method, extra, rest = _split(data)
        encoding = _ENCODINGS[enc % 4]
        protocols = ["rivet", f"rivet_encoding.{encoding.decode()}"] if encoding else ["rivet"]
        scope = {
            "type": "websocket",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "scheme": "ws",
            "path": _WS_PATH,
            "raw_path": _WS_PATH.encode(),
            "query_string": _TARGET.encode(),
            "root_path": "",
            "headers": [(b"x-fuzz", extra[:200])],
            "subprotocols": protocols,
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8080),
        }
        frames: list[dict[str, Any]] = [{"type": "websocket.connect"}]
        for frame in rest.split(FRAME_SEPARATOR) if rest else []:
            if encoding in (b"json", b""):
                frames.append(
                    {"type": "websocket.receive", "text": frame.decode("utf-8", "replace")}
                )
            else:
                frames.append({"type": "websocket.receive", "bytes": frame})
        exchange = _Exchange(frames)
        self._run(scope, exchange)
        for message in exchange.sent:
            reason = str(message.get("reason") or "")
            if message["type"] == "websocket.close" and reason.endswith("internal_error"):
                raise Crash(f"closed with an internal error: {message.get('reason')!r}")
        return exchange.sent

    def _run(self, scope: dict[str, Any], exchange: _Exchange) -> None:
        call = self.app(scope, exchange.receive, exchange.send)
        try:
            self.loop.run_until_complete(asyncio.wait_for(call, CALL_SECONDS))
        except TimeoutError as exc:
            raise Crash(f"no answer within {CALL_SECONDS}s") from exc


def _quoted(data: bytes, safe: str) -> bytes:
    return quote_from_bytes(data, safe=safe).encode("ascii")


def _split(data: bytes) -> tuple[int, int, int, bytes, bytes]:
    head = data[:3].ljust(3, b"\0")
    extra, _, rest = data[3:].partition(_SEPARATOR)
    return head[0], head[1], head[2], extra, rest
