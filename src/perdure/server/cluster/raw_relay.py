"""Raw requests and sockets, and event streams, for an actor another node of the
cluster owns: relayed there.

A raw exchange (``on_request``/``on_websocket``) is the application's own bytes, not an
operation the forward endpoint (:mod:`perdure.server.cluster.peers`) can carry. So a node that
does not own the actor relays it whole to the owner's raw route, addressed by the
actor's id: the HTTP request with its method, headers and body, and the answer streamed
back as it arrives; a socket is piped frame by frame, as ``/connect`` is
(:mod:`perdure.server.cluster.pipe`). The owner serves it like any raw request: it wakes the
actor, and the state changes are durable before the response leaves it.

The hop carries the cluster's secret and the handed-on mark (``pipe.peer_headers``), so
the owner asks no client token (this node checked it) and never relays further; the
client's address goes along in ``x-forwarded-for``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from urllib.parse import parse_qsl, quote, urlencode

import httpx

from perdure.errors import ActorUnavailable, PeerUnreachable
from perdure.runtime import ClusterMember, PeerNode
from perdure.server.cluster.pipe import (
    FORWARDED_HEADER,
    SECRET_HEADER,
    dial,
    peer_headers,
    pipe_to_owner,
    websocket_url,
)
from perdure.server.edge.asgi import Message, Receive, Scope, Send, client_gone, header_value

__all__ = ["RawRelay"]

_log = logging.getLogger("perdure.cluster")
# Headers of one hop (RFC 9110 §7.6.1) and those the relay sets itself.
_HOP_HEADERS = frozenset(
    {
        "connection",
        "content-length",
        "host",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "x-forwarded-for",
        # A peer's marks: this node sets them (a client's own never reach the owner).
        FORWARDED_HEADER,
        SECRET_HEADER,
    }
)
_CONNECT = 2.0  # seconds to open a TCP connection to the owner
_READ = 120.0  # longer than any action may run, as for forwarded operations


class RawRelay:
    """Relays raw requests and sockets to the node that owns their actor, with the
    cluster's secret of ``cluster`` (read at each hop: the node agrees on it as it starts)."""

    def __init__(self, cluster: ClusterMember, max_frame: int) -> None:
        self._cluster = cluster
        self._max_frame = max_frame
        self._client: httpx.AsyncClient | None = None

    async def request(
        self, owner: PeerNode, scope: Scope, body: bytes, send: Send, actor_id: str, rest: str
    ) -> None:
        """Relay one HTTP request; its answer goes to ``send`` as the owner streams it.

        ``PeerUnreachable`` when the owner cannot be reached (nothing was delivered),
        ``ActorUnavailable`` when it did not answer (it may have served the request).
        """
        await self._relay(owner, scope, body, send, _raw_path(actor_id, "request", rest, scope))

    async def event_stream(
        self,
        owner: PeerNode,
        scope: Scope,
        receive: Receive,
        send: Send,
        actor_id: str,
        *,
        stopping: asyncio.Event,
    ) -> None:
        """Relay a Server-Sent Events stream (:mod:`perdure.server.gateway.sse`) from the owner
        until the client goes away, the owner ends it or this node stops (``stopping``).
        The client's headers go along, ``Last-Event-ID`` included, so the owner resumes
        where the client asks; when either node stops (a drain, a crash), the stream ends
        and the browser reconnects."""
        path = _raw_path(actor_id, "events", "", scope)
        sent = _TrackedSend(send)
        relay = asyncio.ensure_future(self._relay(owner, scope, b"", sent, path))
        gone = asyncio.ensure_future(client_gone(receive))
        stop = asyncio.ensure_future(stopping.wait())
        try:
            await asyncio.wait({relay, gone, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            stop.cancel()
            if not relay.done():
                relay.cancel()  # the client left, or this node stops: close the owner's
            with contextlib.suppress(asyncio.CancelledError):
                await relay  # its errors (owner unreachable …) are the caller's
        if stopping.is_set() and sent.started and not sent.ended:
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _relay(
        self, owner: PeerNode, scope: Scope, body: bytes, send: Send, path: str
    ) -> None:
        url = f"{owner.address.rstrip('/')}{path}"
        client = self._http()
        outgoing = client.build_request(
            scope["method"], url, headers=self._headers(scope, keep_all=True), content=body
        )
        try:
            response = await client.send(outgoing, stream=True)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            raise PeerUnreachable(
                f"Node `{owner.node_id}` ({owner.address}) is unreachable: {type(exc).__name__}."
            ) from None
        except httpx.HTTPError as exc:
            raise ActorUnavailable(
                f"Node `{owner.node_id}` did not answer the relayed raw request "
                f"({type(exc).__name__}); it may or may not have been served.",
                code="owner_no_answer",
            ) from None
        try:
            await _stream_back(response, send)
        finally:
            await response.aclose()

    async def websocket(
        self, owner: PeerNode, scope: Scope, receive: Receive, send: Send, actor_id: str, rest: str
    ) -> None:
        """Pipe an accepted raw socket to the owner's until either side closes;
        ``PeerUnreachable`` if the owner's cannot be opened."""
        url = websocket_url(owner) + _raw_path(actor_id, "websocket", rest, scope)
        offered = [
            protocol
            for protocol in scope.get("subprotocols") or ()
            if not protocol.startswith("rivet_token.")  # the secret stands for it
        ]
        upstream = await dial(
            owner, url, offered, self._headers(scope, keep_all=False), self._max_frame
        )
        await pipe_to_owner(receive, send, upstream)

    async def aclose(self) -> None:
        """Close the kept-alive connections to the peers."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(_READ, connect=_CONNECT, pool=5.0),
                limits=httpx.Limits(max_connections=256, max_keepalive_connections=32),
                trust_env=False,
                follow_redirects=False,
            )
        return self._client

    def _headers(self, scope: Scope, *, keep_all: bool) -> dict[str, str]:
        """The client's headers (all for HTTP; for a socket, the handshake's own are
        the WebSocket library's, so only the connection parameters), the client's
        address appended to ``x-forwarded-for``, and the peer's mark."""
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope["headers"]:
            name = bytes(raw_name).decode("latin-1").lower()
            if name in _HOP_HEADERS or name.startswith("sec-websocket"):
                continue
            if not keep_all and name != "x-rivet-conn-params":
                continue
            value = bytes(raw_value).decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        client = scope.get("client")
        if client is not None:
            earlier = header_value(scope, b"x-forwarded-for")
            headers["x-forwarded-for"] = f"{earlier}, {client[0]}" if earlier else str(client[0])
        headers.update(peer_headers(self._cluster.node_id, self._cluster.secret))
        return headers


def _raw_path(actor_id: str, route: str, rest: str, scope: Scope) -> str:
    """The owner's raw route for the actor, by id: the client may have named it by name
    and key, which the owner need not resolve again. The gateway's ``rvt-*`` query
    parameters stay behind (the target is now the id; the secret stands for a token)."""
    query = [
        (name, value)
        for name, value in parse_qsl(scope["query_string"].decode("latin-1"), True)
        if not name.startswith("rvt-")
    ]
    path = f"/gateway/{quote(actor_id, safe='')}/{route}{rest}"
    return f"{path}?{urlencode(query)}" if query else path


async def _stream_back(response: httpx.Response, send: Send) -> None:
    headers = [
        (name, value)
        for name, value in response.headers.raw
        if name.decode("latin-1").lower() not in _HOP_HEADERS
    ]
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
    try:
        async for chunk in response.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
    except httpx.HTTPError:
        # The answer has begun: no error body can follow. Ending here leaves the response
        # incomplete, so the server drops the connection and the client sees it cut.
        _log.warning("the owner's raw answer broke off midway", exc_info=True)
        return
    await send({"type": "http.response.body", "body": b"", "more_body": False})


class _TrackedSend:
    """An ASGI ``send`` that remembers whether the response began and ended, so that a
    relay cut short by this node's stop can still end the answer it began."""

    __slots__ = ("_send", "ended", "started")

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = self.ended = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.ended = True
        await self._send(message)
