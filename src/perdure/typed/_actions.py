"""Typed actions: descriptors that take their types from the action functions themselves.

A typed handle class (written by ``perdure types``, see :mod:`perdure.typed.generate`)
declares each action as ``increment = action("increment", lambda: app.increment)``. The
type checker reads the function's signature through the lambda: the parameters after the
context become the call's, the return annotation the result's. So a signature is written
once, in the actor's code, and a change to it reaches every caller without generating
anything again.

The lambda is called only on the first call, not when the class is built: a typed client
used inside the app's own actors (``c.client()``) can then import the generated module
from the app module, and the app module from it, without an import cycle failing.

At run time an action binds keyword arguments to their positions (actions travel with
positional arguments only), calls the untyped handle or connection, and converts the
result to the function's return annotation: actions send models out in their plain form
(docs/models.md), and a result typed ``Progress`` must be a ``Progress``.

The same descriptor serves the asyncio and the blocking classes: accessed on a
:class:`Caller` it is an awaitable call, on a :class:`SyncCaller` a blocking one.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, overload

from perdure.handles import Duration

__all__ = [
    "Action",
    "ActionGroup",
    "Caller",
    "Group",
    "Output",
    "SyncActionGroup",
    "SyncCaller",
    "SyncWorkflowCaller",
    "WorkflowCaller",
    "action",
    "async_action",
    "group",
    "untyped_action",
    "untyped_output",
    "workflow_output",
]

logger = logging.getLogger("perdure.typed")

P = ParamSpec("P")
R = TypeVar("R")
A = TypeVar("A", bound="ActionGroup")
S = TypeVar("S", bound="SyncActionGroup")


# -- what actions are called through ---------------------------------------------------


class Caller:
    """An asyncio handle or connection: typed actions accessed on it are awaited."""

    __slots__ = ()

    def _call(self, name: str, args: tuple[Any, ...]) -> Awaitable[Any]:
        raise NotImplementedError


class SyncCaller:
    """A blocking handle or connection: typed actions accessed on it return at once."""

    __slots__ = ()

    def _call(self, name: str, args: tuple[Any, ...]) -> Any:
        raise NotImplementedError


class WorkflowCaller(Caller):
    """An asyncio handle of a workflow actor: it also has the workflow's output."""

    __slots__ = ()

    def _output(self, timeout: Duration | None) -> Awaitable[Any]:
        raise NotImplementedError


class SyncWorkflowCaller(SyncCaller):
    """A blocking handle of a workflow actor."""

    __slots__ = ()

    def _output(self, timeout: Duration | None) -> Any:
        raise NotImplementedError


# -- one action's run-time facts ---------------------------------------------------------


class _Facts:
    """What a call needs of the action function, read from it on the first call: the
    signature (keyword arguments to positions) and the type of its result."""

    __slots__ = ("_load", "_loaded", "_returns", "_signature", "name")

    def __init__(self, name: str, load: Callable[[], Callable[..., Any]] | None) -> None:
        self.name = name
        self._load = load
        self._loaded = load is None
        self._signature: inspect.Signature | None = None
        self._returns: Any = None  # the result's type, or None: the result as it came

    def _ready(self) -> None:
        if self._loaded or self._load is None:
            return
        fn = self._load()
        try:
            self._signature = inspect.signature(fn)
        except (TypeError, ValueError):  # a builtin without a signature: positions only
            self._signature = None
        self._returns = _result_schema(fn, self.name)
        self._loaded = True

    def arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """The call's arguments as positions (the wire knows no keyword arguments)."""
        if not kwargs:
            return args
        self._ready()
        if self._signature is None:
            raise TypeError(f"Action `{self.name}` takes positional arguments only.")
        bound = self._signature.bind(None, *args, **kwargs)  # None: the context
        if bound.kwargs:  # given, for a keyword-only parameter: the engine cannot pass it
            names = ", ".join(f"`{name}`" for name in bound.kwargs)
            raise TypeError(
                f"Action `{self.name}`: {names} is keyword-only; actions take positional "
                "arguments only."
            )
        bound.apply_defaults()  # a later argument given by name needs the earlier ones
        return bound.args[1:]

    def result(self, value: Any) -> Any:
        """``value`` (plain, as it came) as the function's return annotation makes it."""
        self._ready()
        if self._returns is None:
            return value
        from perdure.schemas import validate_payload

        # `actor.invalid_result` when it does not fit (an on_before_action_response hook
        # that changes results, an annotation that says what the action does not return).
        return validate_payload(
            self._returns, value, what=f"result of `{self.name}`", code="invalid_result"
        )


def _result_schema(fn: Callable[..., Any], what: str) -> Any:
    """``fn``'s return annotation, or ``None`` where the plain value is the answer: no
    annotation, ``Any``, ``object``, ``None``, or one that cannot be resolved or that
    pydantic cannot use (the call still works; its result stays plain)."""
    # Imported here: pydantic is loaded only once a typed result needs it.
    from perdure.schemas import adapter_for, hints_of

    try:
        # The return annotation alone: the context's may name a type imported for type
        # checkers only.
        hint = hints_of(fn, ["return"], f"Action `{what}`").get("return")
    except Exception as exc:
        logger.warning("The result type of `%s` cannot be resolved (%s): kept plain", what, exc)
        return None
    if hint is None or hint is Any or hint is object or hint is type(None):
        return None
    try:
        adapter_for(hint)
    except Exception as exc:
        logger.warning("pydantic cannot use the result type of `%s` (%s): kept plain", what, exc)
        return None
    return hint


# -- actions -----------------------------------------------------------------------------


class AsyncCall(Generic[P, R]):
    """An action bound to an asyncio handle or connection: ``await call(*args)``."""

    __slots__ = ("_caller", "_facts")

    def __init__(self, caller: Caller, facts: _Facts) -> None:
        self._caller = caller
        self._facts = facts

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Awaitable[R]:
        # Bound now, so that a wrong keyword fails at the call, not at the await.
        return self._run(self._facts.arguments(args, kwargs))

    async def _run(self, args: tuple[Any, ...]) -> R:
        result: R = self._facts.result(await self._caller._call(self._facts.name, args))
        return result


class SyncCall(Generic[P, R]):
    """An action bound to a blocking handle or connection: ``call(*args)``."""

    __slots__ = ("_caller", "_facts")

    def __init__(self, caller: SyncCaller, facts: _Facts) -> None:
        self._caller = caller
        self._facts = facts

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        positions = self._facts.arguments(args, kwargs)
        result: R = self._facts.result(self._caller._call(self._facts.name, positions))
        return result


class Action(Generic[P, R]):
    """A typed action of a handle class; see :func:`action`."""

    __slots__ = ("_facts",)

    def __init__(self, name: str, load: Callable[[], Callable[..., Any]] | None) -> None:
        self._facts = _Facts(name, load)

    @property
    def name(self) -> str:
        """The action's name, as the actor declares it."""
        return self._facts.name

    @overload
    def __get__(self, instance: None, owner: type[Any]) -> Self: ...

    @overload
    def __get__(self, instance: Caller, owner: type[Any]) -> AsyncCall[P, R]: ...

    @overload
    def __get__(self, instance: SyncCaller, owner: type[Any]) -> SyncCall[P, R]: ...

    def __get__(self, instance: object, owner: type[Any]) -> Any:
        if instance is None:
            return self
        if isinstance(instance, SyncCaller):
            return SyncCall(instance, self._facts)
        if isinstance(instance, Caller):
            return AsyncCall(instance, self._facts)
        raise TypeError(f"Action `{self.name}` belongs on a typed handle or connection.")


def action(name: str, fn: Callable[[], Callable[Concatenate[Any, P], R]]) -> Action[P, R]:
    """The action ``name``, typed as the function ``fn()`` returns: its parameters after
    the context, and its result."""
    return Action(name, fn)


def async_action(
    name: str, fn: Callable[[], Callable[Concatenate[Any, P], Awaitable[R]]]
) -> Action[P, R]:
    """:func:`action` for an ``async def`` action: the result is what it returns once
    awaited. (One function cannot take both: with the context typed ``Any``, mypy would
    find both forms fitting an ``async def`` and type the result ``Any``.)"""
    return Action(name, fn)


def untyped_action(name: str) -> Action[..., Any]:
    """The action ``name``, whose function cannot be named by the type checker (a lambda,
    a closure, a bound method): any arguments, an ``Any`` result."""
    return Action(name, None)


# -- nested actions (``actions={"users": {"add": add}}`` is ``handle.users.add``) ----------


class ActionGroup(Caller):
    """Actions under a dotted prefix, on an asyncio handle or connection."""

    __slots__ = ("_parent",)

    def __init__(self, parent: Caller) -> None:
        self._parent = parent

    def _call(self, name: str, args: tuple[Any, ...]) -> Awaitable[Any]:
        return self._parent._call(name, args)


class SyncActionGroup(SyncCaller):
    """Actions under a dotted prefix, on a blocking handle or connection."""

    __slots__ = ("_parent",)

    def __init__(self, parent: SyncCaller) -> None:
        self._parent = parent

    def _call(self, name: str, args: tuple[Any, ...]) -> Any:
        return self._parent._call(name, args)


class Group(Generic[A, S]):
    """``handle.users``: the group's asyncio or blocking class, by the handle's kind."""

    __slots__ = ("_async", "_sync")

    def __init__(self, async_class: type[A], sync_class: type[S]) -> None:
        self._async = async_class
        self._sync = sync_class

    @overload
    def __get__(self, instance: None, owner: type[Any]) -> Self: ...

    @overload
    def __get__(self, instance: Caller, owner: type[Any]) -> A: ...

    @overload
    def __get__(self, instance: SyncCaller, owner: type[Any]) -> S: ...

    def __get__(self, instance: object, owner: type[Any]) -> Any:
        if instance is None:
            return self
        if isinstance(instance, SyncCaller):
            return self._sync(instance)
        if isinstance(instance, Caller):
            return self._async(instance)
        raise TypeError("An action group belongs on a typed handle or connection.")


def group(async_class: type[A], sync_class: type[S]) -> Group[A, S]:
    """Nested actions: their asyncio class and their blocking class."""
    return Group(async_class, sync_class)


# -- a workflow's output ------------------------------------------------------------------


class AsyncOutput(Generic[R]):
    """``await handle.workflow_result(timeout=None)``, typed as the ``run`` returns."""

    __slots__ = ("_caller", "_facts")

    def __init__(self, caller: WorkflowCaller, facts: _Facts) -> None:
        self._caller = caller
        self._facts = facts

    def __call__(self, timeout: Duration | None = None) -> Awaitable[R]:
        """Wait for the workflow to end and return its output (see
        :meth:`perdure.handles.Handle.workflow_result`)."""
        return self._run(timeout)

    async def _run(self, timeout: Duration | None) -> R:
        result: R = self._facts.result(await self._caller._output(timeout))
        return result


class SyncOutput(Generic[R]):
    """``handle.workflow_result(timeout=None)``, blocking."""

    __slots__ = ("_caller", "_facts")

    def __init__(self, caller: SyncWorkflowCaller, facts: _Facts) -> None:
        self._caller = caller
        self._facts = facts

    def __call__(self, timeout: Duration | None = None) -> R:
        """Wait for the workflow to end and return its output."""
        result: R = self._facts.result(self._caller._output(timeout))
        return result


class Output(Generic[R]):
    """A workflow handle's ``workflow_result``; see :func:`workflow_output`."""

    __slots__ = ("_facts",)

    def __init__(self, load: Callable[[], Callable[..., Any]] | None) -> None:
        self._facts = _Facts("run", load)

    @overload
    def __get__(self, instance: None, owner: type[Any]) -> Self: ...

    @overload
    def __get__(self, instance: WorkflowCaller, owner: type[Any]) -> AsyncOutput[R]: ...

    @overload
    def __get__(self, instance: SyncWorkflowCaller, owner: type[Any]) -> SyncOutput[R]: ...

    def __get__(self, instance: object, owner: type[Any]) -> Any:
        if instance is None:
            return self
        if isinstance(instance, SyncWorkflowCaller):
            return SyncOutput(instance, self._facts)
        if isinstance(instance, WorkflowCaller):
            return AsyncOutput(instance, self._facts)
        raise TypeError("workflow_result belongs on a typed workflow handle.")


def workflow_output(fn: Callable[[], Callable[[Any], Awaitable[R]]]) -> Output[R]:
    """The output of a workflow whose ``run`` is ``fn()``: what it returns."""
    return Output(fn)


def untyped_output() -> Output[Any]:
    """The output of a workflow whose ``run`` cannot be named: ``Any``."""
    return Output(None)
