"""Reading a real server's admin API from async tests.

The admin API reads the store, so looking at an actor this way does not wake it, nor
move it in a cluster: what a test needs to watch an actor that only its alarms, or
other actors, are meant to wake.
"""

from __future__ import annotations

from typing import Any

import httpx

__all__ = ["actor_details", "actors_named"]

TIMEOUT = 10.0


async def actor_details(url: str, actor_id: str) -> dict[str, Any]:
    """``GET /admin/actors/{actor_id}`` of the server at ``url`` (it must answer 200)."""
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as admin:
        answer = await admin.get(f"/admin/actors/{actor_id}")
    answer.raise_for_status()
    details: dict[str, Any] = answer.json()
    return details


async def actors_named(url: str, name: str) -> list[dict[str, Any]]:
    """The stored actors called ``name`` (``GET /admin/actors?name=``, its first page)."""
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as admin:
        answer = await admin.get("/admin/actors", params={"name": name})
    answer.raise_for_status()
    actors: list[dict[str, Any]] = answer.json()["actors"]
    return actors
