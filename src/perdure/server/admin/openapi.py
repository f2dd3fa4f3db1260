"""The OpenAPI 3.1 description of the admin API (served at ``/admin/openapi.json``)."""

from __future__ import annotations

import functools
from typing import Any

from perdure._version import __version__
from perdure.workflows.history import ENTRY_KINDS

__all__ = ["openapi_document"]

_ANY: dict[str, Any] = {"description": "Any value, in the RivetKit protocol's JSON form."}
_MS = {"type": "integer", "description": "Milliseconds since the Unix epoch."}
_MS_OR_NULL = {"type": ["integer", "null"], "description": "Milliseconds since the Unix epoch."}
_STRINGS = {"type": "array", "items": {"type": "string"}}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _object(properties: dict[str, Any], *, required: bool = True) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(properties)
    return schema


_SCHEMAS: dict[str, Any] = {
    "Error": _object(
        {
            "group": {"type": "string"},
            "code": {"type": "string"},
            "message": {"type": "string"},
            "metadata": _ANY,
        }
    ),
    "ActorType": _object(
        {
            "name": {"type": "string"},
            "kind": {"enum": ["actor", "workflow"]},
            "actors": {"type": "integer", "description": "Stored actors of this type."},
            "awake": {"type": "integer", "description": "Awake on the answering node."},
            "actions": _STRINGS,
            "queues": _STRINGS,
            "events": _STRINGS,
        }
    ),
    "ActorRow": _object(
        {
            "actor_id": {"type": "string"},
            "name": {"type": "string"},
            "key": _STRINGS,
            "created_at": _MS,
            "awake": {"type": "boolean"},
            "wake_at": _MS_OR_NULL,
        }
    ),
    "Connection": _object(
        {"id": {"type": "string"}, "params": _ANY, "state": _ANY, "subscriptions": _STRINGS}
    ),
    "QueueMessage": _object(
        {
            "id": {"type": "integer"},
            "name": {"type": "string"},
            "body": _ANY,
            "created_at": _MS,
            "held": {
                "type": "boolean",
                "description": "Received by the workflow as completable, not completed yet.",
            },
            "attempts": {
                "type": "integer",
                "description": "Deliveries to completable receives outside a workflow.",
            },
            "visible_at": {
                **_MS_OR_NULL,
                "description": "Hidden until then (leased, or given back with a delay).",
            },
            "due_at": {
                **_MS_OR_NULL,
                "description": "A delayed send: received from then on (null: not delayed).",
            },
        }
    ),
    "DeadLetter": _object(
        {
            "id": {"type": "integer"},
            "queue": {"type": "string"},
            "body": _ANY,
            "created_at": _MS,
            "attempts": {"type": "integer"},
            "dead_at": _MS,
            "error": {"type": ["string", "null"], "description": "Why it died."},
        }
    ),
    "QueueLimits": _object(
        {
            "concurrency": {"type": ["integer", "null"]},
            "rate": {
                "oneOf": [
                    _object({"limit": {"type": "integer"}, "period": {"type": "number"}}),
                    {"type": "null"},
                ]
            },
            "key": {"type": ["string", "null"], "description": "A body field, or `(function)`."},
            "in_progress": {"type": "integer"},
            "keys_total": {"type": "integer", "description": "Keys in progress or started."},
            "keys": {
                "type": "array",
                "description": "The 50 keys with the most in progress (docs/queues.md).",
                "items": _object(
                    {
                        "key": {"type": "string"},
                        "in_progress": {"type": "integer"},
                        "started": {"type": "integer"},
                    }
                ),
            },
        }
    ),
    "Fire": _object(
        {
            "seq": {"type": "integer"},
            "scheduled_at": _MS,
            "fired_at": _MS,
            "finished_at": _MS_OR_NULL,
            "result": {"enum": ["running", "ok", "error", "skipped"]},
            "error": _ANY,
        }
    ),
    "Schedule": _object(
        {
            "id": {"type": "string"},
            "kind": {"enum": ["at", "cron", "every"]},
            "name": {"type": ["string", "null"]},
            "action": {"type": "string"},
            "args": _ANY,
            "run_at": _MS,
            "created_at": _MS,
            "expression": {"type": ["string", "null"]},
            "timezone": {"type": ["string", "null"]},
            "interval_ms": {"type": ["integer", "null"]},
            "max_history": {"type": "integer"},
            "last_run_at": _MS_OR_NULL,
            "history": {"type": "array", "items": _ref("Fire")},
        }
    ),
    "HistoryEntry": _object(
        {
            "location": {"type": "string", "description": "e.g. `jobs/~3/apply`"},
            "name": {"type": "string"},
            "kind": {"enum": sorted(ENTRY_KINDS)},
            "status": {"type": "string"},
            "seq": {"type": "integer", "description": "Order in which entries were recorded."},
            "depth": {"type": "integer"},
            "iteration": {"type": ["integer", "null"]},
            "attempts": {"type": ["integer", "null"]},
            "error": _ANY,
            "errors": {"type": "array", "description": "Errors before the last retry."},
            "output": _ANY,
            "retry_at": _MS_OR_NULL,
            "deadline": _MS_OR_NULL,
            "child_id": {
                "type": "string",
                "description": "The child workflow's actor (`child`, `child_result`).",
            },
        },
        required=False,
    ),
    "ChildLink": _object(
        {
            "actor_id": {"type": "string"},
            "name": {"type": "string", "description": "The actor's name."},
            "key": {"type": "array", "items": {"type": "string"}},
            "location": {"type": "string", "description": "The start's entry in the parent."},
            "detached": {"type": "boolean", "description": "Not cancelled with its parent."},
        }
    ),
    "WorkflowStatus": _object(
        {
            "status": {
                "enum": [
                    "pending",
                    "running",
                    "paused",
                    "waiting_for_version",
                    "completed",
                    "failed",
                    "cancelled",
                ]
            },
            "error": _ANY,
            "output": _ANY,
        }
    ),
    "Run": {
        "allOf": [
            _ref("WorkflowStatus"),
            _object(
                {
                    "run": {"type": "integer", "description": "1, then one more per fork."},
                    "forked_from": {
                        **_ANY,
                        "description": "`{run, from}`: the run and step this one was forked "
                        "from (null for a first run).",
                    },
                    "input": {**_ANY, "description": "A fork's input (null: the create input)."},
                    "started_at": _MS_OR_NULL,
                    "deadline_at": {
                        **_MS_OR_NULL,
                        "description": "The run's deadline (`workflow(timeout=...)`).",
                    },
                    "code_version": {
                        "type": ["string", "null"],
                        "description": "The code version the run started on, or continued "
                        "on (a cluster node's; null on a single server).",
                    },
                    "waiting_for_version": {
                        "type": ["string", "null"],
                        "description": "While the status is `waiting_for_version`: the code "
                        "version of the node the run waits for.",
                    },
                    "history": {"type": "array", "items": _ref("HistoryEntry")},
                }
            ),
        ]
    },
    "Workflow": {
        "allOf": [
            _ref("Run"),
            _object(
                {
                    "runs": {
                        "type": "array",
                        "items": _ref("Run"),
                        "description": "The runs forks archived, newest first.",
                    },
                    "parent": {
                        "oneOf": [_ref("ChildLink"), {"type": "null"}],
                        "description": "The workflow that started this one as its child.",
                    },
                    "children": {
                        "type": "array",
                        "description": "The children this workflow started (status: "
                        "`starting`, `running`, or how a wait saw it end).",
                        "items": {
                            "allOf": [
                                _ref("ChildLink"),
                                _object({"status": {"type": "string"}}),
                            ]
                        },
                    },
                }
            ),
        ]
    },
    "ActorDetails": _object(
        {
            "actor": _ref("ActorRow"),
            "state": _ANY,
            "connections": {"type": "array", "items": _ref("Connection")},
            "queue": {"type": "array", "items": _ref("QueueMessage")},
            "dead_letters": {"type": "array", "items": _ref("DeadLetter")},
            "limits": {
                "type": "object",
                "description": "The limited queues, by name.",
                "additionalProperties": _ref("QueueLimits"),
            },
            "schedules": {"type": "array", "items": _ref("Schedule")},
            "workflow": {"oneOf": [_ref("Workflow"), {"type": "null"}]},
        }
    ),
}


def _json(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": False, "content": {"application/json": {"schema": schema}}}


_ERRORS = {
    "400": _json(_ref("Error"), "Bad input (nothing was changed)."),
    "401": _json(_ref("Error"), "No valid admin token (`admin.unauthorized`)."),
    "403": _json(_ref("Error"), "Not allowed from this address (`admin.forbidden`)."),
    "404": _json(_ref("Error"), "No such actor, action, queue, step or schedule."),
}
_CONFLICT = {"409": _json(_ref("Error"), "The workflow cannot be repaired that way now.")}
_ACTOR_ID = {"name": "actor_id", "in": "path", "required": True, "schema": {"type": "string"}}


def _operation(
    summary: str,
    answer: dict[str, Any],
    *,
    parameters: list[dict[str, Any]] | None = None,
    body: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "summary": summary,
        "responses": {"200": answer, **_ERRORS, **(extra or {})},
    }
    if parameters:
        operation["parameters"] = parameters
    if body is not None:
        operation["requestBody"] = _body(body)
    return operation


def _query(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": schema,
    }


def _paths() -> dict[str, Any]:
    string = {"type": "string"}
    status_answer = _json(_object({"workflow": _ref("WorkflowStatus")}))
    empty = _json({"type": "object"})
    return {
        "/admin/overview": {
            "get": _operation(
                "The server and its actor types with counts.",
                _json(
                    _object(
                        {
                            "runtime": string,
                            "version": string,
                            "node": {"type": ["object", "null"]},
                            "types": {"type": "array", "items": _ref("ActorType")},
                        }
                    )
                ),
            )
        },
        "/admin/actors": {
            "get": _operation(
                "Search actors by type, key or id substring, awake or asleep.",
                _json(
                    _object(
                        {
                            "actors": {"type": "array", "items": _ref("ActorRow")},
                            "cursor": {"type": ["string", "null"]},
                        }
                    )
                ),
                parameters=[
                    _query("name", "Only actors of this type.", string),
                    _query("q", "Substring of the key (parts joined by `/`) or id.", string),
                    _query("status", "all, awake or asleep.", {"enum": ["all", "awake", "asleep"]}),
                    _query("limit", "At most this many (1-500, default 50).", {"type": "integer"}),
                    _query("cursor", "Continue after this point (from the last answer).", string),
                ],
            )
        },
        "/admin/actors/{actor_id}": {
            "parameters": [_ACTOR_ID],
            "get": _operation("Everything about one actor.", _json(_ref("ActorDetails"))),
            "delete": _operation(
                "Destroy the actor (on_destroy runs, its data is deleted).", empty
            ),
        },
        "/admin/actors/{actor_id}/feed": {
            "parameters": [_ACTOR_ID],
            "get": _operation(
                "Server-Sent Events: `snapshot` (the actor's details), then `state`, "
                "`workflow`, `event`, `connection`, `lifecycle` changes as they happen; "
                "`resync` when the reader fell behind (read again and reopen). In a "
                "cluster, an actor served by another node is read every 2 s instead, and "
                "each change comes as a new `snapshot` (with `destroyed: true` at the end "
                "if it was destroyed).",
                {"description": "An event stream.", "content": {"text/event-stream": {}}},
            ),
        },
        "/admin/actors/{actor_id}/actions/{action}": {
            "parameters": [
                _ACTOR_ID,
                {"name": "action", "in": "path", "required": True, "schema": string},
            ],
            "post": _operation(
                "Call an action (waking the actor).",
                _json(_object({"output": _ANY})),
                body=_object({"args": {"type": "array"}}, required=False),
            ),
        },
        "/admin/actors/{actor_id}/queues/{queue}": {
            "parameters": [
                _ACTOR_ID,
                {"name": "queue", "in": "path", "required": True, "schema": string},
            ],
            "post": _operation(
                "Send a durable queue message.",
                _json(
                    _object(
                        {"status": {"enum": ["completed", "timedOut", "queued"]}, "response": _ANY}
                    )
                ),
                body=_object(
                    {
                        "body": _ANY,
                        "wait": {"type": "boolean"},
                        "timeout": {"type": ["number", "null"]},
                        "delay": {
                            "type": ["number", "null"],
                            "description": "Seconds: a delayed send (answered `queued`).",
                        },
                        "at": {
                            **_MS_OR_NULL,
                            "description": "A delayed send: received from this moment on.",
                        },
                    },
                    required=False,
                ),
            ),
        },
        "/admin/actors/{actor_id}/workflow/retry": {
            "parameters": [_ACTOR_ID],
            "post": _operation(
                "Retry a failed workflow: its exhausted steps get fresh attempts.",
                status_answer,
                extra=_CONFLICT,
            ),
        },
        "/admin/actors/{actor_id}/workflow/replay": {
            "parameters": [_ACTOR_ID],
            "post": _operation(
                "Replay the workflow from a step: that entry and every later one run again.",
                status_answer,
                body=_object({"from": {"type": "string", "description": "A history location."}}),
                extra=_CONFLICT,
            ),
        },
        "/admin/actors/{actor_id}/workflow/fork": {
            "parameters": [_ACTOR_ID],
            "post": _operation(
                "Fork the workflow from a step: a new run replays the history before it and "
                "runs from it, with a new input or (from a receive) a new message; the old "
                "run is archived (`runs`).",
                _json(_object({"workflow": _ref("WorkflowStatus"), "run": {"type": "integer"}})),
                body=_object(
                    {
                        "from": {"type": "string", "description": "A history location."},
                        "input": {**_ANY, "description": "The new run's input (`ctx.input`)."},
                        "message": {
                            **_ANY,
                            "description": "The message the receive at `from` gets.",
                        },
                    },
                    required=False,
                ),
                extra=_CONFLICT,
            ),
        },
        "/admin/actors/{actor_id}/workflow/cancel": {
            "parameters": [_ACTOR_ID],
            "post": _operation(
                "Cancel the workflow's run at its next durable point: its compensations "
                "run and it ends cancelled (409 workflow.not_running if it has ended).",
                status_answer,
                body=_object({"reason": {"type": ["string", "null"]}}, required=False),
                extra=_CONFLICT,
            ),
        },
        "/admin/actors/{actor_id}/workflow/pause": {
            "parameters": [_ACTOR_ID],
            "post": _operation(
                "Hold the workflow's run before its next step, durably, until resumed.",
                status_answer,
                extra=_CONFLICT,
            ),
        },
        "/admin/actors/{actor_id}/workflow/resume": {
            "parameters": [_ACTOR_ID],
            "post": _operation("Let a paused workflow go on.", status_answer, extra=_CONFLICT),
        },
        "/admin/actors/{actor_id}/schedules/{schedule_id}": {
            "parameters": [
                _ACTOR_ID,
                {"name": "schedule_id", "in": "path", "required": True, "schema": string},
            ],
            "delete": _operation("Cancel a schedule (one-shot, cron or interval job).", empty),
        },
        **_dead_letter_paths(empty),
        "/admin/actors/{actor_id}/kv": {
            "parameters": [_ACTOR_ID],
            "get": _operation(
                "One page of the actor's KV records in key order (read without waking it: "
                'what is committed). A bytes key shows as `["$Uint8Array", base64]`.',
                _json(
                    _object(
                        {
                            "records": {"type": "array", "items": _KV_RECORD},
                            "next": {"type": ["string", "null"]},
                        }
                    )
                ),
                parameters=[
                    _query("prefix", "Only the string keys that start with it.", string),
                    _query("after", "The `next` cursor of the page before.", string),
                    _query(
                        "limit", "Records per page (default 50, at most 500).", {"type": "integer"}
                    ),
                ],
            ),
        },
        **_db_paths(),
    }


def _db_paths() -> dict[str, Any]:
    """The actor's SQL database (c.db), read from the store as committed."""
    integer = {"type": "integer"}
    rows = _object({"columns": {"type": "array"}, "rows": {"type": "array"}})
    table = {"name": "table", "in": "path", "required": True, "schema": {"type": "string"}}
    return {
        "/admin/actors/{actor_id}/db/tables": {
            "parameters": [_ACTOR_ID],
            "get": _operation(
                "The tables and views of the actor's SQL database with their schema (read "
                "from the store as committed, without waking it; `db.too_large` past 64 MiB).",
                _json(_object({"tables": {"type": "array", "items": _DB_TABLE}})),
            ),
        },
        "/admin/actors/{actor_id}/db/tables/{table}/rows": {
            "parameters": [_ACTOR_ID, table],
            "get": _operation(
                "One page of a table's rows (`db.no_such_table` for a name that is none).",
                _json(rows),
                parameters=[
                    _query("offset", "Rows to skip (default 0).", integer),
                    _query("limit", "Rows per page (default 50, at most 500).", integer),
                ],
            ),
        },
        "/admin/actors/{actor_id}/db/query": {
            "parameters": [_ACTOR_ID],
            "post": _operation(
                "A read-only query: `db.read_only` for a statement that writes, "
                "`db.too_many_rows` past 1,000 rows, `db.timeout` past 2 s, `db.too_large`.",
                _json(rows),
                body=_object({"sql": {"type": "string"}, "params": {}}),
            ),
        },
    }


_DB_TABLE = _object({"name": {}, "type": {}, "sql": {}, "columns": {"type": "array"}})
_KV_RECORD = _object({"key": {}, "value": {}, "size": {"type": "integer"}})


def _dead_letter_paths(empty: dict[str, Any]) -> dict[str, Any]:
    """The dead letters of an actor's queues (docs/queues.md)."""
    message_id = {
        "name": "message_id",
        "in": "path",
        "required": True,
        "schema": {"type": "integer"},
    }
    letters = _object({"dead_letters": {"type": "array", "items": _ref("DeadLetter")}})
    requeued = _object(
        {"id": {"type": "integer"}, "queue": {"type": "string"}, "attempts": {"type": "integer"}}
    )
    not_dead = {"409": _json(_ref("Error"), "The message is live (`actor.message_not_dead`).")}
    return {
        "/admin/actors/{actor_id}/dead-letters": {
            "parameters": [_ACTOR_ID],
            "get": _operation(
                "The actor's dead letters, oldest message first (read without waking it).",
                _json(letters),
                parameters=[_query("queue", "Only this queue's.", {"type": "string"})],
            ),
        },
        "/admin/actors/{actor_id}/dead-letters/{message_id}/requeue": {
            "parameters": [_ACTOR_ID, message_id],
            "post": _operation(
                "Put a dead letter back in its queue, its attempts reset.",
                _json(_object({"requeued": requeued})),
                extra=not_dead,
            ),
        },
        "/admin/actors/{actor_id}/dead-letters/{message_id}": {
            "parameters": [_ACTOR_ID, message_id],
            "delete": _operation("Drop a dead letter for good.", empty, extra=not_dead),
        },
    }


@functools.cache
def openapi_document() -> dict[str, Any]:
    """The description (built once)."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "perdure admin API",
            "version": __version__,
            "description": "See inside a running perdure server and repair it. Loopback "
            "clients only unless the server has an admin token (`Authorization: Bearer`).",
        },
        "components": {
            "schemas": _SCHEMAS,
            "securitySchemes": {"adminToken": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{}, {"adminToken": []}],
        "paths": _paths(),
    }
