"""The builders the admin API's OpenAPI description is made of (openapi.py,
openapi_storage.py): schema references, objects, answers, operations, parameters."""

from __future__ import annotations

from typing import Any

__all__ = [
    "ACTOR_ID",
    "CONFLICT",
    "ERRORS",
    "json_answer",
    "obj",
    "operation",
    "query",
    "ref",
]


def ref(name: str) -> dict[str, str]:
    """A reference to the component schema ``name``."""
    return {"$ref": f"#/components/schemas/{name}"}


def obj(properties: dict[str, Any], *, required: bool = True) -> dict[str, Any]:
    """An object schema with ``properties`` (all required unless ``required=False``)."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(properties)
    return schema


def json_answer(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    """An answer whose JSON body has ``schema``."""
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    """An optional JSON request body of ``schema``."""
    return {"required": False, "content": {"application/json": {"schema": schema}}}


ERRORS = {
    "400": json_answer(ref("Error"), "Bad input (nothing was changed)."),
    "401": json_answer(ref("Error"), "No valid admin token (`admin.unauthorized`)."),
    "403": json_answer(ref("Error"), "Not allowed from this address (`admin.forbidden`)."),
    "404": json_answer(ref("Error"), "No such actor, action, queue, step or schedule."),
}
CONFLICT = {"409": json_answer(ref("Error"), "The workflow cannot be repaired that way now.")}
ACTOR_ID = {"name": "actor_id", "in": "path", "required": True, "schema": {"type": "string"}}


def operation(
    summary: str,
    answer: dict[str, Any],
    *,
    parameters: list[dict[str, Any]] | None = None,
    body: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    described: dict[str, Any] = {
        "summary": summary,
        "responses": {"200": answer, **ERRORS, **(extra or {})},
    }
    if parameters:
        described["parameters"] = parameters
    if body is not None:
        described["requestBody"] = _body(body)
    return described


def query(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    """An optional query parameter."""
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": schema,
    }
