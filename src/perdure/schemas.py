"""User schemas: validation into models, and models back to their plain form.

A *schema* is any type pydantic's ``TypeAdapter`` accepts: a ``BaseModel``, a dataclass,
a ``TypedDict``, ``list[Item]``, ``int`` … Values come in plain (JSON/CBOR) and are
validated into the schema's type where one is declared; *model values* (pydantic models
and dataclass instances) go out, and are stored, in their plain JSON form
(``dump_python(mode="json")``), which is what the official TypeScript client sees.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable, Hashable, Iterable, Sequence
from functools import lru_cache
from typing import Any, cast

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError
from typing_extensions import is_typeddict

from perdure.errors import DefinitionError, InvalidRequest, StateNotSerializable

__all__ = [
    "ArgConverter",
    "adapter_for",
    "adopt_state",
    "arg_converter",
    "builds_models",
    "dump_model",
    "errors_of",
    "find_state_schema",
    "hints_of",
    "is_model_value",
    "load_state",
    "problems_of",
    "storable_state",
    "to_plain",
    "validate_payload",
]

# Types whose values are already plain: nothing to look into.
_SCALARS = frozenset({str, int, float, bool, type(None), bytes})


@lru_cache(maxsize=512)
def adapter_for(schema: Any) -> TypeAdapter[Any]:
    """A cached ``TypeAdapter`` for ``schema`` (schemas are hashable types)."""
    return TypeAdapter(schema)


@lru_cache(maxsize=512)
def builds_models(schema: Any) -> bool:
    """True if validating against ``schema`` builds pydantic models or dataclasses
    somewhere: only then must a stored (plain) value be validated again when read."""
    return _has_model_node(adapter_for(schema).core_schema)


def _has_model_node(node: Any) -> bool:
    if isinstance(node, dict):
        if node.get("type") in ("model", "dataclass"):
            return True
        return any(_has_model_node(item) for item in node.values())
    if isinstance(node, list | tuple):
        return any(_has_model_node(item) for item in node)
    return False


def problems_of(exc: ValidationError) -> str:
    """The first problems of a validation error, one line: ``field: message; …``."""
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'value'}: {err['msg']}"
        for err in exc.errors()[:5]
    )


def errors_of(exc: ValidationError) -> list[dict[str, Any]]:
    """The first problems as plain data (for error metadata; ``ctx`` may hold objects)."""
    return [
        {"loc": [str(p) for p in err["loc"]], "msg": err["msg"], "type": err["type"]}
        for err in exc.errors()[:5]
    ]


def validate_payload(schema: Any, value: Any, *, what: str, code: str = "invalid_payload") -> Any:
    """Validate ``value``; return it (as pydantic coerced it) or raise ``InvalidRequest``."""
    try:
        return adapter_for(schema).validate_python(value)
    except ValidationError as exc:
        raise InvalidRequest(
            f"Invalid {what}: {problems_of(exc)}.",
            code=code,
            metadata={"errors": errors_of(exc)},
        ) from None


def is_model_value(value: Any) -> bool:
    """True for a pydantic model or a dataclass instance (not the class itself)."""
    return isinstance(value, BaseModel) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    )


def dump_model(value: Any) -> Any:
    """A model value's plain JSON form (``TypeError`` for a dataclass pydantic can't dump)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", warnings=False)
    try:
        adapter = adapter_for(cast(Hashable, type(value)))
    except Exception as exc:  # pydantic cannot build a schema for one of its fields
        raise TypeError(f"{type(value).__name__} cannot be converted: {exc}") from exc
    return adapter.dump_python(value, mode="json", warnings=False)


def to_plain(value: Any) -> Any:
    """``value`` with every model value in it replaced by its plain form.

    Plain values come back as they are (the same object, nothing copied); a container
    is copied only if something in it changed. Values of other types are left for the
    encoders (which refuse what they cannot send or store).
    """
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        if _SCALARS.issuperset(map(type, value.values())):
            return value  # the common case, checked at C speed
        return _plain_container(value, value.items(), dict)
    if kind is list:
        if _SCALARS.issuperset(map(type, value)):
            return value
        return _plain_container(value, enumerate(value), list)
    if is_model_value(value):
        return dump_model(value)
    if kind is tuple:
        return to_plain(list(value))
    return value


def _plain_container(
    value: Any, items: Iterable[tuple[Any, Any]], copy: Callable[[Any], Any]
) -> Any:
    """``value`` (a dict or list) with its model values dumped; copied only if one was."""
    changed: Any = None
    for key, item in items:
        kind = type(item)
        if kind in _SCALARS:
            continue
        if kind is dict and _SCALARS.issuperset(map(type, item.values())):
            continue  # a flat dict inside (an event payload, a state part): no call
        converted = to_plain(item)
        if converted is not item:
            if changed is None:
                changed = copy(value)
            changed[key] = converted
    return value if changed is None else changed


# -- action arguments ---------------------------------------------------------------------


def hints_of(fn: Callable[..., Any], names: Sequence[str], what: str) -> dict[str, Any]:
    """The resolved annotations of ``names`` (parameters, or ``"return"``) of ``fn``.

    Each is resolved on its own, so that the context parameter may name a type imported
    only for type checkers. ``DefinitionError`` if one of ``names`` cannot be resolved.
    """
    try:
        return typing.get_type_hints(fn)
    except Exception:  # some annotation is unresolvable: resolve the wanted ones alone
        pass
    raw = getattr(inspect.unwrap(fn), "__annotations__", {})
    namespace = getattr(inspect.unwrap(fn), "__globals__", {})
    hints: dict[str, Any] = {}
    for name in names:
        annotation = raw.get(name)
        if isinstance(annotation, str):
            try:
                # What typing.get_type_hints does with a string annotation.
                annotation = eval(annotation, namespace)
            except Exception as exc:
                raise DefinitionError(
                    f"{what}: the annotation of `{name}` cannot be resolved ({exc})."
                ) from None
        if annotation is not None:
            hints[name] = annotation
    return hints


def _adapter_or_fail(schema: Any, what: str) -> TypeAdapter[Any]:
    try:
        return adapter_for(schema)
    except Exception as exc:
        raise DefinitionError(f"{what}: pydantic cannot use the type {schema!r} ({exc}).") from None


def _wants_validation(annotation: Any) -> bool:
    return annotation is not Any and annotation is not object


class ArgConverter:
    """Validates an action's arguments against its parameters' annotations (into models)."""

    __slots__ = ("_action", "_params", "_rest")

    def __init__(
        self,
        action: str,
        params: list[tuple[str, TypeAdapter[Any] | None]],
        rest: tuple[str, TypeAdapter[Any]] | None,
    ) -> None:
        self._action = action
        self._params = params
        self._rest = rest

    def convert(self, args: Sequence[Any]) -> list[Any]:
        """The arguments as their annotations make them; ``actor.invalid_args`` if one
        does not fit (the arity was checked before)."""
        converted = list(args)
        count = len(self._params)
        for index, value in enumerate(args):
            if index < count:
                name, adapter = self._params[index]
            elif self._rest is not None:
                name, adapter = self._rest
            else:
                break
            if adapter is not None:
                converted[index] = self._validate(adapter, name, value)
        return converted

    def _validate(self, adapter: TypeAdapter[Any], name: str, value: Any) -> Any:
        try:
            return adapter.validate_python(value)
        except ValidationError as exc:
            raise InvalidRequest(
                f"Action `{self._action}`: invalid argument `{name}`: {problems_of(exc)}.",
                code="invalid_args",
                metadata={"action": self._action, "parameter": name, "errors": errors_of(exc)},
            ) from None


def arg_converter(actor: str, action: str, fn: Callable[..., Any]) -> ArgConverter | None:
    """An :class:`ArgConverter` for an action whose parameters (after the context) carry
    annotations, or ``None`` when none does: unannotated actions are called as before."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    what = f"Actor `{actor}`, action `{action}`"
    annotated = [p.name for p in params[1:] if p.annotation is not p.empty]
    hints = hints_of(fn, annotated, what) if annotated else {}
    if not hints:
        return None
    positional: list[tuple[str, TypeAdapter[Any] | None]] = []
    rest: tuple[str, TypeAdapter[Any]] | None = None
    for param in params[1:]:
        hint = hints.get(param.name, Any)
        adapter = _adapter_or_fail(hint, f"{what}, parameter `{param.name}`")
        wanted = adapter if _wants_validation(hint) else None
        if param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
            positional.append((param.name, wanted))
        elif param.kind is param.VAR_POSITIONAL and wanted is not None:
            rest = (param.name, wanted)
    if rest is None and all(adapter is None for _, adapter in positional):
        return None
    return ArgConverter(action, positional, rest)


# -- state ----------------------------------------------------------------------------------


def _is_structured(schema: Any) -> bool:
    """A type that makes a state schema by itself: a model, a dataclass, a TypedDict."""
    return isinstance(schema, type) and (
        issubclass(schema, BaseModel) or dataclasses.is_dataclass(schema) or is_typeddict(schema)
    )


def find_state_schema(
    actor: str, explicit: Any, state: Any, create_state: Callable[..., Any] | None
) -> Any:
    """The actor's state schema: ``state_schema=``, else the type of a model ``state``,
    else a model/dataclass/TypedDict return annotation of ``create_state``; or ``None``."""
    if explicit is not None:
        _adapter_or_fail(explicit, f"Actor `{actor}`, `state_schema`")
        return explicit
    if is_model_value(state):
        _adapter_or_fail(type(state), f"Actor `{actor}`, `state`")
        return type(state)
    if create_state is not None:
        where = f"Actor `{actor}`, `create_state`"
        annotation = hints_of(create_state, ["return"], where).get("return")
        if _is_structured(annotation):
            _adapter_or_fail(annotation, f"Actor `{actor}`, `create_state`")
            return annotation
    return None


def _invalid_state(actor: str, problems: str, errors: Any = None) -> StateNotSerializable:
    return StateNotSerializable(
        f"The state of actor {actor} is invalid: {problems}.",
        code="invalid",
        metadata={"actor": actor, "errors": errors},
    )


def adopt_state(schema: Any, value: Any, actor: str) -> Any:
    """A state given by ``create_state``, ``state=`` or ``c.state = …`` as its schema's
    type (a dict becomes the model); ``state.invalid`` if it does not fit."""
    if schema is None:
        if is_model_value(value):
            raise DefinitionError(
                f"Actor `{actor}`: the state is a {type(value).__name__}; declare "
                f"`state_schema={type(value).__name__}` (or annotate create_state's return "
                "type) so that it comes back as one after a restart."
            )
        return value
    if isinstance(schema, type) and not is_typeddict(schema) and isinstance(value, schema):
        return value
    try:
        return adapter_for(schema).validate_python(value)
    except ValidationError as exc:
        raise _invalid_state(actor, problems_of(exc), errors_of(exc)) from None


def load_state(schema: Any, plain: Any, actor: str) -> Any:
    """A stored (plain) state as its schema's type."""
    if schema is None:
        return plain
    try:
        return adapter_for(schema).validate_python(plain)
    except ValidationError as exc:
        raise _invalid_state(
            actor, f"the stored state does not fit its schema: {problems_of(exc)}", errors_of(exc)
        ) from None


def storable_state(schema: Any, state: Any, actor: str) -> Any:
    """The state's plain form, checked against its schema as a whole: a field assigned a
    value of the wrong type (models do not check assignments by default) is caught here,
    before anything is stored (``state.invalid``)."""
    adapter = adapter_for(schema)
    try:
        plain = adapter.dump_python(state, mode="json", warnings=False)
        adapter.validate_python(plain)
    except ValidationError as exc:
        raise _invalid_state(actor, problems_of(exc), errors_of(exc)) from None
    except PydanticSerializationError as exc:
        raise _invalid_state(actor, str(exc)) from None
    return plain
