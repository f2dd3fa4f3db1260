"""Actor definitions: ``actor(...)``, ``event(...)``, ``queue(...)`` and their options.

A definition is inert data. It is checked when the registry is built (``setup(use=...)``):
an unknown option or hook name, a hook with the wrong number of parameters, or ``state``
given together with ``create_state`` fail then, with a message naming the problem.
"""

from __future__ import annotations

import copy
import datetime as _dt
import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from perdure._names import keywords_checked
from perdure._time import duration_seconds
from perdure.errors import ActionNotFound, DefinitionError, InvalidRequest, QueueError
from perdure.handles import WORKFLOW_ACTIONS, WORKFLOW_STATUS_ACTION
from perdure.options import ActorOptions, DatabaseSpec, db, seconds, suggest, with_option
from perdure.queue_message import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_VISIBILITY_TIMEOUT,
    QueueLimits,
    check_max_attempts,
    queue_limits,
)
from perdure.schemas import (
    ArgConverter,
    adapter_for,
    adopt_state,
    arg_converter,
    builds_models,
    find_state_schema,
    load_state,
    to_plain,
    validate_payload,
)

__all__ = [
    "MISSING",
    "WORKFLOW_STATUS_ACTION",
    "ActionSpec",
    "ActorDefinition",
    "ActorOptions",
    "DatabaseSpec",
    "EventSpec",
    "QueueSpec",
    "actor",
    "db",
    "event",
    "queue",
    "seconds",
    "workflow",
]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


@dataclass(frozen=True, slots=True)
class EventSpec:
    """An event an actor may broadcast; ``schema`` (any type pydantic understands) validates.
    ``can_subscribe(c)``: whether ``c.conn`` may subscribe to it (rivetkit's per-event
    ``canSubscribe``)."""

    schema: Any = None
    can_subscribe: Callable[..., Any] | None = None


@dataclass(frozen=True, slots=True)
class QueueSpec:
    """A durable queue; ``schema`` validates message bodies (pydantic ``TypeAdapter``).

    ``visibility_timeout`` (seconds) and ``max_attempts`` are the lease of a completable
    message received outside a workflow (docs/queues.md): hidden that long, redelivered
    unless completed, a dead letter after ``max_attempts`` deliveries.
    """

    schema: Any = None
    visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    limits: QueueLimits | None = None  # concurrency and rate, per key (docs/queues.md)
    # rivetkit's per-queue canPublish: whether c.conn may send to the queue.
    can_publish: Callable[..., Any] | None = None


@keywords_checked("event()")
def event(schema: Any = None, *, can_subscribe: Callable[..., Any] | None = None) -> EventSpec:
    """Declare an event, optionally with a payload schema and ``can_subscribe(c)``, which
    answers whether the connection ``c.conn`` may subscribe to it (docs/edge.md)."""
    return EventSpec(schema, _access_hook(can_subscribe, "event() can_subscribe"))


def _access_hook(hook: Callable[..., Any] | None, what: str) -> Callable[..., Any] | None:
    if hook is not None and not callable(hook):
        raise DefinitionError(f"{what} must be a function of `c`, not {hook!r}.")
    return hook


@keywords_checked("queue()")
def queue(
    schema: Any = None,
    *,
    visibility_timeout: float | _dt.timedelta = DEFAULT_VISIBILITY_TIMEOUT,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    concurrency: int | None = None,
    rate: tuple[int, float | _dt.timedelta] | None = None,
    key: str | Callable[[Any], Any] | None = None,
    can_publish: Callable[..., Any] | None = None,
) -> QueueSpec:
    """Declare a queue, optionally with a body schema, and the lease of its completable
    messages outside workflows (seconds or ``timedelta``; ``max_attempts >= 1``).

    ``concurrency`` (at most that many messages in progress at once) and ``rate``
    (``(starts, period)``: at most ``starts`` receives per ``period`` seconds) limit the
    queue per ``key``: a body field's name, or a function of the (plain) body, giving a
    tenant id or the like; without ``key`` they hold for the whole queue. In progress:
    received with ``completable=True`` and not yet completed (docs/queues.md).
    ``can_publish(c)`` answers whether the connection ``c.conn`` may send to it
    (rivetkit's per-queue ``canPublish``; docs/edge.md).
    """
    timeout = duration_seconds(visibility_timeout, "queue() visibility_timeout")
    attempts = check_max_attempts(max_attempts, "queue() max_attempts")
    limits = queue_limits(concurrency, rate, key)
    return QueueSpec(
        schema, timeout, attempts, limits, _access_hook(can_publish, "queue() can_publish")
    )


@dataclass(frozen=True, slots=True)
class ActionSpec:
    """An action: its function and how many positional arguments it accepts."""

    name: str
    fn: Callable[..., Any]
    min_args: int
    max_args: int | None  # None: takes *args

    def check_arity(self, count: int) -> str | None:
        """An error message if ``count`` arguments don't fit, else ``None``."""
        if count < self.min_args or (self.max_args is not None and count > self.max_args):
            if self.max_args is None:
                wanted = f"at least {self.min_args}"
            elif self.min_args == self.max_args:
                wanted = str(self.min_args)
            else:
                wanted = f"{self.min_args} to {self.max_args}"
            plural = "" if wanted == "1" else "s"
            return f"Action `{self.name}` takes {wanted} argument{plural} ({count} given)."
        return None


# Hook name -> number of positional parameters it is called with.
HOOK_ARITY: dict[str, int] = {
    "create_state": 2,
    "create_vars": 1,
    "create_conn_state": 2,
    "on_create": 2,
    "on_wake": 1,
    "on_sleep": 1,
    "on_destroy": 1,
    "on_before_connect": 2,
    "can_subscribe": 2,
    "can_publish": 2,
    "on_connect": 2,
    "on_disconnect": 2,
    "on_state_change": 2,
    "on_before_action_response": 4,
    "on_error": 2,
    "on_migrate": 2,
    "run": 1,
    # Raw handlers (docs/edge.md, "Raw handlers"): a Starlette Request / WebSocket.
    "on_request": 2,
    "on_websocket": 2,
}
_VALUE_FIELDS = (
    "state",
    "vars",
    "conn_state",
    "events",
    "queues",
    "actions",
    "options",
    "db",
)
# Schemas (any type pydantic's TypeAdapter accepts; docs/models.md).
_SCHEMA_FIELDS = {
    "input": "input_schema",
    "conn_params": "conn_params_schema",
    "state_schema": "state_schema",
}

ActorKind = Literal["actor", "workflow"]


@dataclass(slots=True)
class ActorDefinition:
    """What ``actor(...)`` returns. Build a registry from it with ``setup(use=...)``."""

    kind: ActorKind = "actor"
    state: Any = MISSING
    vars: Any = MISSING
    conn_state: Any = MISSING
    hooks: dict[str, Callable[..., Any]] = field(default_factory=dict)
    events: dict[str, EventSpec] | None = None
    queues: dict[str, QueueSpec] | None = None
    db: DatabaseSpec | None = None
    raw_actions: dict[str, Any] = field(default_factory=dict)
    raw_options: ActorOptions | Mapping[str, Any] | None = None
    unknown: dict[str, Any] = field(default_factory=dict)
    requires_run: bool = False
    input_schema: Any = None
    conn_params_schema: Any = None
    # Declared as ``state_schema=``, or found by ``validate`` (docs/models.md).
    state_schema: Any = None
    # Filled by ``validate``:
    name: str = ""
    options: ActorOptions = field(default_factory=ActorOptions)
    actions: dict[str, ActionSpec] = field(default_factory=dict)
    # Declared with state (``state=``, ``create_state`` or ``state_schema=``): without,
    # ``c.state`` raises ``actor.state_not_enabled`` as in rivetkit.
    has_state: bool = False
    # A can_subscribe hook (the actor's or an event's) guards subscriptions.
    subscriptions_guarded: bool = False

    def action(self, fn_or_name: Callable[..., Any] | str | None = None) -> Any:
        """Register an action by decorator: ``@defn.action`` or ``@defn.action("name")``."""
        if callable(fn_or_name):
            self.raw_actions[fn_or_name.__name__] = fn_or_name
            return fn_or_name
        explicit = fn_or_name

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.raw_actions[explicit or fn.__name__] = fn
            return fn

        return register

    def hook(self, name: str) -> Callable[..., Any] | None:
        """The hook of that name, or ``None``."""
        return self.hooks.get(name)

    def initial_state(self) -> Any:
        """A fresh deep copy of the static ``state`` value."""
        return copy.deepcopy(self.state)

    def initial_vars(self) -> Any:
        """A fresh deep copy of the static ``vars`` value (``None`` if not given)."""
        return None if self.vars is MISSING else copy.deepcopy(self.vars)

    def initial_conn_state(self) -> Any:
        """A fresh deep copy of the static ``conn_state`` value (``None`` if not given)."""
        return None if self.conn_state is MISSING else copy.deepcopy(self.conn_state)

    # The rules below are decided here and nowhere else: every way into an actor (the
    # gateway, WebSocket, the in-process client, schedules, actor code) asks the definition.

    def is_workflow_action(self, name: str) -> bool:
        """True for a built-in action of a workflow actor (``$workflow``, its status for
        clients, and the controls of :data:`WORKFLOW_ACTIONS`), unless the actor defines
        an action of that name itself."""
        return name in WORKFLOW_ACTIONS and self.kind == "workflow" and name not in self.actions

    def find_action(self, name: str, count: int) -> ActionSpec:
        """The action ``name`` for a call with ``count`` arguments.

        ``actor.action_not_found`` if there is none; ``actor.invalid_request`` (with the
        action in its metadata) if the argument count does not fit.
        """
        spec = self.actions.get(name)
        if spec is None:
            raise ActionNotFound(name)
        problem = spec.check_arity(count)
        if problem is not None:
            raise InvalidRequest(problem, metadata={"action": name})
        return spec

    def require_queues(self) -> dict[str, QueueSpec]:
        """The declared queues; ``queue.not_configured`` when the actor has none."""
        if self.queues is None:
            raise QueueError(f"Actor `{self.name}` has no queues.", code="not_configured")
        return self.queues

    def find_queue(self, name: str) -> QueueSpec:
        """The queue ``name``; ``queue.not_configured`` or ``queue.invalid_name``."""
        spec = self.require_queues().get(name)
        if spec is None:
            raise QueueError(f"Actor `{self.name}` has no queue `{name}`.", code="invalid_name")
        return spec

    def validate_message(self, queue: str, body: Any) -> Any:
        """Check a message for ``queue``: the queue exists and the body fits its schema.

        Returns the body as the schema coerced it (``queue.invalid_message`` otherwise).
        Each message is validated once, by whoever first takes it in.
        """
        spec = self.find_queue(queue)
        if spec.schema is None:
            return body
        return validate_payload(
            spec.schema, body, what=f"message for queue `{queue}`", code="invalid_message"
        )

    def validate_event(self, name: str, args: list[Any]) -> list[Any]:
        """Check a broadcast against the event's declared schema, if events are declared;
        return the arguments in their plain form (models dumped), as every transport,
        the in-process one included, sends them."""
        if self.events is None:
            return _plain_args(args)
        spec = self.events.get(name)
        if spec is None:
            raise InvalidRequest(
                f"Actor `{self.name}` declares no event `{name}`.", code="unknown_event"
            )
        if spec.schema is not None and args:
            first = validate_payload(spec.schema, args[0], what=f"event `{name}`")
            if builds_models(spec.schema):
                first = to_plain(first)
            # Otherwise validation built plain values already: no second walk.
            return [first, *_plain_args(args[1:])] if len(args) > 1 else [first]
        return _plain_args(args)

    def check_input(self, value: Any) -> Any:
        """The create input in its plain (storable) form, checked against ``input=``:
        ``actor.invalid_input`` (400) before anything is created if it does not fit."""
        if self.input_schema is not None:
            value = validate_payload(
                self.input_schema,
                value,
                what=f"input for actor `{self.name}`",
                code="invalid_input",
            )
        return to_plain(value)

    def input_value(self, plain: Any) -> Any:
        """A stored input as ``create_state``/``on_create`` receive it (the model)."""
        if self.input_schema is None or plain is None or not builds_models(self.input_schema):
            return plain
        return validate_payload(self.input_schema, plain, what="stored input", code="invalid_input")

    def check_conn_params(self, params: Any) -> Any:
        """Connection params as the connect hooks receive them (``conn_params=``'s type);
        ``actor.invalid_params`` (400) if they do not fit. No params (``None``: a call
        without any, an HTTP call, a schedule) stay ``None``."""
        if self.conn_params_schema is None or params is None:
            return params
        return validate_payload(
            self.conn_params_schema, params, what="connection params", code="invalid_params"
        )

    def message_body(self, queue: str, plain: Any) -> Any:
        """A stored (plain) message body as its receiver gets it: the queue's schema type."""
        spec = self.queues.get(queue) if self.queues is not None else None
        if spec is None or spec.schema is None or not builds_models(spec.schema):
            return plain  # validated when it was sent, and stored as it is
        return validate_payload(
            spec.schema, plain, what=f"message for queue `{queue}`", code="invalid_message"
        )

    def adopt_state(self, value: Any) -> Any:
        """A new state value (``create_state``, ``state=``, ``c.state = …``) as the state
        schema's type; ``state.invalid`` if it does not fit."""
        return adopt_state(self.state_schema, value, self.name)

    def load_state(self, plain: Any) -> Any:
        """A stored (plain) state as the state schema's type."""
        return load_state(self.state_schema, plain, self.name)

    def validate(self, name: str) -> None:
        """Check the definition; raise ``DefinitionError`` naming the first problem."""
        self.name = name
        for unknown_name in self.unknown:
            allowed = [*HOOK_ARITY, *_VALUE_FIELDS, *_SCHEMA_FIELDS]
            raise DefinitionError(
                f"Actor `{name}`: unknown option `{unknown_name}`{suggest(unknown_name, allowed)}."
            )
        for left, right in (
            ("state", "create_state"),
            ("vars", "create_vars"),
            ("conn_state", "create_conn_state"),
        ):
            if getattr(self, left) is not MISSING and right in self.hooks:
                raise DefinitionError(f"Actor `{name}`: give `{left}` or `{right}`, not both.")
        if self.requires_run and "run" not in self.hooks:
            raise DefinitionError(f"Workflow `{name}` needs a `run` function.")
        if "on_error" in self.hooks and self.kind != "workflow":
            raise DefinitionError(f"Actor `{name}`: `on_error` is a workflow hook; use workflow().")
        for hook_name, fn in self.hooks.items():
            _check_hook(name, hook_name, fn)
        self.options = ActorOptions.build(name, self.raw_options)
        self.has_state = (
            self.state is not MISSING
            or "create_state" in self.hooks
            or self.state_schema is not None
        )
        self.actions = _flatten_actions(name, self.raw_actions)
        self.events = _check_specs(name, "events", self.events, EventSpec)
        self.queues = _check_specs(name, "queues", self.queues, QueueSpec)
        self.subscriptions_guarded = "can_subscribe" in self.hooks or any(
            spec.can_subscribe is not None for spec in (self.events or {}).values()
        )
        for option in ("input", "conn_params"):
            schema = getattr(self, _SCHEMA_FIELDS[option])
            if schema is not None:
                _check_schema(name, option, schema)
        self.state_schema = find_state_schema(
            name,
            self.state_schema,
            None if self.state is MISSING else self.state,
            self.hooks.get("create_state"),
        )


def _plain_args(args: list[Any]) -> list[Any]:
    plain: list[Any] = to_plain(args)
    return plain


def actor(**config: Any) -> ActorDefinition:
    """Define an actor.

    Keys: ``state`` or ``create_state(c, input)``; ``vars`` or ``create_vars(c)``;
    ``conn_state`` or ``create_conn_state(c, params)``; ``events``; ``queues``; ``actions``
    (a mapping, nested mappings give dotted names, or use ``@defn.action``); hooks
    ``on_create(c, input)``, ``on_wake(c)``, ``on_sleep(c)``, ``on_destroy(c)``,
    ``on_before_connect(c, params)``, ``on_connect(c, conn)``, ``on_disconnect(c, conn)``,
    ``on_state_change(c, state)``, ``on_before_action_response(c, name, args, output)``,
    ``can_subscribe(c, event)`` and ``can_publish(c, queue)`` (return ``False`` to refuse
    a client's subscription or queue send with ``auth.forbidden``; docs/edge.md);
    ``on_request(c, request)`` and ``on_websocket(c, websocket)`` (raw handlers, a
    Starlette ``Request``/``WebSocket``; docs/edge.md, "Raw handlers"); ``run(c)``;
    ``options`` (see :class:`ActorOptions`); ``db=db(on_migrate=...)`` (an SQL database,
    ``c.db``; docs/storage.md) and ``on_migrate(c, is_new)``, which run at every start
    before any other hook. Hooks may be sync or async.
    Schemas (pydantic models, dataclasses, TypedDicts; docs/models.md): ``input`` (the
    create input), ``conn_params``, ``state_schema`` (also taken from a model ``state``
    or ``create_state``'s return annotation); annotated action parameters are validated.
    ``on_before_action_response`` runs on every action's output (HTTP and WebSocket) and
    returns the output to send; if it fails, the action's own output is sent. The order of
    the hooks is rivetkit's (docs/DESIGN.md §8, "Lifecycle hooks and rivetkit").
    """
    return _build_definition("actor", config)


def workflow(**config: Any) -> ActorDefinition:
    """Define an actor whose ``run(ctx)`` is a durable workflow (see ``perdure.workflows``).

    Takes everything :func:`actor` takes, plus ``on_error(c, event)`` and ``timeout``
    (seconds or ``timedelta``: the run's deadline, counted from its start; the option
    ``workflow_timeout``, docs/workflow-control.md); ``run`` is required.
    """
    timeout = config.pop("timeout", None)
    definition = _build_definition("workflow", config)
    definition.requires_run = True
    if timeout is not None:
        definition.raw_options = with_option(
            definition.raw_options, "workflow_timeout", timeout, "timeout"
        )
    return definition


def _build_definition(kind: ActorKind, config: dict[str, Any]) -> ActorDefinition:
    definition = ActorDefinition(kind=kind)
    for key, value in config.items():
        if key in HOOK_ARITY:
            if value is not None:
                definition.hooks[key] = value
        elif key == "actions":
            definition.raw_actions = dict(value or {})
        elif key == "options":
            definition.raw_options = value
        elif key == "events":
            definition.events = None if value is None else dict(value)
        elif key == "queues":
            definition.queues = None if value is None else dict(value)
        elif key == "db":
            if value is not None and not isinstance(value, DatabaseSpec):
                raise DefinitionError("`db` takes what `db(...)` returns: db(on_migrate=...).")
            definition.db = value
        elif key in ("state", "vars", "conn_state"):
            setattr(definition, key, value)
        elif key in _SCHEMA_FIELDS:
            setattr(definition, _SCHEMA_FIELDS[key], value)
        else:
            definition.unknown[key] = value
    return definition


_RAW_HOOK_PARAMS = {"on_request": "c, request", "on_websocket": "c, websocket"}


def _check_hook(actor_name: str, hook_name: str, fn: Any) -> None:
    if not callable(fn):
        raise DefinitionError(f"Actor `{actor_name}`: `{hook_name}` must be callable.")
    arity = HOOK_ARITY[hook_name]
    try:
        inspect.signature(fn).bind(*([None] * arity))
    except TypeError:
        params = ", ".join(["c", "input", "…"][: min(arity, 3)]) if arity > 1 else "c"
        params = _RAW_HOOK_PARAMS.get(hook_name, params)
        raise DefinitionError(
            f"Actor `{actor_name}`: hook `{hook_name}` must accept {arity} positional "
            f"argument{'s' if arity != 1 else ''} ({params}); its signature is "
            f"{_signature_text(fn)}."
        ) from None
    except ValueError:  # builtins without a signature: trust them
        return


def _signature_text(fn: Any) -> str:
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return "unknown"


def _flatten_actions(
    actor_name: str, raw: Mapping[str, Any], prefix: str = ""
) -> dict[str, ActionSpec]:
    specs: dict[str, ActionSpec] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not key or "." in key:
            raise DefinitionError(f"Actor `{actor_name}`: invalid action name {key!r}.")
        full = f"{prefix}{key}"
        if isinstance(value, Mapping):
            specs.update(_flatten_actions(actor_name, value, f"{full}."))
        elif callable(value):
            specs[full] = _action_spec(actor_name, full, value)
        else:
            raise DefinitionError(
                f"Actor `{actor_name}`: action `{full}` must be a function or a mapping of actions."
            )
    return specs


def _action_spec(actor_name: str, name: str, fn: Callable[..., Any]) -> ActionSpec:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return ActionSpec(name, fn, 0, None)
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    variadic = any(p.kind is p.VAR_POSITIONAL for p in params)
    if not positional and not variadic:
        raise DefinitionError(
            f"Actor `{actor_name}`: action `{name}` must take the context as its first parameter."
        )
    rest = positional[1:] if positional else []
    required = sum(1 for p in rest if p.default is p.empty)
    converter = arg_converter(actor_name, name, fn)
    called = fn if converter is None else _typed_action(fn, converter)
    return ActionSpec(name, called, required, None if variadic else len(rest))


def _typed_action(fn: Callable[..., Any], converter: ArgConverter) -> Callable[..., Any]:
    """``fn`` called with its arguments validated against its annotations (models in)."""

    @functools.wraps(fn)
    def call(context: Any, *args: Any) -> Any:
        return fn(context, *converter.convert(args))

    return call


def _check_specs(actor_name: str, what: str, specs: Any, kind: type[Any]) -> Any:
    if specs is None:
        return None
    if not isinstance(specs, Mapping):
        raise DefinitionError(f"Actor `{actor_name}`: `{what}` must be a mapping of names.")
    checked = {}
    for key, value in specs.items():
        if not isinstance(key, str) or not key:
            raise DefinitionError(f"Actor `{actor_name}`: invalid name {key!r} in `{what}`.")
        spec = value if isinstance(value, kind) else kind(value)
        if spec.schema is not None:
            _check_schema(actor_name, f"{what}.{key}", spec.schema)
        checked[key] = spec
    return checked


def _check_schema(actor_name: str, where: str, schema: Any) -> None:
    try:
        adapter_for(schema)
    except Exception as exc:
        raise DefinitionError(
            f"Actor `{actor_name}`: the schema of `{where}` is not usable: {exc}"
        ) from exc
