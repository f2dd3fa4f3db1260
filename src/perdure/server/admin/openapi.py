"""The OpenAPI 3.1 description of the admin API (served at ``/admin/openapi.json``)."""

from __future__ import annotations

import functools
from typing import Any

from perdure._version import __version__
from perdure.server.admin.openapi_parts import (
    ACTOR_ID,
    CONFLICT,
    json_answer,
    obj,
    operation,
    query,
    ref,
)
from perdure.server.admin.openapi_storage import KV_RECORD, db_paths, dead_letter_paths
from perdure.workflows.history import ENTRY_KINDS

__all__ = ["openapi_document"]

_ANY: dict[str, Any] = {"description": "Any value, in the RivetKit protocol's JSON form."}
_MS = {"type": "integer", "description": "Milliseconds since the Unix epoch."}
_MS_OR_NULL = {"type": ["integer", "null"], "description": "Milliseconds since the Unix epoch."}
_STRINGS = {"type": "array", "items": {"type": "string"}}


_SCHEMAS: dict[str, Any] = {
    "Error": obj(
        {
            "group": {"type": "string"},
            "code": {"type": "string"},
            "message": {"type": "string"},
            "metadata": _ANY,
        }
    ),
    "ActorType": obj(
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
    "ActorRow": obj(
        {
            "actor_id": {"type": "string"},
            "name": {"type": "string"},
            "key": _STRINGS,
            "created_at": _MS,
            "awake": {"type": "boolean"},
            "wake_at": _MS_OR_NULL,
        }
    ),
    "Connection": obj(
        {"id": {"type": "string"}, "params": _ANY, "state": _ANY, "subscriptions": _STRINGS}
    ),
    "QueueMessage": obj(
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
    "DeadLetter": obj(
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
    "QueueLimits": obj(
        {
            "concurrency": {"type": ["integer", "null"]},
            "rate": {
                "oneOf": [
                    obj({"limit": {"type": "integer"}, "period": {"type": "number"}}),
                    {"type": "null"},
                ]
            },
            "key": {"type": ["string", "null"], "description": "A body field, or `(function)`."},
            "in_progress": {"type": "integer"},
            "keys_total": {"type": "integer", "description": "Keys in progress or started."},
            "keys": {
                "type": "array",
                "description": "The 50 keys with the most in progress (docs/queues.md).",
                "items": obj(
                    {
                        "key": {"type": "string"},
                        "in_progress": {"type": "integer"},
                        "started": {"type": "integer"},
                    }
                ),
            },
        }
    ),
    "Fire": obj(
        {
            "seq": {"type": "integer"},
            "scheduled_at": _MS,
            "fired_at": _MS,
            "finished_at": _MS_OR_NULL,
            "result": {"enum": ["running", "ok", "error", "skipped"]},
            "error": _ANY,
        }
    ),
    "Schedule": obj(
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
            "history": {"type": "array", "items": ref("Fire")},
        }
    ),
    "HistoryEntry": obj(
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
    "ChildLink": obj(
        {
            "actor_id": {"type": "string"},
            "name": {"type": "string", "description": "The actor's name."},
            "key": {"type": "array", "items": {"type": "string"}},
            "location": {"type": "string", "description": "The start's entry in the parent."},
            "detached": {"type": "boolean", "description": "Not cancelled with its parent."},
        }
    ),
    "WorkflowStatus": obj(
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
            ref("WorkflowStatus"),
            obj(
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
                    "history": {"type": "array", "items": ref("HistoryEntry")},
                }
            ),
        ]
    },
    "Workflow": {
        "allOf": [
            ref("Run"),
            obj(
                {
                    "runs": {
                        "type": "array",
                        "items": ref("Run"),
                        "description": "The runs forks archived, newest first.",
                    },
                    "parent": {
                        "oneOf": [ref("ChildLink"), {"type": "null"}],
                        "description": "The workflow that started this one as its child.",
                    },
                    "children": {
                        "type": "array",
                        "description": "The children this workflow started (status: "
                        "`starting`, `running`, or how a wait saw it end).",
                        "items": {
                            "allOf": [
                                ref("ChildLink"),
                                obj({"status": {"type": "string"}}),
                            ]
                        },
                    },
                }
            ),
        ]
    },
    "ActorDetails": obj(
        {
            "actor": ref("ActorRow"),
            "state": _ANY,
            "connections": {"type": "array", "items": ref("Connection")},
            "queue": {"type": "array", "items": ref("QueueMessage")},
            "dead_letters": {"type": "array", "items": ref("DeadLetter")},
            "limits": {
                "type": "object",
                "description": "The limited queues, by name.",
                "additionalProperties": ref("QueueLimits"),
            },
            "schedules": {"type": "array", "items": ref("Schedule")},
            "workflow": {"oneOf": [ref("Workflow"), {"type": "null"}]},
        }
    ),
}


def _paths() -> dict[str, Any]:
    string = {"type": "string"}
    status_answer = json_answer(obj({"workflow": ref("WorkflowStatus")}))
    empty = json_answer({"type": "object"})
    return {
        "/admin/overview": {
            "get": operation(
                "The server and its actor types with counts.",
                json_answer(
                    obj(
                        {
                            "runtime": string,
                            "version": string,
                            "node": {"type": ["object", "null"]},
                            "types": {"type": "array", "items": ref("ActorType")},
                        }
                    )
                ),
            )
        },
        "/admin/actors": {
            "get": operation(
                "Search actors by type, key or id substring, awake or asleep.",
                json_answer(
                    obj(
                        {
                            "actors": {"type": "array", "items": ref("ActorRow")},
                            "cursor": {"type": ["string", "null"]},
                        }
                    )
                ),
                parameters=[
                    query("name", "Only actors of this type.", string),
                    query("q", "Substring of the key (parts joined by `/`) or id.", string),
                    query("status", "all, awake or asleep.", {"enum": ["all", "awake", "asleep"]}),
                    query("limit", "At most this many (1-500, default 50).", {"type": "integer"}),
                    query("cursor", "Continue after this point (from the last answer).", string),
                ],
            )
        },
        "/admin/actors/{actor_id}": {
            "parameters": [ACTOR_ID],
            "get": operation("Everything about one actor.", json_answer(ref("ActorDetails"))),
            "delete": operation("Destroy the actor (on_destroy runs, its data is deleted).", empty),
        },
        "/admin/actors/{actor_id}/feed": {
            "parameters": [ACTOR_ID],
            "get": operation(
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
                ACTOR_ID,
                {"name": "action", "in": "path", "required": True, "schema": string},
            ],
            "post": operation(
                "Call an action (waking the actor).",
                json_answer(obj({"output": _ANY})),
                body=obj({"args": {"type": "array"}}, required=False),
            ),
        },
        "/admin/actors/{actor_id}/queues/{queue}": {
            "parameters": [
                ACTOR_ID,
                {"name": "queue", "in": "path", "required": True, "schema": string},
            ],
            "post": operation(
                "Send a durable queue message.",
                json_answer(
                    obj({"status": {"enum": ["completed", "timedOut", "queued"]}, "response": _ANY})
                ),
                body=obj(
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
            "parameters": [ACTOR_ID],
            "post": operation(
                "Retry a failed workflow: its exhausted steps get fresh attempts.",
                status_answer,
                extra=CONFLICT,
            ),
        },
        "/admin/actors/{actor_id}/workflow/replay": {
            "parameters": [ACTOR_ID],
            "post": operation(
                "Replay the workflow from a step: that entry and every later one run again.",
                status_answer,
                body=obj({"from": {"type": "string", "description": "A history location."}}),
                extra=CONFLICT,
            ),
        },
        "/admin/actors/{actor_id}/workflow/fork": {
            "parameters": [ACTOR_ID],
            "post": operation(
                "Fork the workflow from a step: a new run replays the history before it and "
                "runs from it, with a new input or (from a receive) a new message; the old "
                "run is archived (`runs`).",
                json_answer(obj({"workflow": ref("WorkflowStatus"), "run": {"type": "integer"}})),
                body=obj(
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
                extra=CONFLICT,
            ),
        },
        "/admin/actors/{actor_id}/workflow/cancel": {
            "parameters": [ACTOR_ID],
            "post": operation(
                "Cancel the workflow's run at its next durable point: its compensations "
                "run and it ends cancelled (409 workflow.not_running if it has ended).",
                status_answer,
                body=obj({"reason": {"type": ["string", "null"]}}, required=False),
                extra=CONFLICT,
            ),
        },
        "/admin/actors/{actor_id}/workflow/pause": {
            "parameters": [ACTOR_ID],
            "post": operation(
                "Hold the workflow's run before its next step, durably, until resumed.",
                status_answer,
                extra=CONFLICT,
            ),
        },
        "/admin/actors/{actor_id}/workflow/resume": {
            "parameters": [ACTOR_ID],
            "post": operation("Let a paused workflow go on.", status_answer, extra=CONFLICT),
        },
        "/admin/actors/{actor_id}/schedules/{schedule_id}": {
            "parameters": [
                ACTOR_ID,
                {"name": "schedule_id", "in": "path", "required": True, "schema": string},
            ],
            "delete": operation("Cancel a schedule (one-shot, cron or interval job).", empty),
        },
        **dead_letter_paths(empty),
        "/admin/actors/{actor_id}/kv": {
            "parameters": [ACTOR_ID],
            "get": operation(
                "One page of the actor's KV records in key order (read without waking it: "
                'what is committed). A bytes key shows as `["$Uint8Array", base64]`.',
                json_answer(
                    obj(
                        {
                            "records": {"type": "array", "items": KV_RECORD},
                            "next": {"type": ["string", "null"]},
                        }
                    )
                ),
                parameters=[
                    query("prefix", "Only the string keys that start with it.", string),
                    query("after", "The `next` cursor of the page before.", string),
                    query(
                        "limit", "Records per page (default 50, at most 500).", {"type": "integer"}
                    ),
                ],
            ),
        },
        **db_paths(),
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
