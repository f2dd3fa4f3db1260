"""A TCP proxy the test controls, between a server under test and its database.

It runs on an event loop of its own in a background thread, so a synchronous or an
asyncio test can drive it. ``refuse()`` makes the database look killed (listening stops,
every connection is cut: new ones are refused); ``stall()`` makes it look cut off by the
network (connections are accepted and kept, bytes go nowhere); ``resume()`` brings it
back. Connections that lived through a stall are closed on resume, never resumed: what
was sent into the void is not delivered late.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any

__all__ = ["TcpProxy"]

CONTROL_TIMEOUT = 10.0


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target``; see the module docstring."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tcp-proxy")
        self._thread.daemon = True
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._stalled = False
        self._stalled_writers: set[asyncio.StreamWriter] = set()

    def start(self) -> TcpProxy:
        """Listen on a free port (``self.port``)."""
        self._thread.start()
        self._call(self._listen())
        return self

    def refuse(self) -> None:
        """Stop listening and cut every connection: the database looks killed."""
        self._call(self._refuse())

    def stall(self) -> None:
        """Keep every connection open but forward nothing: the database looks cut off."""
        self._call(self._stall())

    def resume(self) -> None:
        """Forward again (listening again on the same port if refused)."""
        self._call(self._resume())

    def close(self) -> None:
        """Stop everything and end the thread."""
        if self._thread.is_alive():
            self._call(self._refuse())
            self._call(_cancel_tasks())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(CONTROL_TIMEOUT)
            if not self._thread.is_alive():
                self._loop.close()

    def _call(self, work: Coroutine[Any, Any, None]) -> None:
        asyncio.run_coroutine_threadsafe(work, self._loop).result(CONTROL_TIMEOUT)

    # --- on the proxy's loop ----------------------------------------------------------

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(
            self._serve, "127.0.0.1", self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def _refuse(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()
        self._cut(set(self._writers))

    async def _stall(self) -> None:
        self._stalled = True
        self._stalled_writers = set(self._writers)

    async def _resume(self) -> None:
        self._stalled = False
        self._cut(self._stalled_writers)
        self._stalled_writers = set()
        if self._server is None:
            await self._listen()

    def _cut(self, writers: set[asyncio.StreamWriter]) -> None:
        for writer in writers:
            self._writers.discard(writer)
            writer.transport.abort()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        if self._stalled:
            # Accepted while stalled: held (nothing sent upstream) until cut on resume.
            self._stalled_writers.add(writer)
            with contextlib.suppress(Exception):
                while await reader.read(65536):
                    pass
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            self._cut({writer})
            return
        self._writers.add(up_writer)
        await asyncio.gather(
            self._pump(reader, up_writer), self._pump(up_reader, writer), return_exceptions=True
        )
        self._cut({writer, up_writer})

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            if self._stalled:
                # Swallowed: a stalled link delivers nothing, now or later.
                self._stalled_writers.add(writer)
                continue
            if writer in self._stalled_writers or writer.transport.is_closing():
                return
            writer.write(data)
            await writer.drain()
        # The sender closed its side: close the same side towards the receiver, as a TCP
        # connection would. Without this a WebSocket client waits out its close timeout
        # (10 s) for the server's close, which never reaches it.
        if not writer.transport.is_closing() and writer.can_write_eof():
            with contextlib.suppress(OSError):
                writer.write_eof()


async def _cancel_tasks() -> None:
    """End every connection's task, so the loop closes with none pending."""
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
