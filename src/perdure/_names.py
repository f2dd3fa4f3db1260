"""RivetKit's camelCase names met in Python: clear errors that name the snake_case one.

Code ported from TypeScript keeps RivetKit's spelling (``maxHistory=100``,
``fire.scheduledAt``, ``c.vars.resource`` on a dict). Python would fail with a bare
``TypeError`` or ``AttributeError``, often far from the line that caused it (inside an
actor's start, reported to a client as ``actor.internal_error``). The helpers here fail
at the call with the name to use instead:

- :func:`keywords_checked` wraps a public API function: an unknown keyword raises
  :class:`~perdure.errors.ArgumentError` (``api.unknown_argument``, a ``TypeError``)
  at the call, before the function starts: "unknown argument `maxHistory`; did you
  mean `max_history`?".
- :class:`SnakeCaseAttributes` gives an object's missing attribute an ``AttributeError``
  that suggests the snake_case attribute (``fire.scheduledAt`` -> ``scheduled_at``).
- :class:`VarsDict` is the ``dict`` that ``c.vars`` holds when vars are a dict: reading
  ``c.vars.resource`` says to write ``c.vars["resource"]`` or to use an object.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import re
from collections.abc import Callable, Collection, Iterable
from typing import Any, ParamSpec, TypeVar

from perdure.errors import ArgumentError

__all__ = [
    "SnakeCaseAttributes",
    "VarsDict",
    "check_keywords",
    "keywords_checked",
    "snake_case",
    "suggestion",
    "vars_value",
]

P = ParamSpec("P")
R = TypeVar("R")

_HUMP = re.compile(r"(?<=[a-z0-9])([A-Z])|(?<=[A-Z])([A-Z])(?=[a-z])")


def snake_case(name: str) -> str:
    """``maxHistory`` -> ``max_history``; ``retryBackoffMS`` -> ``retry_backoff_ms``."""
    return _HUMP.sub(lambda m: "_" + (m.group(1) or m.group(2)), name).lower()


def suggestion(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate a misspelt ``name`` most likely means: its snake_case form if that
    is one, else the closest by spelling; ``None`` when nothing is close."""
    choices = [c for c in candidates if not c.startswith("_")]
    snake = snake_case(name)
    if snake in choices:
        return snake
    close = difflib.get_close_matches(snake, choices, n=1, cutoff=0.7)
    return close[0] if close else None


def _unknown_argument(call: str, name: str, accepted: Collection[str]) -> ArgumentError:
    better = suggestion(name, accepted)
    if better is not None:
        hint = f"; did you mean `{better}`?"
    elif accepted:
        hint = f" (it takes {', '.join(f'`{a}`' for a in sorted(accepted))})"
    else:
        hint = " (it takes no keyword arguments)"
    return ArgumentError(
        f"{call}: unknown argument `{name}`{hint}",
        code="unknown_argument",
        metadata={"argument": name, "suggestion": better},
    )


def check_keywords(call: str, given: Iterable[str], accepted: Collection[str]) -> None:
    """Raise ``api.unknown_argument`` for the first name of ``given`` not in ``accepted``."""
    for name in given:
        if name not in accepted:
            raise _unknown_argument(call, name, accepted)


def keyword_names(fn: Callable[..., Any]) -> frozenset[str]:
    """The names ``fn`` accepts as keywords (``self`` and positional-only ones aside)."""
    parameters = inspect.signature(fn).parameters.values()
    return frozenset(
        p.name
        for p in parameters
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"
    )


def keywords_checked(call: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a public API function so that an unknown keyword fails at the call.

    ``call`` names the function in messages (``"cron.every()"``). The check runs before
    the function: for a coroutine function it runs when the coroutine is created, so
    ``c.cron.every(maxHistory=1)`` raises on that line, awaited or not. The decorated
    function keeps its signature for type checkers and ``inspect``.
    """

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(fn)
        accepted = keyword_names(fn)

        @functools.wraps(fn)
        def checked(*args: P.args, **kwargs: P.kwargs) -> R:
            # Call first, look only on failure: this wraps ctx.step and the receives, so
            # a good call pays for nothing but the wrapper. A bad keyword or an options
            # object fails binding (a TypeError) before the function starts, awaited or
            # not; a TypeError from a sync function's own body is re-raised unchanged.
            try:
                return fn(*args, **kwargs)
            except TypeError:
                problem = _misuse(call, signature, accepted, args, kwargs)
                if problem is None:
                    raise
                raise problem from None

        mark = getattr(inspect, "markcoroutinefunction", None)  # Python 3.12+
        if mark is not None and inspect.iscoroutinefunction(fn):
            mark(checked)  # whoever asks still sees a coroutine function
        return checked

    return decorate


def _misuse(
    call: str,
    signature: inspect.Signature,
    accepted: Collection[str],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> ArgumentError | None:
    """Why a call failed to bind, as RivetKit code would get it wrong: an unknown
    (camelCase) keyword, or RivetKit's options object passed whole
    (``c.cron.every({name, interval})``), which does not fit the signature: say to pass
    keywords, renamed as needed. ``None`` when it is neither."""
    for name in kwargs:
        if name not in accepted:
            return _unknown_argument(call, name, accepted)
    options = next((arg for arg in args if type(arg) is dict), None)
    if options is None:
        return None
    try:
        signature.bind(*args, **kwargs)
    except TypeError:
        renames = [
            f"`{key}` -> `{better}`"
            for key in options
            if isinstance(key, str)
            and key not in accepted
            and (better := suggestion(key, accepted)) is not None
        ]
        renamed = f" (renamed: {', '.join(renames)})" if renames else ""
        return ArgumentError(
            f"{call} takes keyword arguments, not an options object: pass each option as "
            f"a snake_case keyword{renamed}.",
            code="options_object",
        )
    return None


class SnakeCaseAttributes:
    """Mixin: a missing attribute's ``AttributeError`` names the snake_case one.

    ``fire.scheduledAt`` -> "ScheduledFireInfo has no attribute `scheduledAt`; did you
    mean `scheduled_at`?". Only reached when normal lookup fails, so it costs nothing
    otherwise.
    """

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # protocols probed by copy, pickle, pydantic...
            raise AttributeError(name)
        owner = type(self).__name__
        better = suggestion(name, dir(type(self)))
        hint = f"; did you mean `{better}`?" if better is not None else ""
        raise AttributeError(f"{owner} has no attribute `{name}`{hint}", name=name, obj=self)


class VarsDict(dict[str, Any]):
    """The ``dict`` that ``c.vars`` holds when an actor's vars are a dict.

    It is a plain dict in every way but one: reading a key as an attribute
    (``c.vars.resource``, the TypeScript spelling) raises an ``AttributeError`` that
    says how to write it: ``c.vars["resource"]``, or return an object (a dataclass, a
    ``SimpleNamespace``) from ``create_vars``/``vars=`` for attribute access.
    """

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        where = "it has that key" if name in self else "it has no such key either"
        raise AttributeError(
            f"c.vars is a dict, so `vars.{name}` is not an attribute ({where}): write "
            f'`c.vars["{name}"]`, or return an object (a dataclass or SimpleNamespace) '
            "from create_vars / vars= to use attributes.",
            name=name,
            obj=self,
        )


def vars_value(value: Any) -> Any:
    """Vars as ``c.vars`` holds them: a plain dict becomes a :class:`VarsDict` (for its
    error message); any other object, a dict subclass included, is kept as it is."""
    if type(value) is dict:
        return VarsDict(value)
    return value
