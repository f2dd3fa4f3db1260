"""``setup(use=...)``: the registry of actor definitions that a runtime and server serve."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import CodeType
from typing import Any

from perdure.definition import ActorDefinition
from perdure.errors import DefinitionError
from perdure.options import suggest

__all__ = ["MAX_ACTOR_NAME_LENGTH", "Registry", "RegistryOptions", "registry_digest", "setup"]

MAX_ACTOR_NAME_LENGTH = 64
_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_\-.]+$")


@dataclass(frozen=True, slots=True)
class RegistryOptions:
    """Limits applied by the server (sizes in bytes)."""

    max_incoming_message_size: int = 65536
    max_outgoing_message_size: int = 1048576
    max_http_body_size: int = 20 * 1024 * 1024
    max_input_size: int = 4 * 1024 * 1024
    max_conn_params_size: int = 4096
    # Per WebSocket connection (docs/edge.md): more is refused with a coded error.
    max_actions_in_flight_per_connection: int = 1024
    max_subscriptions_per_connection: int = 1024


@dataclass(slots=True)
class Registry:
    """Actor definitions by name, validated. Build one with :func:`setup`."""

    actors: dict[str, ActorDefinition]
    options: RegistryOptions = field(default_factory=RegistryOptions)

    def get(self, name: str) -> ActorDefinition | None:
        """The definition registered under ``name``, or ``None``."""
        return self.actors.get(name)


def setup(*, use: Mapping[str, ActorDefinition], **options: Any) -> Registry:
    """Build a registry from ``{name: definition}``; validates every definition now."""
    if not isinstance(use, Mapping) or not use:
        raise DefinitionError("setup(use=...) needs a mapping of actor names to definitions.")
    known = {f.name for f in fields(RegistryOptions)}
    for option in options:
        if option not in known:
            raise DefinitionError(f"setup(): unknown option `{option}`{suggest(option, known)}.")
    actors: dict[str, ActorDefinition] = {}
    for name, definition in use.items():
        if not isinstance(name, str) or not _NAME_PATTERN.match(name):
            raise DefinitionError(
                f"Invalid actor name {name!r}: use letters, digits, `_`, `-` and `.`."
            )
        if len(name) > MAX_ACTOR_NAME_LENGTH:
            raise DefinitionError(f"Actor name `{name}` is longer than {MAX_ACTOR_NAME_LENGTH}.")
        if not isinstance(definition, ActorDefinition):
            raise DefinitionError(f"`{name}` is not an actor definition (use actor(...)).")
        definition.validate(name)
        actors[name] = definition
    return Registry(actors, RegistryOptions(**options))


# ---------------------------------------------------- the version of the code

_DIGEST_CHARS = 12


def registry_digest(registry: Registry) -> str:
    """A short hex digest of ``registry``'s definitions: the version a cluster node
    announces by default (``perdure serve --code-version``).

    A workflow run is placed on a node that runs the code it started on (docs/deploy.md,
    "Rolling deploy with versions"). Each node announces a version: the operator's
    (``perdure serve --code-version``), or by default this digest of
    what decides whether a stored history replays:

    - each actor's name and kind, and its action, queue and event names;
    - for a workflow, the code of its ``run`` function: its bytecode, the names it uses and
      its constants, recursively through the functions defined inside it (step bodies written
      as nested functions or lambdas, their names as string constants).

    The same code digests the same across restarts and machines running one Python version:
    bytecode carries no addresses or line numbers, and a frozenset constant (whose order
    depends on string hashing) is digested sorted. A change to a helper the workflow calls by
    name from another module is not seen: give such deploys an explicit ``--code-version``.
    """
    digest = hashlib.sha256()
    for name in sorted(registry.actors):
        definition = registry.actors[name]
        parts = [
            name,
            definition.kind,
            ",".join(sorted(definition.actions)),
            ",".join(sorted(definition.queues or ())),
            ",".join(sorted(definition.events or ())),
        ]
        digest.update("\0".join(parts).encode())
        run = definition.hooks.get("run")
        if definition.kind == "workflow" and run is not None:
            _digest_function(digest, run)
    return digest.hexdigest()[:_DIGEST_CHARS]


def _digest_function(digest: Any, fn: Any) -> None:
    code = getattr(fn, "__code__", None)
    if code is None:  # a callable object: its type's name is all that is stable
        digest.update(type(fn).__qualname__.encode())
        return
    _digest_code(digest, code)


def _digest_code(digest: Any, code: CodeType) -> None:
    digest.update(code.co_code)
    digest.update("\0".join(code.co_names).encode())
    for const in code.co_consts:
        if isinstance(const, CodeType):
            _digest_code(digest, const)
        else:
            digest.update(_constant(const).encode())


def _constant(value: Any) -> str:
    if isinstance(value, frozenset):
        return "{" + ",".join(sorted(_constant(v) for v in value)) + "}"
    if isinstance(value, tuple):
        return "(" + ",".join(_constant(v) for v in value) + ")"
    return repr(value)
