"""Which actor a gateway request addresses: the query form and the direct form.

- Query form: ``/gateway/{name}/…?rvt-method=get|getOrCreate|create&rvt-key=a,b``
  (plus ``rvt-input`` = base64url CBOR, used when the actor is created). The other
  ``rvt-*`` parameters the official client sends (namespace, runner, pool, region, crash
  policy, skip-ready-wait) are accepted and ignored; ``rvt-token`` is checked before any
  route runs (:mod:`perdure.server.edge.client_access`). Any other ``rvt-*`` name, or one
  given twice, is refused as the Rivet engine's gateway refuses it
  (``guard.query_invalid_params`` / ``guard.query_duplicate_param``, 400).
- Direct form: ``/gateway/{actorId}[@token]/…`` (no ``rvt-method``; the token, likewise).

**Commas in keys.** The official client joins key parts with ``,`` in ``rvt-key`` without
escaping, so a part that itself contains a comma cannot be told apart from two parts:
``["a,b"]`` and ``["a", "b"]`` both arrive as ``rvt-key=a,b``. perdure splits on every
comma, as the original server does, and where it can tell that the split addresses a
different actor than a comma-containing key that exists (an actor whose key is another
grouping of the same parts), it refuses the request with ``actor.ambiguous_key`` instead
of silently reaching the wrong actor. Address such actors by id (``get_for_id``, the
direct form) or through ``PUT /actors``, whose key form escapes properly. The check
looks at keys with up to :data:`MAX_COMMAS_CHECKED` commas; beyond that it is skipped.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qsl, unquote

from perdure.errors import ActorNotFound, GatewayQueryRefused, InvalidRequest
from perdure.keys import Key, normalize_key
from perdure.protocol.codec import check_value
from perdure.protocol.values import decode_cbor_value
from perdure.registry import MAX_ACTOR_NAME_LENGTH, RegistryOptions
from perdure.runtime import ActorAddress, ActorDispatch, ActorRef, ResolveMethod
from perdure.server.edge.client_caps import CreationGate

__all__ = [
    "MAX_COMMAS_CHECKED",
    "Target",
    "parse_conn_params",
    "parse_query",
    "parse_target",
    "path_segment",
    "resolve_target",
]

MAX_COMMAS_CHECKED = 8
# The gateway's own query parameters, as the Rivet engine's gateway knows them (its
# RvtParams, which denies unknown fields), in its order: the order of its message.
_GATEWAY_PARAMS = (
    "namespace",
    "method",
    "runner",
    "pool",
    "key",
    "input",
    "region",
    "crash-policy",
    "token",
    "skip-ready-wait",
)
_KNOWN_GATEWAY_PARAMS = frozenset(_GATEWAY_PARAMS)
MAX_ACTOR_ID_LENGTH = 128
_METHODS: dict[str, ResolveMethod] = {
    "get": "get",
    "getOrCreate": "getOrCreate",
    "create": "create",
}


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed gateway target. ``actor_id`` is set for the direct form, else ``name``."""

    actor_id: str | None = None
    name: str = ""
    method: ResolveMethod = "get"
    key: Key = ()
    input: Any = None
    comma_key: bool = False


def path_segment(raw: bytes) -> str:
    """A percent-decoded path segment (so a ``/`` inside a name arrives as ``%2F``)."""
    try:
        text = raw.decode("utf-8")
        return unquote(text, errors="strict") if "%" in text else text
    except UnicodeDecodeError:
        raise InvalidRequest("The request path is not valid UTF-8.") from None


def parse_query(query_string: bytes) -> dict[str, str]:
    """The query parameters (an actor's own: last value wins); undecodable text is a 400,
    and so is an ``rvt-*`` parameter the gateway does not know or one given twice."""
    if not query_string:
        return {}
    try:
        pairs = parse_qsl(query_string.decode("latin-1"), keep_blank_values=True, errors="strict")
    except (UnicodeDecodeError, ValueError):
        raise InvalidRequest("The query string is not valid UTF-8.") from None
    query: dict[str, str] = {}
    unknown: str | None = None
    for name, value in pairs:
        if name.startswith("rvt-"):
            if name in query:  # which of two methods or keys was meant?
                raise GatewayQueryRefused(
                    f"duplicate query gateway param: {name[:68]}",
                    code="query_duplicate_param",
                    metadata={"name": name[:68]},
                )
            if unknown is None and name[4:] not in _KNOWN_GATEWAY_PARAMS:
                unknown = name
        query[name] = value
    if unknown is not None:  # after the duplicates, as the engine checks them
        raise _unknown_gateway_param(unknown)
    return query


def _unknown_gateway_param(name: str) -> GatewayQueryRefused:
    """The engine's refusal of an ``rvt-*`` name it does not know, text for text: a
    misspelt ``rvt-skip-ready-wait`` must not be silently ignored."""
    expected = ", ".join(f"`{known}`" for known in _GATEWAY_PARAMS)
    return GatewayQueryRefused(
        f"invalid query gateway params: unknown field `{name[4:68]}`, expected one of {expected}",
        metadata={"name": name[:68]},
    )


def parse_target(
    segment: str, query: dict[str, str], options: RegistryOptions, registered: set[str] | None
) -> Target:
    """Parse the ``{name-or-id}`` path segment and the ``rvt-*`` query parameters."""
    method_text = query.get("rvt-method")
    if method_text is None:
        actor_id = segment.partition("@")[0]
        if not actor_id:
            raise InvalidRequest("The gateway path names no actor.")
        if len(actor_id) > MAX_ACTOR_ID_LENGTH:
            raise ActorNotFound()
        if registered is not None and actor_id in registered:
            raise InvalidRequest(
                f"`{actor_id}` is an actor name: add rvt-method=get|getOrCreate|create and "
                "rvt-key, or address the actor by its id.",
                code="missing_method",
            )
        return Target(actor_id=actor_id)
    method = _METHODS.get(method_text)
    if method is None:
        raise InvalidRequest(
            f"Unknown rvt-method `{method_text[:64]}`: use get, getOrCreate or create.",
            code="invalid_method",
        )
    check_actor_name(segment)
    raw_key = query.get("rvt-key")
    key = normalize_key(None if raw_key is None else raw_key.split(","))
    actor_input = None
    if method != "get":
        actor_input = decode_input(query.get("rvt-input"), options.max_input_size, urlsafe=True)
    return Target(
        name=segment,
        method=method,
        key=key,
        input=actor_input,
        comma_key=raw_key is not None and "," in raw_key,
    )


def check_actor_name(name: str) -> None:
    """Refuse an empty or over-long actor name before it reaches a lookup or a log line."""
    if not name:
        raise InvalidRequest("The request names no actor.", code="unknown_name")
    if len(name) > MAX_ACTOR_NAME_LENGTH:
        raise InvalidRequest(
            f"Actor names are at most {MAX_ACTOR_NAME_LENGTH} characters.", code="unknown_name"
        )


def decode_input(text: str | None, limit: int, *, urlsafe: bool) -> Any:
    """Decode an actor input given as base64 (or base64url) CBOR; ``None`` if absent."""
    if text is None or text == "":
        return None
    # Four base64 characters carry three bytes: refuse before decoding anything big.
    if len(text) * 3 // 4 > limit + 2:
        raise _input_too_long(limit)
    try:
        padded = text + "=" * (-len(text) % 4)
        raw = base64.b64decode(padded, altchars=b"-_" if urlsafe else None, validate=True)
        if not raw:
            raise ValueError("no bytes")
    except (binascii.Error, ValueError):
        raise InvalidRequest("The actor input is not valid base64.", code="invalid_input") from None
    if len(raw) > limit:
        raise _input_too_long(limit)
    try:
        value = decode_cbor_value(raw, "actor input")
        check_value(value, "`input`")  # stored in the state: it must be sendable back
    except InvalidRequest as exc:
        raise InvalidRequest(exc.message, code="invalid_input") from None
    return value


def parse_conn_params(text: str | None, limit: int) -> Any:
    """Connection parameters given as JSON text (header or subprotocol); ``None`` if absent."""
    if text is None or text == "":
        return None
    if len(text) > limit or len(text.encode("utf-8", "surrogatepass")) > limit:
        raise InvalidRequest(
            f"The connection parameters are larger than the limit of {limit} bytes.",
            code="conn_params_too_long",
            metadata={"limit": limit},
        )
    try:
        params = _json_loads(text)
    except (ValueError, RecursionError):
        raise InvalidRequest(
            "The connection parameters are not valid JSON.", code="invalid_conn_params"
        ) from None
    try:
        check_value(params, "`params`")  # hooks may keep them: they must be sendable back
    except InvalidRequest as exc:
        raise InvalidRequest(exc.message, code="invalid_conn_params") from None
    return params


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_json_loads = json.JSONDecoder(parse_constant=_reject_constant).decode


def _input_too_long(limit: int) -> InvalidRequest:
    return InvalidRequest(
        f"The actor input is larger than the limit of {limit} bytes.",
        code="input_too_long",
        metadata={"limit": limit},
    )


async def resolve_target(
    dispatch: ActorDispatch,
    target: Target,
    *,
    forwarded: bool = False,
    creation: CreationGate | None = None,
) -> ActorRef:
    """The actor a target addresses (creating it for getOrCreate/create). ``forwarded``:
    another node of the cluster sent the request here (see ``dispatch.ref``).
    ``creation``: called before an actor is created (the client's creation rate,
    :mod:`perdure.server.edge.client_caps`); a getOrCreate of an actor that exists
    creates nothing and does not call it."""
    if target.actor_id is not None:
        return dispatch.ref(target.actor_id, forwarded=forwarded)
    if target.comma_key:
        await check_comma_ambiguity(dispatch, target.name, target.key)
    address = ActorAddress(
        name=target.name, key=target.key, method=target.method, input=target.input
    )
    if creation is not None and target.method != "get":
        if target.method == "getOrCreate":
            try:
                return await dispatch.resolve(replace(address, method="get"), then=address)
            except ActorNotFound:
                pass
        creation()
    return await dispatch.resolve(address)


async def check_comma_ambiguity(dispatch: ActorDispatch, name: str, key: Key) -> None:
    """Refuse a comma-split key when an actor exists under another grouping of its parts."""
    commas = len(key) - 1
    if commas < 1 or commas > MAX_COMMAS_CHECKED:
        return
    dispatch.definition(name)
    for joins in itertools.product((False, True), repeat=commas):
        if not any(joins):
            continue
        candidate = _regroup(key, joins)
        if await dispatch.find(name, candidate) is not None:
            raise InvalidRequest(
                "rvt-key is ambiguous: the comma-separated parts also name an existing actor "
                "whose key parts contain commas. Address that actor by id or use PUT /actors.",
                code="ambiguous_key",
                metadata={"key": list(key), "existing": list(candidate)},
            )


def _regroup(key: Key, joins: tuple[bool, ...]) -> Key:
    parts = [key[0]]
    for part, join in zip(key[1:], joins, strict=True):
        if join:
            parts[-1] = f"{parts[-1]},{part}"
        else:
            parts.append(part)
    return tuple(parts)
