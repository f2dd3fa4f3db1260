"""The management REST API the official client uses to resolve actors (JSON only).

- ``GET /actors?name=&key=`` — the actor with that name and (serialised) key;
  ``GET /actors?actor_ids=a,b`` — actors by id; ``GET /actors?name=`` — all actors of a
  name (``limit``, ``cursor`` page through them). Answer: ``{actors: [...], pagination}``.
- ``PUT /actors`` — get or create ``{name, key, input?, runner_name_selector,
  crash_policy}`` → ``{actor, created}``. ``key`` is the serialised form
  (:func:`perdure.keys.serialize_key`), ``input`` base64 CBOR. A key part containing a
  comma is refused here: the official client addresses a get-or-create handle through
  the gateway's comma-joined ``rvt-key`` too, which would reach a different actor.
- ``POST /actors`` — create (``actor.duplicate_key`` if the key exists) → ``{actor}``.
- ``DELETE /actors/{id}`` — destroy (``on_destroy`` runs, data deleted) → ``{}``.
- ``GET /actors/names`` — the registered actor names.

A client address past its rate of creation (docs/edge.md, "Per-client caps") gets 429
``request.creation_rate_limited`` from ``PUT`` (when the actor is new) and ``POST``.

All routes accept and ignore ``?namespace=``. The ``actor`` object mirrors the engine's:
``actor_id``, ``name``, ``key``, ``create_ts`` and the engine's other fields (constant
or ``null`` here: perdure has one namespace, one datacenter and no runner pools).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from perdure.errors import InvalidRequest, status_for
from perdure.keys import Key, deserialize_key, normalize_key, serialize_key
from perdure.runtime import ActorRuntime, ActorSummary
from perdure.server.edge.asgi import read_body
from perdure.server.edge.client_caps import UNLIMITED, ClientLimits
from perdure.server.edge.wire_errors import error_body, header_text, public_error
from perdure.server.gateway.target import check_actor_name, decode_input

__all__ = [
    "actor_object",
    "json_errors",
    "json_response",
    "management_routes",
    "read_json_object",
]

Endpoint = Callable[[Request], Awaitable[Response]]
_MAX_PAGE = 1000


def json_response(value: Any, status: int = 200) -> Response:
    """A compact JSON response (``nosniff``: a browser never takes it for a page)."""
    body = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    return Response(
        body, status, {"x-content-type-options": "nosniff"}, media_type="application/json"
    )


def actor_object(record: ActorSummary) -> dict[str, Any]:
    """The engine-shaped ``actor`` object for a stored actor."""
    return {
        "actor_id": record.actor_id,
        "name": record.name,
        "key": serialize_key(record.key),
        "namespace_id": "default",
        "datacenter": "default",
        "runner_name_selector": "default",
        "crash_policy": "sleep",
        "create_ts": record.created_at,
        "start_ts": None,
        "pending_allocation_ts": None,
        "connectable_ts": None,
        "sleep_ts": None,
        "reschedule_ts": None,
        "destroy_ts": None,
    }


def json_errors(endpoint: Endpoint) -> Endpoint:
    """Answer any failure with the JSON error body and ``x-rivet-error``."""

    async def wrapped(request: Request) -> Response:
        try:
            return await endpoint(request)
        except Exception as exc:
            error = public_error(exc)
            response = Response(
                error_body(error, "json", None), status_for(error), media_type="application/json"
            )
            response.headers["x-rivet-error"] = header_text(error.identifier).decode()
            response.headers["x-content-type-options"] = "nosniff"
            retry_after = getattr(error, "retry_after", None)  # store.unavailable, store.full
            if retry_after is not None:
                response.headers["retry-after"] = str(retry_after)
            return response

    wrapped.__name__ = endpoint.__name__
    wrapped.__doc__ = endpoint.__doc__
    return wrapped


class _Management:
    def __init__(self, runtime: ActorRuntime, limits: ClientLimits) -> None:
        self.limits = limits
        self.dispatch = runtime.dispatch
        self.actor_names = list(runtime.registry.actors)
        self.options = runtime.registry.options

    async def list_actors(self, request: Request) -> Response:
        """``GET /actors``: by ids, by name and key, or every actor of a name."""
        query = request.query_params
        records: list[ActorSummary] = []
        cursor: str | None = None
        if "actor_ids" in query:
            for actor_id in filter(None, query["actor_ids"].split(",")[:_MAX_PAGE]):
                record = await self.dispatch.get(actor_id)
                if record is not None:
                    records.append(record)
        elif "key" in query:
            key_name = query.get("name", "")
            check_actor_name(key_name)
            record = await self.dispatch.find(key_name, _parse_key(query["key"]))
            records = [] if record is None else [record]
        else:
            name = query.get("name")
            limit = _limit(query.get("limit"))
            records = await self.dispatch.list(name=name, after=query.get("cursor"), limit=limit)
            cursor = records[-1].actor_id if len(records) == limit else None
        return json_response(
            {"actors": [actor_object(r) for r in records], "pagination": {"cursor": cursor}}
        )

    async def get_or_create(self, request: Request) -> Response:
        """``PUT /actors``: get or create by name and key → ``{actor, created}``."""
        name, key, actor_input = await self._creation_body(request)
        if any("," in part for part in key):
            raise InvalidRequest(
                "A get-or-create key part may not contain `,`: the gateway's rvt-key joins "
                "parts with commas, so this actor would be unreachable by key. Use POST "
                "/actors and address the actor by id.",
                code="ambiguous_key",
            )
        creation = self.limits.creation_gate(request.scope)
        if creation is not None:  # an actor that exists is no creation
            found = await self.dispatch.find(name, key)
            if found is not None:
                return json_response({"actor": actor_object(found), "created": False})
            creation()
        record, created = await self.dispatch.get_or_create(name, key, actor_input)
        return json_response({"actor": actor_object(record), "created": created})

    async def create(self, request: Request) -> Response:
        """``POST /actors``: create → ``{actor}``; ``actor.duplicate_key`` if it exists."""
        name, key, actor_input = await self._creation_body(request)
        creation = self.limits.creation_gate(request.scope)
        if creation is not None:
            creation()
        record = await self.dispatch.create(name, key, actor_input)
        return json_response({"actor": actor_object(record)})

    async def destroy(self, request: Request) -> Response:
        """``DELETE /actors/{actor_id}``: destroy the actor (``on_destroy`` runs)."""
        await self.dispatch.ref(request.path_params["actor_id"]).destroy()
        return json_response({})

    async def names(self, request: Request) -> Response:
        """``GET /actors/names``: the registered actor names."""
        names: dict[str, Any] = {name: {"metadata": {}} for name in self.actor_names}
        return json_response({"names": names, "pagination": {"cursor": None}})

    async def _creation_body(self, request: Request) -> tuple[str, Key, Any]:
        body = await read_json_object(request, self.options.max_http_body_size)
        name = body.get("name")
        if not isinstance(name, str):
            raise InvalidRequest("`name` must be a string.", code="unknown_name")
        check_actor_name(name)
        self.dispatch.definition(name)
        raw_key = body.get("key")
        if raw_key is not None and not isinstance(raw_key, str):
            raise InvalidRequest("`key` must be a serialised key string.", code="invalid_key")
        key = () if raw_key is None else _parse_key(raw_key)
        raw_input = body.get("input")
        if raw_input is not None and not isinstance(raw_input, str):
            raise InvalidRequest("`input` must be base64 CBOR.", code="invalid_input")
        return name, key, decode_input(raw_input, self.options.max_input_size, urlsafe=False)


async def read_json_object(
    request: Request, limit: int, *, empty: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The request's JSON object body (``actor.invalid_request`` otherwise). ``empty``:
    what an empty body stands for, when one is allowed."""
    data = await read_body(request.scope, request.receive, limit)
    if empty is not None and not data.strip():
        return empty
    try:
        body = json.loads(data)
    except (ValueError, RecursionError):
        raise InvalidRequest("The request body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    return body


def _parse_key(text: str) -> Key:
    if len(text) > 4096:
        raise InvalidRequest("The key is too long.", code="invalid_key")
    return normalize_key(deserialize_key(text))


def _limit(text: str | None) -> int:
    if text is None:
        return 100
    try:
        value = int(text)
    except ValueError:
        raise InvalidRequest("`limit` must be an integer.") from None
    return max(1, min(value, _MAX_PAGE))


def management_routes(runtime: ActorRuntime, limits: ClientLimits = UNLIMITED) -> list[Route]:
    """The ``/actors`` routes for ``runtime``; ``limits``: the per-client caps (the rate
    of creation, :mod:`perdure.server.edge.client_caps`)."""
    api = _Management(runtime, limits)
    return [
        Route("/actors", json_errors(api.list_actors), methods=["GET"]),
        Route("/actors", json_errors(api.get_or_create), methods=["PUT"]),
        Route("/actors", json_errors(api.create), methods=["POST"]),
        Route("/actors/names", json_errors(api.names), methods=["GET"]),
        Route("/actors/{actor_id}", json_errors(api.destroy), methods=["DELETE"]),
    ]
