"""Calling user hooks, and the first start's hooks (``create_state``, ``on_create``).

A hook may be sync or async. The first start is where a caller's input meets the user's
code: when that code fails on the input, the caller is told so (400
``actor.invalid_input``) rather than given an opaque internal error, and the runtime drops
the half-created actor so that a retry with a good input creates it afresh.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from perdure.definition import MISSING, ActorDefinition
from perdure.errors import ActionTimedOut, InvalidRequest
from perdure.schemas import errors_of, problems_of
from perdure.store.encoding import decode_value

if TYPE_CHECKING:
    from perdure.runtime.actor.contexts import ActorContext
    from perdure.runtime.kernel.core import ActorCore

__all__ = ["await_action", "before_action_response", "call_hook", "migrate", "run_create_hooks"]

_log = logging.getLogger("perdure.actor")

# The ways code typically fails on input of the wrong shape (`input["count"]` on an input
# without it, `int(input)` on a word ...).
_SHAPE_ERRORS = (KeyError, TypeError, ValueError, AttributeError, IndexError)


async def call_hook(fn: Callable[..., Any], *args: Any, timeout: float | None = None) -> Any:
    """Call a sync or async hook, with an optional timeout for the async part."""
    result = fn(*args)
    if inspect.isawaitable(result):
        if timeout:
            async with asyncio.timeout(timeout):
                return await result
        return await result
    return result


async def migrate(core: ActorCore, context: ActorContext, is_new: bool) -> None:
    """The migrations of a start, before any other hook: open the actor's database and
    run its ``db(on_migrate=...)`` in one transaction, then the actor's
    ``on_migrate(c, is_new)``. A failure fails the start (nothing of it is kept)."""
    from perdure.runtime.kernel.db_api import Database

    db = await core.open_db()
    if db is not None and db.spec.on_migrate is not None:
        on_migrate = db.spec.on_migrate
        async with Database(db).transaction() as tx:
            await call_hook(on_migrate, tx, timeout=core.options.on_migrate_timeout)
    hook = core.definition.hooks.get("on_migrate")
    if hook is not None:
        await call_hook(hook, context, is_new, timeout=core.options.on_migrate_timeout)


async def await_action(name: str, awaitable: Awaitable[Any], timeout: float) -> Any:
    """Await what action ``name`` returned, within ``timeout`` seconds (0: no limit)."""
    deadline = asyncio.timeout(timeout or None)
    try:
        async with deadline:
            return await awaitable
    except TimeoutError:
        # Only our deadline is an action timeout; a TimeoutError the action raised
        # itself (its own asyncio.timeout, a socket) is its failure like any other.
        if deadline.expired():
            raise ActionTimedOut(name, timeout) from None
        raise


async def before_action_response(
    hook: Callable[..., Any], context: ActorContext, name: str, args: list[Any], output: Any
) -> Any:
    """What ``on_before_action_response`` makes of an action's output. Like rivetkit it
    gets the actor's context (no ``conn``), and a failure in it is logged and the
    action's own output is sent: the action itself succeeded."""
    try:
        return await call_hook(hook, context, name, args, output)
    except asyncio.CancelledError:
        raise
    except Exception:
        context.log.exception("on_before_action_response failed")
        return output


async def run_create_hooks(
    definition: ActorDefinition, context: ActorContext, record_input: bytes | None
) -> None:
    """The state from ``create_state`` (or ``state``), then ``on_create``, both given the
    input (``record_input``, the stored one, as the ``input=`` schema's type). The state
    is set through ``context`` (which converts it to the state's schema)."""
    hooks = definition.hooks
    stored_input = None if record_input is None else decode_value(record_input)
    actor_input = definition.input_value(stored_input)
    try:
        if "create_state" in hooks:
            context.state = await call_hook(hooks["create_state"], context, actor_input)
        elif definition.state is not MISSING:
            context.state = definition.initial_state()
        if "on_create" in hooks:
            await call_hook(hooks["on_create"], context, actor_input)
    except ValidationError as exc:
        # The hook validated the input itself (`Model.model_validate(input)`).
        raise InvalidRequest(
            f"Invalid input for actor `{definition.name}`: {problems_of(exc)}.",
            code="invalid_input",
            metadata={"errors": errors_of(exc)},
        ) from None
    except _SHAPE_ERRORS as exc:
        if stored_input is None:
            raise  # no input to blame: the actor's own code failed
        _log.warning("actor `%s`: creating it failed on its input", definition.name, exc_info=True)
        raise InvalidRequest(
            f"Actor `{definition.name}` could not be created from this input: creating it "
            f"raised {type(exc).__name__}. Declare `input=` with a schema to have the input "
            "checked (and its problems named) before the actor is created.",
            code="invalid_input",
        ) from None
