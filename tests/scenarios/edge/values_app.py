"""The registry of the decoding and value tests:
``perdure serve tests.scenarios.edge.values_app:registry``.

``box`` keeps whatever it is given (``put``) and gives it back (``get``), so a value that
was accepted but cannot be sent back shows on the next read.
"""

from __future__ import annotations

from typing import Any

from perdure import actor, setup


def _put(c: Any, value: Any) -> None:
    c.state["value"] = value


def _get(c: Any) -> Any:
    return c.state["value"]


def _echo(c: Any, value: Any) -> Any:
    return value


def _big(c: Any, text: str, times: int) -> list[str]:
    # Actor code answering a value far over the outgoing limit: one string, many times.
    return [text] * times


def _poison(c: Any) -> None:
    # Values stored by actor code that no JSON client can read (a stored value the
    # network could no longer create).
    c.state["value"] = {"inf": float("inf"), "huge": 10**5000}


box = actor(
    state={"value": None},
    actions={"put": _put, "get": _get, "echo": _echo, "big": _big, "poison": _poison},
)

# Small frame limits, so the WebSocket cases are cheap to provoke; incoming HTTP actions
# up to 20 MiB (the default is 64 KiB), so that bodies can be far over the decoding
# budgets (docs/edge.md, "Budgets").
registry = setup(
    use={"box": box},
    max_outgoing_message_size=262144,
    max_incoming_message_size=20 * 1024 * 1024,
)
