"""The fixture actor of rivetkit's actor-kv driver test (``driver-test-suite``'s
``kvActor``), written with perdure's ``c.kv``.

rivetkit's actions take text keys and values (``keyType: "text"``) and an
ArrayBuffer round trip given as a list of byte values; here a text value is a ``str``
and an ArrayBuffer is ``bytes`` (both kept as they are: perdure's values round-trip).
``listTextRange`` and ``deleteTextRange`` are ``[start, end)``, as in rivetkit.
Served by the official-client suite (``tests/support/apps/compat.py``) and used in
process by tests/runtime/actor/test_kv_rivetkit.py.
"""

from __future__ import annotations

from typing import Any

from perdure import ActionContext, actor, setup


async def put_text(c: ActionContext, key: str, value: str) -> bool:
    await c.kv.put(key, value)
    return True


async def get_text(c: ActionContext, key: str) -> str | None:
    value: str | None = await c.kv.get(key)
    return value


async def list_text(c: ActionContext, prefix: str) -> list[dict[str, Any]]:
    return [{"key": key, "value": value} for key, value in await c.kv.list(prefix)]


async def list_text_range(
    c: ActionContext, start: str, end: str, options: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    options = options or {}
    rows = await c.kv.list_range(
        start, end, reverse=bool(options.get("reverse")), limit=options.get("limit")
    )
    return [{"key": key, "value": value} for key, value in rows]


async def delete_text_range(c: ActionContext, start: str, end: str) -> bool:
    await c.kv.delete_range(start, end)
    return True


async def roundtrip_array_buffer(c: ActionContext, key: str, values: list[int]) -> list[int] | None:
    await c.kv.put(key, bytes(values))
    result = await c.kv.get(key)
    if result is None:
        return None
    return list(result)


KV_ACTIONS: dict[str, Any] = {
    "putText": put_text,
    "getText": get_text,
    "listText": list_text,
    "listTextRange": list_text_range,
    "deleteTextRange": delete_text_range,
    "roundtripArrayBuffer": roundtrip_array_buffer,
}
kv_actor = actor(state={}, actions=KV_ACTIONS)


async def put_bytes(c: ActionContext, key: bytes, value: Any) -> None:
    await c.kv.put(key, value)


# `perdure serve tests.support.apps.kv:registry` (the admin API and CLI tests); putBytes
# writes a bytes key (given as a Uint8Array over the wire).
registry = setup(use={"kvActor": actor(state={}, actions={**KV_ACTIONS, "putBytes": put_bytes})})
