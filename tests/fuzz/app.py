"""The registry the HTTP and WebSocket fuzz targets call: one actor that echoes and keeps
what it is given (so a value accepted but not sendable back shows on the answer)."""

from __future__ import annotations

from typing import Any

from perdure import actor, setup


def _put(c: Any, value: Any) -> None:
    c.state["value"] = value


def _get(c: Any) -> Any:
    return c.state["value"]


def _echo(c: Any, *args: Any) -> Any:
    return list(args)


box = actor(state={"value": None}, actions={"put": _put, "get": _get, "echo": _echo})
registry = setup(use={"box": box}, max_outgoing_message_size=262144)
