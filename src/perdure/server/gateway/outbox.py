"""The server side of one WebSocket connection's outgoing traffic.

:class:`SocketTransport` is what the runtime holds as a connection's ``Transport``. The
runtime calls ``send_event`` and ``close`` from actor code, so neither may block: each
encodes (so the client sees the payload as it was when it was sent, not after later
mutations), appends the frame to a queue and wakes the writer task, which alone talks to
the socket. Everything leaves in the order it was queued.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import deque
from typing import Any

from perdure.errors import InternalError, MessageError, PerdureError
from perdure.protocol.codec import Encoding, encode_to_client
from perdure.protocol.messages import ActionResponse, ErrorMessage, Event, ToClient
from perdure.server.edge.asgi import Message, Send, outgoing_too_long

__all__ = ["MAX_QUEUED_BYTES", "EventFrameCache", "SocketTransport", "close_reason"]

MAX_QUEUED_BYTES = 32 * 1024 * 1024
_log = logging.getLogger("perdure.server")


def close_reason(identifier: str) -> str:
    """A close reason fits in 123 bytes (RFC 6455); user error codes may be longer."""
    data = identifier.encode("utf-8")
    return identifier if len(data) <= 123 else data[:123].decode("utf-8", "ignore")


class EventFrameCache:
    """Remembers the frame of the last event encoded, so a broadcast encodes once.

    A broadcast hands the same argument list to every subscribed connection in one
    synchronous loop, so the list's identity (kept alive here, so it cannot be reused by
    another list) plus name and encoding identifies the frame.
    """

    __slots__ = ("args", "enc", "frame", "name")

    def __init__(self) -> None:
        self.args: Any = None
        self.name = ""
        self.enc: Encoding = "json"
        self.frame: str | bytes = b""

    def encode(
        self, name: str, args: list[Any], enc: Encoding, limit: int | None = None
    ) -> str | bytes:
        """The frame for ``Event(name, args)`` in ``enc``; raises if it cannot be encoded
        (or, with ``limit``, certainly exceeds it: checked before encoding)."""
        if self.args is args and self.name == name and self.enc == enc:
            return self.frame
        frame = encode_to_client(Event(name, args), enc, limit)
        self.args, self.name, self.enc, self.frame = args, name, enc, frame
        return frame


@dataclasses.dataclass(frozen=True, slots=True)
class _Close:
    code: int
    reason: str


class SocketTransport:
    """Queues frames for one socket; :meth:`run` (the writer task) sends them in order."""

    def __init__(self, send: Send, enc: Encoding, limit: int, cache: EventFrameCache) -> None:
        self.enc: Encoding = enc
        self.closing = False
        self._send = send
        self._limit = limit
        self._cache = cache
        self._frames: deque[Message | _Close] = deque()
        self._queued = 0
        self._wake = asyncio.Event()

    # ------------------------------------------------- the runtime's Transport

    def send_event(self, name: str, args: list[Any]) -> None:
        """Queue an event (never blocks). A payload that cannot be sent fails the link."""
        if self.closing:
            return
        try:
            frame = self._cache.encode(name, args, self.enc, self._limit)
        except MessageError as exc:  # over the limit, or a value no encoding can carry
            self.fail(exc)
            return
        except Exception as exc:
            _log.error("event %r cannot be encoded; closing the connection", name, exc_info=exc)
            self.fail(InternalError(f"Event `{name}` could not be encoded."))
            return
        if len(frame) > self._limit:
            self.fail(outgoing_too_long(self._limit))
            return
        self._append(frame)

    def close(self, code: int, reason: str) -> None:
        """Close after the frames already queued (idempotent, never blocks)."""
        if self.closing:
            return
        self.closing = True
        self._frames.append(_Close(code, close_reason(reason)))
        self._wake.set()

    # ------------------------------------------------------ the server's side

    def put_first(self, msg: ToClient) -> None:
        """Queue ``msg`` ahead of everything (``Init`` goes out before events sent in
        ``on_connect``)."""
        frame = encode_to_client(msg, self.enc)
        self._frames.appendleft(self._message(frame))
        self._queued += len(frame)
        self._wake.set()

    def push_response(self, action_id: int, output: Any) -> None:
        """Queue an action's answer; an answer that cannot be sent becomes its error."""
        if self.closing:
            return
        try:
            frame = encode_to_client(ActionResponse(action_id, output), self.enc, self._limit)
        except PerdureError as exc:
            self.push_error(exc, action_id)
            return
        if len(frame) > self._limit:
            self.push_error(outgoing_too_long(self._limit), action_id)
            return
        self._append(frame)

    def push_error(self, error: PerdureError, action_id: int | None) -> None:
        """Queue an ``Error`` message (about one action when ``action_id`` is given)."""
        if self.closing:
            return
        msg = ErrorMessage(error.group, error.code, error.message, error.metadata, action_id)
        try:
            frame = encode_to_client(msg, self.enc)
        except Exception:
            frame = encode_to_client(dataclasses.replace(msg, metadata=None), self.enc)
        self._append(frame)

    def fail(self, error: PerdureError) -> None:
        """A connection-level error: send ``Error`` (no action id), then close 1011."""
        self.push_error(error, None)
        self.close(1011, error.identifier)

    async def run(self) -> None:
        """The writer: send queued frames in order until closed or the client is gone."""
        frames, send, wake = self._frames, self._send, self._wake
        try:
            while True:
                if not frames:
                    wake.clear()
                    await wake.wait()
                    continue
                item = frames.popleft()
                if isinstance(item, _Close):
                    close = {"type": "websocket.close", "code": item.code, "reason": item.reason}
                    await send(close)
                    return
                self._queued -= len(item.get("text") or item.get("bytes") or b"")
                await send(item)
        except Exception as exc:
            # The client is gone (uvicorn raises ClientDisconnected, an OSError) or the
            # server already closed the socket (shutdown): nothing more can be sent.
            if not isinstance(exc, OSError):
                _log.debug("websocket send failed", exc_info=exc)
            self.closing = True
            frames.clear()

    # ----------------------------------------------------------------- helpers

    def _append(self, frame: str | bytes) -> None:
        self._queued += len(frame)
        if self._queued > MAX_QUEUED_BYTES:
            # The client reads slower than the actor sends; keeping up would need
            # unbounded memory. Drop what is queued and tell it why.
            self._frames.clear()
            self._queued = 0
            self.close(1011, "message.outgoing_queue_full")
            return
        self._frames.append(self._message(frame))
        self._wake.set()

    @staticmethod
    def _message(frame: str | bytes) -> Message:
        if isinstance(frame, str):
            return {"type": "websocket.send", "text": frame}
        return {"type": "websocket.send", "bytes": frame}
