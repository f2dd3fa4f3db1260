"""``setup(use=...)``: the registry of actor definitions that a runtime and server serve."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from perdure.definition import ActorDefinition
from perdure.errors import DefinitionError
from perdure.options import suggest

__all__ = ["MAX_ACTOR_NAME_LENGTH", "Registry", "RegistryOptions", "setup"]

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
