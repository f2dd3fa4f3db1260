"""Subscribers as other clients than perdure's: the official RivetKit client, and one that
speaks the plain RivetKit protocol by hand.

:class:`PlainSubscriber` speaks the plain RivetKit protocol (JSON, as the official client
does), with no resume: it opens ``/gateway/NAME/connect``, waits for ``Init``, asks for
one event and keeps every ``Event`` frame's arguments. When its socket closes (its node
died, or the actor moved and the node closed it) it opens a new one on the node its
policy names, as an official client behind a balancer would; events emitted while it
is away are missed (a plain client has no cursor), but none may arrive twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

__all__ = ["OfficialSubscriber", "PlainSubscriber"]

OPEN_TIMEOUT = 5.0
RETRY_PAUSE = 0.1


class PlainSubscriber:
    """Follows ``event`` of actor ``name``/``key`` through ``urls``. ``next_url(index,
    failed)`` says which of ``urls`` to open next after the socket on ``urls[index]``
    closed (``failed``: it could not even be opened)."""

    def __init__(
        self,
        urls: list[str],
        name: str,
        key: str,
        event: str,
        next_url: Callable[[int, bool], int],
        start: int = 0,
    ) -> None:
        query = urlencode({"rvt-method": "getOrCreate", "rvt-key": key})
        self.urls = [
            f"{u.replace('http://', 'ws://', 1)}/gateway/{name}/connect?{query}" for u in urls
        ]
        self.event = event
        self.next_url = next_url
        self.index = start
        self.events: list[Any] = []
        self.opened: list[int] = []  # the node of each socket that reached Init
        self._task: asyncio.Task[None] | None = None

    def start(self) -> PlainSubscriber:
        self._task = asyncio.create_task(self._follow())
        return self

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def wait_open(self, count: int = 1, timeout: float = 20.0) -> None:
        async with asyncio.timeout(timeout):
            while len(self.opened) < count:
                await asyncio.sleep(0.02)

    async def _follow(self) -> None:
        while True:
            opened = len(self.opened)
            with contextlib.suppress(OSError, ConnectionClosed, InvalidHandshake, TimeoutError):
                await self._one_socket()
            self.index = self.next_url(self.index, len(self.opened) == opened)
            await asyncio.sleep(RETRY_PAUSE)

    async def _one_socket(self) -> None:
        """Follow the events on one socket until it closes."""
        protocols: Any = ["rivet", "rivet_encoding.json"]
        async with connect(
            self.urls[self.index], subprotocols=protocols, open_timeout=OPEN_TIMEOUT
        ) as ws:
            body = json.loads(await asyncio.wait_for(ws.recv(), OPEN_TIMEOUT))["body"]
            if body.get("tag") != "Init":
                return
            self.opened.append(self.index)
            request = {"eventName": self.event, "subscribe": True}
            await ws.send(json.dumps({"body": {"tag": "SubscriptionRequest", "val": request}}))
            async for raw in ws:
                body = json.loads(raw)["body"]
                if body.get("tag") == "Event" and body["val"]["name"] == self.event:
                    self.events.append(body["val"]["args"])


class OfficialSubscriber:
    """The official RivetKit client (``rivetkit/client``, JSON) following ``event`` of
    actor ``name``/``key`` through the node at ``url``, in a ``node`` process
    (``tests/scenarios/cluster/subscriber.mts``); it reconnects by itself, to that node.
    Skipped (failed in CI) without Node.js and the compat suite's packages."""

    def __init__(self, url: str, name: str, key: str, event: str) -> None:
        from tests.scenarios.compat.runner import COMPAT_DIR, node_env, node_or_skip

        self.command = [
            node_or_skip(),
            "--import",
            "tsx",
            "../cluster/subscriber.mts",
            url,
            name,
            key,
            event,
        ]
        self.cwd = COMPAT_DIR
        self.env = node_env()
        self.events: list[Any] = []
        self.statuses: list[str] = []
        self.errors: list[str] = []
        self.ready = threading.Event()
        self.process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    def start(self, timeout: float = 30.0) -> OfficialSubscriber:
        """Start it and wait (bounded) until its connection is open."""
        self.process = subprocess.Popen(
            self.command,
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self.ready.wait(timeout):
            self.stop()
            raise AssertionError(f"the official client did not connect in {timeout} s")
        return self

    def stop(self) -> None:
        """SIGTERM (then SIGKILL), and wait for its output to end."""
        process = self.process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        if self._reader is not None:
            self._reader.join(10)
        if process is not None and process.stdout is not None:
            process.stdout.close()

    def _read(self) -> None:
        assert self.process is not None
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with contextlib.suppress(ValueError):
                message = json.loads(line)
                if "event" in message:
                    self.events.append(message["event"])
                elif "status" in message:
                    self.statuses.append(message["status"])
                elif "error" in message:
                    self.errors.append(message["error"])
                elif message.get("ready"):
                    self.ready.set()
