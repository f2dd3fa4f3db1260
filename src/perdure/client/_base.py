"""The no-I/O core of the clients: configuration, addressing, request building, replies.

Both :class:`~perdure.client.AsyncClient` and :class:`~perdure.client.Client` describe
every HTTP exchange as an :class:`HttpCall` built here (method, URL, headers, body and a
``parse`` function for the reply) and only *perform* it themselves, so the two clients
cannot drift apart on the wire. The wire is the RivetKit client protocol, exactly as the
official TypeScript client speaks it:

- by key, through the query gateway:
  ``/gateway/{name}/{action/x|queue/x|connect}?rvt-namespace=default&rvt-method=getOrCreate
  &rvt-runner=default&rvt-key=a,b[&rvt-input=…]&rvt-crash-policy=sleep`` (``get`` sends
  only namespace, method and key; an empty key sends no ``rvt-key``);
- by id, through the direct gateway: ``/gateway/{actorId}/…``;
- ``POST /actors`` to create, ``PUT /actors`` / ``GET /actors`` to resolve an id
  (the engine's management API; always JSON).

Connection parameters travel in the ``x-rivet-conn-params`` header (HTTP) or the
``rivet_conn_params.<urlencoded JSON>`` subprotocol (WebSocket), never in the URL.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Literal, TypeAlias, TypeVar, cast
from urllib.parse import quote, unquote, urlencode, urlsplit, urlunsplit

from perdure._time import send_delay
from perdure.client._errors import ActorError, TransportError
from perdure.client._retry import DEFAULT_RETRIES, check_retries
from perdure.errors import InvalidRequest, PerdureError
from perdure.handles import Duration, Instant, SendResult, seconds
from perdure.keys import Key, normalize_key, serialize_key
from perdure.protocol import codec
from perdure.protocol.messages import (
    HttpActionRequest,
    HttpActionResponse,
    HttpQueueSendRequest,
    HttpQueueSendResponse,
    HttpResponseError,
)
from perdure.protocol.values import encode_cbor_value

__all__ = [
    "DEFAULT_ENDPOINT",
    "ActorQuery",
    "ClientConfig",
    "Encoding",
    "HttpCall",
    "HttpReply",
    "IdTarget",
    "KeyArg",
    "QueueResult",
    "Target",
    "action_call",
    "create_call",
    "error_from_reply",
    "query_target",
    "queue_call",
    "resolve_call",
    "websocket_protocols",
    "websocket_url",
]

DEFAULT_ENDPOINT = "http://localhost:6420"
Encoding: TypeAlias = Literal["json", "cbor", "bare"]
KeyArg: TypeAlias = str | Sequence[str] | None
QueueResult: TypeAlias = SendResult
T = TypeVar("T")

MAX_CONN_PARAMS_BYTES = 4096
"""Connection parameters are capped like the original (4 KiB of JSON)."""

# Room left above the server's own limits before an HTTP call is abandoned: the server
# times actions out itself (60 s by default) and answers with an error body.
DEFAULT_TIMEOUT = 90.0
# A socket that stays down is retried at least this often (seconds).
DEFAULT_MAX_RECONNECT_DELAY = 30.0


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Where and how a client talks to the server.

    ``endpoint`` may carry ``namespace:token@`` in its authority (the official client's
    URL-auth form); they are moved to ``namespace``/``token``. ``timeout`` (seconds)
    bounds every HTTP request and every action over a connection; ``None`` waits forever.
    ``max_reconnect_delay`` caps a connection's reconnect backoff (250 ms doubling up to
    it): lower it where a server restarts often and events must resume quickly.
    ``retries``: how many times a send or an action call whose outcome is unknown is
    tried again, with its idempotency key (docs/clients.md, "Retries"); 0 turns it off.
    """

    endpoint: str = DEFAULT_ENDPOINT
    encoding: Encoding = "json"
    namespace: str = "default"
    runner: str = "default"
    token: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float | None = DEFAULT_TIMEOUT
    max_input_size: int = 4096
    max_reconnect_delay: float = DEFAULT_MAX_RECONNECT_DELAY
    retries: int = DEFAULT_RETRIES

    @classmethod
    def build(
        cls,
        endpoint: str = DEFAULT_ENDPOINT,
        *,
        encoding: str = "json",
        headers: Mapping[str, str] | None = None,
        namespace: str | None = None,
        token: str | None = None,
        runner: str = "default",
        timeout: float | None = DEFAULT_TIMEOUT,
        max_input_size: int = 4096,
        max_reconnect_delay: float = DEFAULT_MAX_RECONNECT_DELAY,
        retries: int = DEFAULT_RETRIES,
    ) -> ClientConfig:
        """Validate the user's arguments and normalise the endpoint."""
        if encoding not in ("json", "cbor", "bare"):
            raise ValueError(f"Unknown encoding {encoding!r}: use 'json', 'cbor' or 'bare'.")
        if not max_reconnect_delay > 0:
            raise ValueError(f"max_reconnect_delay must be positive, not {max_reconnect_delay!r}.")
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"The endpoint must be an http(s) URL, not {endpoint!r}.")
        url_namespace = unquote(parts.username) if parts.username else None
        url_token = unquote(parts.password) if parts.password else None
        netloc = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
        if parts.port is not None:
            netloc = f"{netloc}:{parts.port}"
        clean = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
        return cls(
            endpoint=clean,
            encoding=encoding,  # type: ignore[arg-type]  # checked just above
            namespace=namespace or url_namespace or "default",
            runner=runner,
            token=token if token is not None else url_token,
            headers=dict(headers or {}),
            timeout=timeout,
            max_input_size=max_input_size,
            max_reconnect_delay=max_reconnect_delay,
            retries=check_retries(retries),
        )

    @property
    def websocket_endpoint(self) -> str:
        """The endpoint with ``ws``/``wss`` in place of ``http``/``https``."""
        return "ws" + self.endpoint[4:]


# -- addressing ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ActorQuery:
    """An actor addressed by name and key: resolved by the gateway on every request."""

    name: str
    key: Key
    method: Literal["get", "getOrCreate"]
    input: Any = None


@dataclass(frozen=True, slots=True)
class IdTarget:
    """An actor addressed by id (``get_for_id``, or the result of ``create``)."""

    name: str
    actor_id: str


Target: TypeAlias = ActorQuery | IdTarget


def query_target(
    name: str, key: KeyArg, method: Literal["get", "getOrCreate"], input: Any = None
) -> ActorQuery:
    """Validate a name/key pair for the query gateway.

    The gateway joins key parts with ``,`` and splits on ``,`` (as the original does, with
    no escaping), so a part containing a comma would silently address another actor; it
    is refused here instead.
    """
    if not name:
        raise InvalidRequest("An actor name must not be empty.")
    parts = normalize_key(key)
    for index, part in enumerate(parts):
        if "," in part:
            raise InvalidRequest(
                f"Key part {index} ({part!r}) contains a comma. The gateway joins key parts "
                "with ',' and cannot tell it from a separator, so this key would reach a "
                "different actor. Use a key without commas.",
                code="invalid_key",
            )
    return ActorQuery(name, parts, method, input)


def _encode_uri_component(text: str) -> str:
    # JavaScript's encodeURIComponent, which the official client uses for path segments.
    return quote(text, safe="!'()*")


def _query_params(config: ClientConfig, query: ActorQuery) -> list[tuple[str, str]]:
    # Same parameters in the same order as the official client (buildActorQueryGatewayUrl).
    params = [("rvt-namespace", config.namespace), ("rvt-method", query.method)]
    if query.method == "getOrCreate":
        params.append(("rvt-runner", config.runner))
    if query.key:
        params.append(("rvt-key", ",".join(query.key)))
    if query.method == "getOrCreate":
        if query.input is not None:
            params.append(("rvt-input", _query_input(config, query.input)))
        params.append(("rvt-crash-policy", "sleep"))
    if config.token is not None:
        params.append(("rvt-token", config.token))
    return params


def _query_input(config: ClientConfig, value: Any) -> str:
    encoded = _encode_value(value, "the actor input")
    if len(encoded) > config.max_input_size:
        raise InvalidRequest(
            f"The actor input is {len(encoded)} bytes of CBOR, more than the "
            f"{config.max_input_size} bytes a gateway URL may carry. Create the actor with "
            "`create(...)` instead, or raise `max_input_size`.",
            code="input_too_large",
        )
    return base64.urlsafe_b64encode(encoded).rstrip(b"=").decode("ascii")


def gateway_path(config: ClientConfig, target: Target, actor_path: str) -> str:
    """The gateway path (with query string) of ``actor_path`` on ``target``."""
    if isinstance(target, IdTarget):
        token = f"@{_encode_uri_component(config.token)}" if config.token is not None else ""
        return f"/gateway/{_encode_uri_component(target.actor_id)}{token}{actor_path}"
    query = urlencode(_query_params(config, target))
    return f"/gateway/{_encode_uri_component(target.name)}{actor_path}?{query}"


def websocket_url(config: ClientConfig, target: Target) -> str:
    """The URL of the ``/connect`` WebSocket of ``target``."""
    return config.websocket_endpoint + gateway_path(config, target, "/connect")


def _conn_params_json(params: Any) -> str:
    try:
        text = json.dumps(params, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"Connection params must be JSON-serialisable: {exc}") from None
    if len(text.encode()) > MAX_CONN_PARAMS_BYTES:
        raise InvalidRequest(
            f"Connection params are larger than {MAX_CONN_PARAMS_BYTES} bytes of JSON.",
            code="conn_params_too_long",
        )
    return text


def websocket_protocols(encoding: Encoding, params: Any) -> list[str]:
    """Subprotocols of a ``/connect`` upgrade: ``rivet``, the encoding, the params."""
    protocols = ["rivet", f"rivet_encoding.{encoding}"]
    if params is not None:
        protocols.append(f"rivet_conn_params.{_encode_uri_component(_conn_params_json(params))}")
    return protocols


def _encode_value(value: Any, what: str) -> bytes:
    try:
        return encode_cbor_value(value, what)
    except PerdureError as exc:
        # A value outside the wire model is the caller's mistake, not a server error.
        raise TypeError(exc.message) from None


# -- HTTP calls ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HttpReply:
    """What came back from the server, as the I/O layer read it."""

    status: int
    headers: Mapping[str, str]
    content: bytes


@dataclass(frozen=True, slots=True)
class HttpCall(Generic[T]):
    """One HTTP exchange, fully described; ``parse`` turns the reply into the result
    (or raises :class:`ActorError`/:class:`TransportError`). ``retryable``: it may be
    sent again when its outcome is unknown (it carries an idempotency key, or reads)."""

    method: str
    url: str
    headers: dict[str, str]
    content: bytes | None
    timeout: float | None
    parse: Callable[[HttpReply], T]
    retryable: bool = False

    def keyed(self, key: str | None) -> HttpCall[T]:
        """This call with idempotency key ``key`` (the ``Idempotency-Key`` header), which
        makes it safe to retry; itself without one."""
        if key is None:
            return self
        return replace(self, headers={**self.headers, "idempotency-key": key}, retryable=True)


def _protocol_headers(config: ClientConfig, params: Any) -> dict[str, str]:
    headers = dict(config.headers)
    headers["content-type"] = codec.content_type(config.encoding)
    headers["x-rivet-encoding"] = config.encoding
    if config.token is not None:  # as the official client: header and URL both carry it
        headers["x-rivet-token"] = config.token
    if params is not None:
        headers["x-rivet-conn-params"] = _conn_params_json(params)
    return headers


def _encode_http(message: Any, config: ClientConfig) -> bytes:
    try:
        return bytes(codec.encode_http(message, config.encoding))
    except PerdureError as exc:
        raise TypeError(exc.message) from None


def action_call(
    config: ClientConfig,
    target: Target,
    name: str,
    args: Sequence[Any],
    params: Any,
    *,
    read: bool = False,
) -> HttpCall[Any]:
    """``POST /action/{name}`` with ``{args}``; the result is the action's output.
    ``read``: it changes nothing, so it may be retried without an idempotency key."""
    content = _encode_http(HttpActionRequest(list(args)), config)

    def parse(reply: HttpReply) -> Any:
        if reply.status != 200:
            raise error_from_reply(reply, config.encoding)
        response = _decode_http(reply, config.encoding, HttpActionResponse)
        return response.output

    return HttpCall(
        "POST",
        config.endpoint + gateway_path(config, target, f"/action/{_encode_uri_component(name)}"),
        _protocol_headers(config, params),
        content,
        config.timeout,
        parse,
        retryable=read,
    )


def queue_call(
    config: ClientConfig,
    target: Target,
    name: str,
    body: Any,
    params: Any,
    *,
    wait: bool,
    timeout: Duration | None,
    delay: Duration | None = None,
    at: Instant | None = None,
) -> HttpCall[QueueResult | None]:
    """``POST /queue/{name}`` with ``{body, name, wait[, timeout ms][, delay ms | at ms]}``.

    Without ``wait`` the result is ``None`` (the message is durably enqueued); with it,
    a :class:`~perdure.handles.SendResult` (``status`` ``"completed"`` or ``"timedOut"``,
    ``response``). ``timeout`` is seconds or a ``timedelta``. ``delay``/``at``: a delayed
    send (perdure's extension of the body; checked here, before anything is sent).
    """
    wait_seconds = seconds(timeout, "send() timeout")
    timeout_ms = None if wait_seconds is None else round(wait_seconds * 1000)
    delay_s, at_ms = send_delay(delay, at, wait=wait)
    message = HttpQueueSendRequest(
        body=body,
        name=name,
        wait=wait,
        timeout=timeout_ms,
        delay=None if delay_s is None else math.ceil(delay_s * 1000),
        at=at_ms,
    )
    content = _encode_http(message, config)
    http_timeout = config.timeout
    if wait and http_timeout is not None:
        # The server holds the response for up to `timeout` and then answers timedOut
        # itself; the HTTP request is given that long on top of the usual limit, so the
        # server's answer, not the HTTP timeout, ends the wait.
        http_timeout = None if wait_seconds is None else http_timeout + wait_seconds

    def parse(reply: HttpReply) -> QueueResult | None:
        if reply.status != 200:
            raise error_from_reply(reply, config.encoding)
        response = _decode_http(reply, config.encoding, HttpQueueSendResponse)
        if not wait:
            return None
        if response.status in ("completed", "timedOut"):
            status = cast('Literal["completed", "timedOut"]', response.status)
            return SendResult(status, response.response)
        raise TransportError(f"The server answered an unknown send status {response.status!r}.")

    return HttpCall(
        "POST",
        config.endpoint + gateway_path(config, target, f"/queue/{_encode_uri_component(name)}"),
        _protocol_headers(config, params),
        content,
        http_timeout,
        parse,
    )


def _decode_http(reply: HttpReply, encoding: Encoding, kind: type[T]) -> T:
    try:
        decoded: T = codec.decode_http(reply.content, encoding, kind)
    except InvalidRequest as exc:
        raise TransportError(f"The server sent a malformed reply: {exc.message}") from None
    return decoded


# What a proxy in front of the servers answers when a node failed or was away: the
# request may or may not have reached it (docs/clients.md, "Retries").
_PROXY_FAILURES = frozenset({502, 503, 504})


def error_from_reply(reply: HttpReply, encoding: Encoding) -> Exception:
    """The error an unsuccessful reply stands for.

    A protocol error body becomes :class:`ActorError`; anything else (a proxy's page,
    an empty 502) becomes :class:`TransportError` quoting the status and the start of it.
    """
    content_type = reply.headers.get("content-type", "")
    body_encoding: Encoding = "json" if "json" in content_type else encoding
    try:
        error = codec.decode_http(reply.content, body_encoding, HttpResponseError)
    except InvalidRequest:
        snippet = reply.content[:200].decode("utf-8", "replace")
        return TransportError(
            f"The server answered HTTP {reply.status}: {snippet!r}",
            retryable=reply.status in _PROXY_FAILURES,
        )
    return ActorError(
        error.group,
        error.code,
        error.message,
        error.metadata,
        error.actor,
        http_status=reply.status,
    )


# -- management API (JSON) ---------------------------------------------------------------


def _management_headers(config: ClientConfig) -> dict[str, str]:
    headers = dict(config.headers)
    headers["content-type"] = "application/json"
    if config.token is not None:
        headers["authorization"] = f"Bearer {config.token}"
    return headers


def _management_json(reply: HttpReply) -> Any:
    try:
        return json.loads(reply.content)
    except (ValueError, UnicodeDecodeError):
        snippet = reply.content[:200].decode("utf-8", "replace")
        raise TransportError(f"The server answered HTTP {reply.status}: {snippet!r}") from None


def _management_error(reply: HttpReply) -> Exception:
    body = _management_json(reply)
    if isinstance(body, dict) and isinstance(body.get("group"), str):
        return ActorError(
            body["group"],
            str(body.get("code", "unknown")),
            str(body.get("message", "")),
            body.get("metadata"),
            http_status=reply.status,
        )
    return TransportError(f"The server answered HTTP {reply.status}: {body!r}")


def _actor_id_of(body: Any) -> str:
    actor = body.get("actor") if isinstance(body, dict) else None
    actor_id = actor.get("actor_id") if isinstance(actor, dict) else None
    if not isinstance(actor_id, str):
        raise TransportError(f"The server's answer names no actor: {body!r}")
    return actor_id


def _management_body(config: ClientConfig, name: str, key: Key, input: Any) -> bytes:
    body: dict[str, Any] = {
        "name": name,
        "key": serialize_key(key),
        "runner_name_selector": config.runner,
        "crash_policy": "sleep",
    }
    if input is not None:
        # The management API takes the input as standard base64 of CBOR.
        body["input"] = base64.b64encode(_encode_value(input, "the actor input")).decode()
    return json.dumps(body).encode()


def _actor_call(
    config: ClientConfig, method: Literal["POST", "PUT"], name: str, key: Key, input: Any
) -> HttpCall[str]:
    # POST creates, PUT gets or creates; both answer {"actor": {"actor_id": …}}.
    def parse(reply: HttpReply) -> str:
        if not 200 <= reply.status < 300:
            raise _management_error(reply)
        return _actor_id_of(_management_json(reply))

    return HttpCall(
        method,
        f"{config.endpoint}/actors?{urlencode({'namespace': config.namespace})}",
        _management_headers(config),
        _management_body(config, name, key, input),
        config.timeout,
        parse,
    )


def create_call(config: ClientConfig, name: str, key: KeyArg, input: Any) -> HttpCall[str]:
    """``POST /actors``: create actor ``name``/``key`` now; the result is its id.

    Fails with ``ActorError`` (``actor.duplicate_key``) when the key is taken.
    """
    if not name:
        raise InvalidRequest("An actor name must not be empty.")
    return _actor_call(config, "POST", name, normalize_key(key), input)


def resolve_call(config: ClientConfig, target: Target) -> HttpCall[str] | str:
    """How to learn ``target``'s actor id: the id itself, or a management call.

    ``getOrCreate`` uses ``PUT /actors`` (creating the actor if needed, as the official
    client does); ``get`` uses ``GET /actors?name=…&key=…`` and fails with
    ``actor.not_found`` when nothing matches.
    """
    if isinstance(target, IdTarget):
        return target.actor_id
    if target.method == "getOrCreate":
        return _actor_call(config, "PUT", target.name, target.key, target.input)

    def parse_get(reply: HttpReply) -> str:
        if not 200 <= reply.status < 300:
            raise _management_error(reply)
        body = _management_json(reply)
        actors = body.get("actors") if isinstance(body, dict) else None
        if not isinstance(actors, list):
            raise TransportError(f"The server's answer lists no actors: {body!r}")
        if not actors:
            raise ActorError(
                "actor",
                "not_found",
                "The actor does not exist or was destroyed.",
                http_status=reply.status,
            )
        return _actor_id_of({"actor": actors[0]})

    query = {"namespace": config.namespace, "name": target.name, "key": serialize_key(target.key)}
    return HttpCall(
        "GET",
        f"{config.endpoint}/actors?{urlencode(query)}",
        _management_headers(config),
        None,
        config.timeout,
        parse_get,
    )
