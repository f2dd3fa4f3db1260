"""The admin API: JSON over HTTP under ``/admin/``, described by ``/admin/openapi.json``.

What an operator needs to see inside a running server and repair it: actor types and
counts, a search over actors, one actor's state, connections, queue, schedules with
their fire history and workflow history, a live feed of its changes (Server-Sent
Events), and operations — call an action, send a queue message, retry a failed
workflow or replay it from a step, cancel a schedule, list, requeue or drop dead letters
(docs/queues.md), destroy the actor. The inspector
UI (``/ui/``) and the ``perdure inspect``/``workflow``/``destroy`` commands are built on
it. Every route is guarded by :class:`~perdure.server.edge.admin_access.AdminAccess` (loopback
only unless the server has an admin token), and answers errors with perdure's JSON
error body. Reads go through :class:`perdure.runtime.admin.inspector.ActorInspector`, changes
through the dispatch seam (so in a cluster they reach the node that owns the actor).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from perdure._time import send_delay
from perdure.errors import ActorNotFound, InvalidRequest
from perdure.handles import WORKFLOW_CANCEL_ACTION, WORKFLOW_PAUSE_ACTION, WORKFLOW_RESUME_ACTION
from perdure.protocol.values import from_json_value
from perdure.runtime import (
    ActorInspector,
    ActorRuntime,
    Administer,
    AwakeFilter,
    CallAction,
    SendMessage,
    shown,
)
from perdure.server.admin.openapi import openapi_document
from perdure.server.edge.admin_access import AdminAccess
from perdure.server.edge.mount import link_root
from perdure.server.gateway.management import Endpoint, json_errors, json_response, read_json_object

__all__ = ["ADMIN_PREFIX", "admin_routes"]

ADMIN_PREFIX = "/admin"
# Seconds between keep-alive comments on an idle feed (proxies close silent streams).
KEEP_ALIVE = 15.0
# Seconds between reads of an actor that another node of the cluster serves.
POLL = 2.0
_MAX_LIMIT = 500
_MAX_ADMIN_BODY = 4 * 1024 * 1024


class _AdminApi:
    def __init__(self, runtime: ActorRuntime, access: AdminAccess) -> None:
        self.runtime = runtime
        self.dispatch = runtime.dispatch
        self.inspector = ActorInspector(runtime)
        self.access = access

    # ------------------------------------------------------------------ reads

    async def overview(self, request: Request) -> Response:
        """``GET /admin/overview``."""
        return json_response(await self.inspector.overview())

    async def actors(self, request: Request) -> Response:
        """``GET /admin/actors?name=&q=&status=&limit=&cursor=``."""
        query = request.query_params
        name = query.get("name") or None
        if name is not None:
            self.dispatch.definition(name)  # actor.unknown_name for an unknown type
        status = query.get("status", "all")
        if status not in ("all", "awake", "asleep"):
            raise InvalidRequest("`status` is `all`, `awake` or `asleep`.", code="invalid_filter")
        awake: AwakeFilter = status  # type: ignore[assignment]
        answer = await self.inspector.search(
            name=name,
            text=query.get("q", ""),
            awake=awake,
            limit=_limit(query.get("limit")),
            cursor=query.get("cursor") or None,
        )
        return json_response(answer)

    async def actor(self, request: Request) -> Response:
        """``GET /admin/actors/{id}``."""
        return json_response(await self.inspector.details(request.path_params["actor_id"]))

    async def feed(self, request: Request) -> Response:
        """``GET /admin/actors/{id}/feed``: a ``snapshot`` event, then live changes."""
        actor_id = request.path_params["actor_id"]
        await self.inspector.details(actor_id)  # actor.not_found before streaming starts
        return StreamingResponse(
            self._stream(actor_id),
            media_type="text/event-stream",
            headers={"cache-control": "no-store", "x-accel-buffering": "no"},
        )

    async def _stream(self, actor_id: str) -> AsyncIterator[bytes]:
        # In a cluster the actor may live on another node, whose changes this node does
        # not see: there the feed reads the actor again every POLL seconds and sends a
        # new snapshot when it changed.
        polling = self.runtime.cluster is not None
        loop = asyncio.get_running_loop()
        async with self.runtime.feed.watch(actor_id) as watch:
            # Read once the watch is open: a change made meanwhile is in the snapshot or
            # comes after it, never lost between the two.
            snapshot = await self._snapshot(actor_id)
            if snapshot is None:
                return
            number = 0
            yield _sse(number, "snapshot", snapshot)
            quiet_since = loop.time()
            while True:
                change = await watch.next(POLL if polling else KEEP_ALIVE)
                if change is None and polling and not self.runtime.is_live(actor_id):
                    fresh = await self._snapshot(actor_id)
                    if fresh != snapshot:
                        change = ("snapshot", fresh or {**snapshot, "destroyed": True})
                        snapshot = change[1]
                if change is None:
                    if loop.time() - quiet_since >= KEEP_ALIVE:
                        quiet_since = loop.time()
                        yield b": keep-alive\n\n"
                    continue
                kind, data = change
                if kind == "end":
                    return
                number += 1
                quiet_since = loop.time()
                yield _sse(number, kind, data)
                if kind == "resync" or data.get("destroyed"):
                    return

    async def _snapshot(self, actor_id: str) -> dict[str, Any] | None:
        """The actor's details, or ``None`` once it is destroyed."""
        try:
            return await self.inspector.details(actor_id)
        except ActorNotFound:
            return None

    async def openapi(self, request: Request) -> Response:
        """``GET /admin/openapi.json``; mounted in a host app, the document's server is
        perdure's prefix, so that the paths it lists resolve there."""
        root = link_root(request.scope)
        if not root:
            return json_response(openapi_document())
        return json_response({**openapi_document(), "servers": [{"url": root}]})

    # ------------------------------------------------------------- operations

    async def call(self, request: Request) -> Response:
        """``POST /admin/actors/{id}/actions/{action}`` ``{"args": [...]}``."""
        actor_id = request.path_params["actor_id"]
        body = await self._body(request)
        args = body.get("args", [])
        if not isinstance(args, list):
            raise InvalidRequest("`args` must be a JSON array.", code="invalid_args")
        name = await self._name_of(actor_id)
        operation = CallAction(request.path_params["action"], from_json_value(args, "args"))
        self.dispatch.check(name, operation)
        output = await self.dispatch.ref(actor_id).perform(operation)
        return json_response({"output": shown(output)})

    async def send(self, request: Request) -> Response:
        """``POST /admin/actors/{id}/queues/{queue}`` ``{"body", "wait", "timeout"}``,
        and ``delay`` (seconds) or ``at`` (epoch ms) for a delayed send."""
        actor_id = request.path_params["actor_id"]
        body = await self._body(request)
        wait = body.get("wait", False)
        timeout = body.get("timeout")
        if not isinstance(wait, bool):
            raise InvalidRequest("`wait` must be true or false.", code="invalid_wait")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0
        ):
            raise InvalidRequest(
                "`timeout` must be seconds (a number ≥ 0).", code="invalid_timeout"
            )
        delay, at = send_delay(body.get("delay"), body.get("at"), wait=wait)
        name = await self._name_of(actor_id)
        message = SendMessage(
            request.path_params["queue"],
            from_json_value(body.get("body"), "body"),
            wait,
            None if timeout is None else float(timeout),
            delay=delay,
            at=at,
        )
        checked = self.dispatch.check(name, message)
        result = await self.dispatch.ref(actor_id).perform(checked)
        return json_response({"status": result.status, "response": shown(result.response)})

    async def retry(self, request: Request) -> Response:
        """``POST /admin/actors/{id}/workflow/retry``."""
        actor_id = request.path_params["actor_id"]
        await self._name_of(actor_id)
        status = await self.dispatch.ref(actor_id).administer(Administer("retry"))
        return json_response({"workflow": _status(status)})

    async def replay(self, request: Request) -> Response:
        """``POST /admin/actors/{id}/workflow/replay`` ``{"from": location}``."""
        actor_id = request.path_params["actor_id"]
        location = (await self._body(request)).get("from")
        if not isinstance(location, str) or not location:
            raise InvalidRequest(
                "Say which step to replay from: `from` is a history location.",
                code="missing_step",
            )
        await self._name_of(actor_id)
        status = await self.dispatch.ref(actor_id).administer(Administer("replay", location))
        return json_response({"workflow": _status(status)})

    async def fork(self, request: Request) -> Response:
        """``POST /admin/actors/{id}/workflow/fork`` ``{"from": location, "input"?,
        "message"?}``: a new run from that step; the old one is archived."""
        actor_id = request.path_params["actor_id"]
        body = await self._body(request)
        location = body.get("from")
        if not isinstance(location, str) or not location:
            raise InvalidRequest(
                "Say which step to fork from: `from` is a history location.",
                code="missing_step",
            )
        given: dict[str, Any] = {
            name: from_json_value(body[name], name) for name in ("input", "message") if name in body
        }
        await self._name_of(actor_id)
        operation = Administer("fork", location, given)
        status = await self.dispatch.ref(actor_id).administer(operation)
        return json_response({"workflow": _status(status), "run": status.get("run")})

    async def control(self, request: Request) -> Response:
        """``POST /admin/actors/{id}/workflow/{cancel|pause|resume}`` (a cancel takes
        ``{"reason": text}``): the workflow's status once the request is recorded."""
        actor_id = request.path_params["actor_id"]
        kind = request.url.path.rstrip("/").rpartition("/")[2]
        args: list[Any] = []
        if kind == "cancel":
            reason = (await self._body(request)).get("reason")
            if reason is not None and not isinstance(reason, str):
                raise InvalidRequest("`reason` must be text.", code="invalid_reason")
            args = [reason]
        name = await self._name_of(actor_id)
        operation = CallAction(_CONTROLS[kind], args)
        self.dispatch.check(name, operation)
        status = await self.dispatch.ref(actor_id).perform(operation)
        return json_response({"workflow": _status(status)})

    async def unschedule(self, request: Request) -> Response:
        """``DELETE /admin/actors/{id}/schedules/{schedule_id}``."""
        actor_id = request.path_params["actor_id"]
        await self._name_of(actor_id)
        schedule_id = request.path_params["schedule_id"]
        await self.dispatch.ref(actor_id).administer(Administer("unschedule", schedule_id))
        return json_response({})

    async def dead_letters(self, request: Request) -> Response:
        """``GET /admin/actors/{id}/dead-letters?queue=``: read without waking the actor."""
        actor_id = request.path_params["actor_id"]
        queue = request.query_params.get("queue") or None
        letters = await self.inspector.dead_letters(actor_id, queue)
        return json_response({"dead_letters": [shown(letter) for letter in letters]})

    async def kv(self, request: Request) -> Response:
        """``GET /admin/actors/{id}/kv?prefix=&after=&limit=``: one page of the actor's
        KV records, read without waking it."""
        query = request.query_params
        page = await self.inspector.kv(
            request.path_params["actor_id"],
            prefix=query.get("prefix"),
            after=query.get("after") or None,
            limit=_limit(query.get("limit")),
        )
        return json_response(page)

    async def db_tables(self, request: Request) -> Response:
        """``GET /admin/actors/{id}/db/tables``: the tables of the actor's SQL database
        with their schema, read from the store as committed (the actor is not woken)."""
        tables = await self.inspector.db_tables(request.path_params["actor_id"])
        return json_response({"tables": tables})

    async def db_rows(self, request: Request) -> Response:
        """``GET /admin/actors/{id}/db/tables/{name}/rows?offset=&limit=``."""
        query = request.query_params
        page = await self.inspector.db_rows(
            request.path_params["actor_id"],
            request.path_params["table"],
            offset=_offset(query.get("offset")),
            limit=_limit(query.get("limit")),
        )
        return json_response(page)

    async def db_query(self, request: Request) -> Response:
        """``POST /admin/actors/{id}/db/query`` with ``{"sql": "...", "params": [...]}``:
        a read-only query (``db.read_only`` for one that writes)."""
        body = await self._body(request)
        sql, params = body.get("sql"), body.get("params", [])
        if not isinstance(sql, str) or not sql.strip():
            raise InvalidRequest("`sql` is the query, a string.", code="invalid_sql")
        if not isinstance(params, (list, dict)):
            raise InvalidRequest("`params` is a list or an object.", code="invalid_params")
        values = from_json_value(params, "the query's params")
        answer = await self.inspector.db_query(request.path_params["actor_id"], sql, values)
        return json_response(answer)

    async def requeue(self, request: Request) -> Response:
        """``POST /admin/actors/{id}/dead-letters/{message_id}/requeue``."""
        actor_id = request.path_params["actor_id"]
        await self._name_of(actor_id)
        operation = Administer("requeue", request.path_params["message_id"])
        return json_response({"requeued": await self.dispatch.ref(actor_id).administer(operation)})

    async def drop(self, request: Request) -> Response:
        """``DELETE /admin/actors/{id}/dead-letters/{message_id}``."""
        actor_id = request.path_params["actor_id"]
        await self._name_of(actor_id)
        operation = Administer("drop", request.path_params["message_id"])
        await self.dispatch.ref(actor_id).administer(operation)
        return json_response({})

    async def destroy(self, request: Request) -> Response:
        """``DELETE /admin/actors/{id}``."""
        actor_id = request.path_params["actor_id"]
        await self._name_of(actor_id)
        await self.dispatch.ref(actor_id).destroy()
        return json_response({})

    # ---------------------------------------------------------------- helpers

    async def _name_of(self, actor_id: str) -> str:
        """The actor's type name (``actor.not_found`` if there is no such actor: nothing
        is created or woken for a wrong id)."""
        summary = await self.dispatch.get(actor_id)
        if summary is None:
            raise ActorNotFound()
        return summary.name

    async def _body(self, request: Request) -> dict[str, Any]:
        return await read_json_object(request, _MAX_ADMIN_BODY, empty={})

    def guarded(self, endpoint: Endpoint) -> Endpoint:
        """``endpoint`` behind the access rule, answering errors as JSON bodies."""

        async def checked(request: Request) -> Response:
            self.access.check(request)
            return await endpoint(request)

        checked.__name__ = endpoint.__name__
        checked.__doc__ = endpoint.__doc__
        return json_errors(checked)


def _sse(number: int, kind: str, data: dict[str, Any]) -> bytes:
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return f"id: {number}\nevent: {kind}\ndata: {text}\n\n".encode()


# The workflow controls of the admin API, and the built-in action each one calls.
_CONTROLS = {
    "cancel": WORKFLOW_CANCEL_ACTION,
    "pause": WORKFLOW_PAUSE_ACTION,
    "resume": WORKFLOW_RESUME_ACTION,
}


def _status(status: dict[str, Any]) -> dict[str, Any]:
    return {
        "status": status.get("status"),
        "error": shown(status.get("error")),
        "output": shown(status.get("output")),
    }


def _limit(text: str | None) -> int:
    if text is None:
        return 50
    try:
        value = int(text)
    except ValueError:
        raise InvalidRequest("`limit` must be an integer.", code="invalid_limit") from None
    return max(1, min(value, _MAX_LIMIT))


def _offset(text: str | None) -> int:
    try:
        value = int(text or 0)
    except ValueError:
        raise InvalidRequest("`offset` must be an integer.", code="invalid_offset") from None
    return max(0, value)


def admin_routes(runtime: ActorRuntime, access: AdminAccess) -> list[Route]:
    """The ``/admin/…`` routes (answering 403 ``admin.forbidden`` when the admin
    surface is turned off)."""
    api = _AdminApi(runtime, access)
    guard = api.guarded
    actor = ADMIN_PREFIX + "/actors/{actor_id}"
    return [
        Route(ADMIN_PREFIX + "/openapi.json", guard(api.openapi), methods=["GET"]),
        Route(ADMIN_PREFIX + "/overview", guard(api.overview), methods=["GET"]),
        Route(ADMIN_PREFIX + "/actors", guard(api.actors), methods=["GET"]),
        Route(actor, guard(api.actor), methods=["GET"]),
        Route(actor, guard(api.destroy), methods=["DELETE"]),
        Route(actor + "/feed", guard(api.feed), methods=["GET"]),
        Route(actor + "/actions/{action}", guard(api.call), methods=["POST"]),
        Route(actor + "/queues/{queue}", guard(api.send), methods=["POST"]),
        Route(actor + "/workflow/retry", guard(api.retry), methods=["POST"]),
        Route(actor + "/workflow/replay", guard(api.replay), methods=["POST"]),
        Route(actor + "/workflow/fork", guard(api.fork), methods=["POST"]),
        *(
            Route(actor + f"/workflow/{kind}", guard(api.control), methods=["POST"])
            for kind in _CONTROLS
        ),
        Route(actor + "/schedules/{schedule_id}", guard(api.unschedule), methods=["DELETE"]),
        Route(actor + "/dead-letters", guard(api.dead_letters), methods=["GET"]),
        Route(actor + "/kv", guard(api.kv), methods=["GET"]),
        Route(actor + "/db/tables", guard(api.db_tables), methods=["GET"]),
        Route(actor + "/db/tables/{table}/rows", guard(api.db_rows), methods=["GET"]),
        Route(actor + "/db/query", guard(api.db_query), methods=["POST"]),
        Route(actor + "/dead-letters/{message_id}/requeue", guard(api.requeue), methods=["POST"]),
        Route(actor + "/dead-letters/{message_id}", guard(api.drop), methods=["DELETE"]),
    ]
