"""Piping a client's WebSocket to the node that owns the actor.

A connection that lands on a node which does not own its actor is opened again, by id,
on the owner's ``/connect`` (with the client's encoding and connection parameters), and
the frames are copied both ways unchanged: the client sees the owner's ``Init``, answers
and events in its own encoding, whatever the encoding. When either side closes, the
other is closed with the same code and reason, so a client whose actor's node died sees
the close and reconnects (landing on a survivor, which takes the actor over).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from typing import Any
from urllib.parse import quote

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, WebSocketException

from perdure.errors import PeerForbidden, PeerUnreachable
from perdure.runtime import PeerNode
from perdure.server.edge.asgi import Receive, Scope, Send, header_value

__all__ = [
    "FORWARDED_HEADER",
    "SECRET_HEADER",
    "dial",
    "handed_on_by_peer",
    "open_upstream",
    "peer_headers",
    "pipe_to_owner",
    "presents_secret",
    "websocket_url",
]

FORWARDED_HEADER = "x-perdure-forwarded"
SECRET_HEADER = "x-perdure-cluster-secret"
_OPEN_TIMEOUT = 5.0
_log = logging.getLogger("perdure.cluster")


async def open_upstream(
    node: PeerNode,
    actor_id: str,
    subprotocols: list[str],
    params_text: str | None,
    *,
    origin_node: str,
    secret: str | None,
    max_size: int,
) -> ClientConnection:
    """Open the actor's connection on its owner; ``PeerUnreachable`` if that fails."""
    url = websocket_url(node) + "/connect"
    offered = [p for p in subprotocols if not p.startswith("rivet_actor.")]
    offered.append("rivet_actor." + quote(actor_id, safe=""))
    headers = peer_headers(origin_node, secret)
    if params_text is not None and not any(p.startswith("rivet_conn_params.") for p in offered):
        headers["x-rivet-conn-params"] = params_text
    return await dial(node, url, offered, headers, max_size)


def websocket_url(node: PeerNode) -> str:
    """The ``ws://`` (or ``wss://``) base URL of ``node``."""
    return node.address.rstrip("/").replace("http", "ws", 1)


def peer_headers(origin_node: str, secret: str | None) -> dict[str, str]:
    """The headers that mark a request as one a peer node hands on: the owner serves it
    itself (never hands it on again) and, with the secret, asks no client token.
    ``secret``: the cluster's (``ClusterMember.secret``; a peer refuses the request
    without it)."""
    headers = {FORWARDED_HEADER: origin_node}
    if secret:
        headers[SECRET_HEADER] = secret
    return headers


async def dial(
    node: PeerNode, url: str, subprotocols: list[str], headers: dict[str, str], max_size: int
) -> ClientConnection:
    """Open a WebSocket to ``url`` on ``node``; ``PeerUnreachable`` if that fails."""
    try:
        return await connect(
            url,
            # An empty list would send an empty Sec-WebSocket-Protocol header.
            subprotocols=subprotocols or None,  # type: ignore[arg-type]
            additional_headers=headers,
            open_timeout=_OPEN_TIMEOUT,
            max_size=max_size,
            compression=None,
        )
    except (OSError, TimeoutError, WebSocketException) as exc:
        raise PeerUnreachable(
            f"Node `{node.node_id}` ({node.address}) refused the connection: "
            f"{type(exc).__name__}: {exc}."
        ) from None


def handed_on_by_peer(scope: Scope, secret: str | None) -> bool:
    """True for a request or socket another node handed on here (``peer_headers``);
    ``actor.forbidden`` if it claims so without the cluster's secret. ``secret``: the
    cluster's (``ClusterMember.secret``); ``None`` (a node that has not agreed on one
    with its store yet) trusts no claim."""
    if header_value(scope, FORWARDED_HEADER.encode()) is None:
        return False
    if not presents_secret(scope, secret):
        raise PeerForbidden()
    return True


def presents_secret(scope: Scope, secret: str | None) -> bool:
    """Whether the request carries the cluster's ``secret`` (compared in constant time);
    never when ``secret`` is ``None``: a node without one trusts no peer."""
    if not secret:
        return False
    given = header_value(scope, SECRET_HEADER.encode())
    return given is not None and hmac.compare_digest(given.encode(), secret.encode())


async def pipe_to_owner(receive: Receive, send: Send, upstream: ClientConnection) -> None:
    """Copy frames between the accepted client socket and ``upstream`` until one closes."""
    down = asyncio.create_task(_downstream(upstream, send), name="ws pipe down")
    up = asyncio.create_task(_upstream(receive, upstream), name="ws pipe up")
    try:
        done, _ = await asyncio.wait((down, up), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (down, up):
            task.cancel()
        await asyncio.gather(down, up, return_exceptions=True)
    if up in done:  # the client went away first
        await upstream.close()
        return
    code = upstream.close_code or 1011
    reason = upstream.close_reason or ("" if code == 1000 else "actor.owner_gone")
    try:
        await send({"type": "websocket.close", "code": code, "reason": reason})
    except Exception:
        _log.debug("client socket already closed", exc_info=True)


async def _downstream(upstream: ClientConnection, send: Send) -> None:
    try:
        async for frame in upstream:
            message: dict[str, Any] = {"type": "websocket.send"}
            message["bytes" if isinstance(frame, bytes) else "text"] = frame
            await send(message)
    except ConnectionClosed:
        pass


async def _upstream(receive: Receive, upstream: ClientConnection) -> None:
    while True:
        message = await receive()
        if message["type"] != "websocket.receive":
            return
        data = message.get("bytes")
        if data is None:
            data = message.get("text")
        if data is None:
            continue
        try:
            await upstream.send(data)
        except ConnectionClosed:
            return
