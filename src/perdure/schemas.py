"""Payload validation against user schemas (any type pydantic's ``TypeAdapter`` accepts)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pydantic import TypeAdapter, ValidationError

from perdure.errors import InvalidRequest

__all__ = ["adapter_for", "validate_payload"]


@lru_cache(maxsize=512)
def adapter_for(schema: Any) -> TypeAdapter[Any]:
    """A cached ``TypeAdapter`` for ``schema`` (schemas are hashable types)."""
    return TypeAdapter(schema)


def validate_payload(schema: Any, value: Any, *, what: str, code: str = "invalid_payload") -> Any:
    """Validate ``value``; return it (as pydantic coerced it) or raise ``InvalidRequest``."""
    try:
        return adapter_for(schema).validate_python(value)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'value'}: {err['msg']}"
            for err in exc.errors()[:5]
        )
        raise InvalidRequest(
            f"Invalid {what}: {problems}.", code=code, metadata={"errors": exc.errors()[:5]}
        ) from None
