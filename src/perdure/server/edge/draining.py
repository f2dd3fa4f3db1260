"""uvicorn's server, with a cluster node's drain before uvicorn shuts down.

On the first SIGTERM or SIGINT a cluster node marks itself draining and puts its actors
to sleep, each lease released as it goes, while it still serves: a request for one of
its actors waits for the stop and is then handed to the node that takes the actor.
Only then does uvicorn stop listening, finish in-flight requests and close connections.
So a peer never has a forwarded request cut off by a node going away on a kept-alive
connection, and no actor waits for a lease to expire. A lone server (no cluster) shuts
down as uvicorn always does (its runtime's stop puts the actors to sleep).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

import uvicorn

from perdure.runtime import ActorRuntime

__all__ = ["DRAIN_TIMEOUT", "DrainingServer"]

DRAIN_TIMEOUT = 60.0
"""Seconds the drain may take before uvicorn's shutdown begins anyway."""

_log = logging.getLogger("perdure.server")


class DrainingServer(uvicorn.Server):
    """``uvicorn.Server`` serving ``runtime``; see the module docstring."""

    def __init__(
        self,
        config: uvicorn.Config,
        runtime: ActorRuntime,
        on_stop: Sequence[Callable[[], None]] = (),
    ) -> None:
        """``on_stop``: what to call on the event loop when a stop signal comes, before
        uvicorn waits for open responses (the app's ``end_streams``)."""
        super().__init__(config)
        self.runtime = runtime
        self._on_stop = tuple(on_stop)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drain_started = False

    async def serve(self, sockets: Any = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        loop = self._loop
        if loop is not None:
            # Open inspector feeds never end by themselves: end them, or uvicorn would
            # wait out its graceful-shutdown timeout for them.
            loop.call_soon_threadsafe(self.runtime.feed.close_all)
            # Likewise senders waiting for a completion: they get `timedOut` now.
            loop.call_soon_threadsafe(self.runtime.release_waiting_senders)
            for stop in self._on_stop:  # the gateway's event streams
                loop.call_soon_threadsafe(stop)
        if self._drain_started or self.runtime.cluster is None or loop is None:
            super().handle_exit(sig, frame)
            return
        self._drain_started = True
        # A signal handler: hand the work to the event loop.
        loop.call_soon_threadsafe(lambda: loop.create_task(self._drain(sig, frame)))

    async def _drain(self, sig: int, frame: FrameType | None) -> None:
        try:
            await asyncio.wait_for(self.runtime.drain(), timeout=DRAIN_TIMEOUT)
        except Exception:
            _log.warning("draining did not finish; shutting down anyway", exc_info=True)
        finally:
            super().handle_exit(sig, frame)
