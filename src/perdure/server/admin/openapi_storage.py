"""The OpenAPI description of the admin API's storage routes: an actor's KV records, its
SQL database (c.db) and its queues' dead letters."""

from __future__ import annotations

from typing import Any

from perdure.server.admin.openapi_parts import (
    ACTOR_ID,
    json_answer,
    obj,
    operation,
    query,
    ref,
)

__all__ = ["KV_RECORD", "db_paths", "dead_letter_paths"]


def db_paths() -> dict[str, Any]:
    """The actor's SQL database (c.db), read from the store as committed."""
    integer = {"type": "integer"}
    rows = obj({"columns": {"type": "array"}, "rows": {"type": "array"}})
    table = {"name": "table", "in": "path", "required": True, "schema": {"type": "string"}}
    return {
        "/admin/actors/{actor_id}/db/tables": {
            "parameters": [ACTOR_ID],
            "get": operation(
                "The tables and views of the actor's SQL database with their schema (read "
                "from the store as committed, without waking it; `db.too_large` past 64 MiB).",
                json_answer(obj({"tables": {"type": "array", "items": DB_TABLE}})),
            ),
        },
        "/admin/actors/{actor_id}/db/tables/{table}/rows": {
            "parameters": [ACTOR_ID, table],
            "get": operation(
                "One page of a table's rows (`db.no_such_table` for a name that is none).",
                json_answer(rows),
                parameters=[
                    query("offset", "Rows to skip (default 0).", integer),
                    query("limit", "Rows per page (default 50, at most 500).", integer),
                ],
            ),
        },
        "/admin/actors/{actor_id}/db/query": {
            "parameters": [ACTOR_ID],
            "post": operation(
                "A read-only query: `db.read_only` for a statement that writes, "
                "`db.too_many_rows` past 1,000 rows, `db.timeout` past 2 s, `db.too_large`.",
                json_answer(rows),
                body=obj({"sql": {"type": "string"}, "params": {}}),
            ),
        },
    }


DB_TABLE = obj({"name": {}, "type": {}, "sql": {}, "columns": {"type": "array"}})
KV_RECORD = obj({"key": {}, "value": {}, "size": {"type": "integer"}})


def dead_letter_paths(empty: dict[str, Any]) -> dict[str, Any]:
    """The dead letters of an actor's queues (docs/queues.md)."""
    message_id = {
        "name": "message_id",
        "in": "path",
        "required": True,
        "schema": {"type": "integer"},
    }
    letters = obj({"dead_letters": {"type": "array", "items": ref("DeadLetter")}})
    requeued = obj(
        {"id": {"type": "integer"}, "queue": {"type": "string"}, "attempts": {"type": "integer"}}
    )
    not_dead = {"409": json_answer(ref("Error"), "The message is live (`actor.message_not_dead`).")}
    return {
        "/admin/actors/{actor_id}/dead-letters": {
            "parameters": [ACTOR_ID],
            "get": operation(
                "The actor's dead letters, oldest message first (read without waking it).",
                json_answer(letters),
                parameters=[query("queue", "Only this queue's.", {"type": "string"})],
            ),
        },
        "/admin/actors/{actor_id}/dead-letters/{message_id}/requeue": {
            "parameters": [ACTOR_ID, message_id],
            "post": operation(
                "Put a dead letter back in its queue, its attempts reset.",
                json_answer(obj({"requeued": requeued})),
                extra=not_dead,
            ),
        },
        "/admin/actors/{actor_id}/dead-letters/{message_id}": {
            "parameters": [ACTOR_ID, message_id],
            "delete": operation("Drop a dead letter for good.", empty, extra=not_dead),
        },
    }
