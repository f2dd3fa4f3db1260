"""``perdure types``: the typed client module of a registry.

For each actor the module has an actions class, in which each action is named by the
function that implements it (``action("add", lambda: app.add)``: see
:mod:`perdure.typed._actions`), a handle and a connection class for asyncio and for
blocking code, and a property on the client classes ``AppClient`` and ``SyncAppClient``.
What the type checker cannot be shown becomes ``Any``: an action that is a lambda, a
closure or a bound method; a schema that is not a class importable by name (nor a
``list[...]``, ``X | None``, ``Literal[...]`` … of such).

The app's modules are imported at the end of the module and named nowhere that runs when
it is imported (the lambdas run at the first call; a base class's type arguments that
name them are strings). So the app may import the module too, for a typed ``c.client()``
in an action, whichever of the two is imported first.

The output is deterministic (same registry, same text: no date, no version, not even
the output's path), so a suite can check that the committed module is up to date
(``perdure types --check``). It is laid out as ``ruff format`` and ``black`` leave it at
any line length from 88 up: a line that does not fit in 88 characters is split with a
trailing comma, which both keep split.
"""

from __future__ import annotations

import importlib
import inspect
import keyword
import re
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from perdure.definition import ActorDefinition
from perdure.registry import Registry
from perdure.typed.aio import TypedClient, TypedConnection, TypedWorkflowHandle
from perdure.typed.sync import SyncTypedClient, SyncTypedConnection, SyncTypedWorkflowHandle

__all__ = ["CLIENT", "SYNC_CLIENT", "generate"]

CLIENT = "AppClient"
SYNC_CLIENT = "SyncAppClient"
_WIDTH = 88
_MODES = ("", "Sync")  # the prefixes of the asyncio and the blocking classes


def _public(*classes: type[Any]) -> frozenset[str]:
    return frozenset(name for cls in classes for name in dir(cls) if not name.startswith("_"))


# An action cannot be an attribute where the typed classes have one already.
_TAKEN_BY_HANDLES = _public(
    TypedWorkflowHandle, TypedConnection, SyncTypedWorkflowHandle, SyncTypedConnection
)
_TAKEN_BY_CLIENTS = _public(TypedClient, SyncTypedClient)


def generate(registry: Registry, spec: str) -> str:
    """The typed client module of ``registry``, loaded from ``spec`` (``module:attr``,
    which the module's docstring names in the command that writes it again)."""
    refs = _References()
    names = _Names(list(registry.actors))
    actors = [_Actor.of(name, spec, refs, names) for name, spec in registry.actors.items()]
    body = _Lines()
    for item in actors:
        item.write(body, refs)
    _write_clients(body, actors, refs)
    if refs.modules:
        body.blank(2)
        body.add("# Last: the app may import this module too (a typed c.client() in an action).")
        for module, alias in sorted(refs.modules.items()):
            body.add(f"import {module} as {alias}")
    head = _Lines()
    head.add(f'"""Typed clients for the registry `{spec}`, written by::')
    head.blank()
    head.add(f"    perdure types {spec} -o <this file>")
    head.blank()
    head.add("Do not edit. Run it again when an actor, an action, a queue or an event is added,")
    head.add("renamed or removed; a changed signature needs nothing, as the types are read from")
    head.add("the functions themselves. Wrap a client: ``AppClient(create_client(url))``,")
    head.add("``AppClient(runtime.client())``, ``SyncAppClient(Client(url))`` (docs/clients.md).")
    head.add('"""')
    head.blank()
    head.add("# ruff: noqa: E402")  # the app's modules are imported at the end
    head.blank()
    head.add("from __future__ import annotations")
    head.blank()
    if refs.typing_names:
        head.add(f"from typing import {', '.join(sorted(refs.typing_names))}")
        head.blank()
    head.split("", "from perdure.typed import (", sorted(refs.perdure_names, key=_order), ")")
    return "\n".join([*head.lines, *body.lines]) + "\n"


# -- text ---------------------------------------------------------------------------------


class _Lines:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, line: str) -> None:
        self.lines.append(line)

    def blank(self, count: int = 1) -> None:
        self.lines.extend([""] * count)

    def split(self, indent: str, opening: str, items: list[str], closing: str) -> None:
        """``opening item, item closing`` on one line if it fits, else one item a line
        with a trailing comma (which formatters keep split)."""
        single = f"{indent}{opening}{', '.join(items)}{closing}"
        if len(single) <= _WIDTH:
            self.add(single)
            return
        self.add(f"{indent}{opening}")
        self.lines.extend(f"{indent}    {item}," for item in items)
        self.add(f"{indent}{closing}")

    def class_(self, name: str, bases: list[str], doc: str) -> None:
        self.blank(2)
        self.split("", f"class {name}(", bases, "):")
        self.add(f'    """{doc}"""')


def _order(name: str) -> tuple[int, str]:
    # ruff's and isort's order of imported names: constants, classes, then the rest.
    if name.isupper() and len(name) > 1:
        return 0, name
    return (1 if name[:1].isupper() else 2), name


def _string(text: str) -> str:
    if '"' not in text and "\\" not in text and text.isprintable():
        return f'"{text}"'
    return repr(text)


def _camel(name: str) -> str:
    parts = [part for part in re.split(r"[^0-9A-Za-z]+", name) if part]
    camel = "".join(part[0].upper() + part[1:] for part in parts) or "Actor"
    return f"Actor{camel}" if camel[0].isdigit() else camel


def _is_attribute(name: str, taken: frozenset[str] | set[str]) -> bool:
    return (
        name.isidentifier()
        and not keyword.iskeyword(name)
        and not name.startswith("_")
        and name not in taken
    )


class _Names:
    """The module's class names and the client's properties, each used once."""

    def __init__(self, actors: list[str]) -> None:
        self._classes = {CLIENT, SYNC_CLIENT}
        # An actor named as an attribute keeps its name; another may not take it.
        self._exact = {name for name in actors if _is_attribute(name, _TAKEN_BY_CLIENTS)}
        self._attributes: set[str] = set()

    def classes(self, wanted: str, patterns: tuple[str, ...]) -> str:
        """A stem for ``wanted`` such that every ``pattern.format(stem)`` is new."""
        stem, number = wanted, 2
        while any(pattern.format(stem) in self._classes for pattern in patterns):
            stem, number = f"{wanted}{number}", number + 1
        self._classes.update(pattern.format(stem) for pattern in patterns)
        return stem

    def attribute(self, actor: str) -> str | None:
        """The client's property for ``actor`` (``None``: reach it by name)."""
        if actor in self._exact:
            return actor
        wanted = re.sub(r"[^0-9A-Za-z_]", "_", actor)
        if wanted[:1].isdigit():
            wanted = f"actor_{wanted}"
        if not _is_attribute(wanted, _TAKEN_BY_CLIENTS | self._exact | self._attributes):
            return None
        self._attributes.add(wanted)
        return wanted


# -- what the module refers to -------------------------------------------------------------


class _References:
    """The names the module imports, collected while its classes are written."""

    def __init__(self) -> None:
        self.typing_names: set[str] = set()
        self.perdure_names: set[str] = set()
        self.modules: dict[str, str] = {}  # module -> alias

    def typing(self, name: str) -> str:
        self.typing_names.add(name)
        return name

    def perdure(self, name: str) -> str:
        self.perdure_names.add(name)
        return name

    def _alias(self, module: str) -> str:
        alias = self.modules.get(module)
        if alias is None:
            short = "_" + module.rpartition(".")[2]
            taken = set(self.modules.values())
            alias = short if short not in taken else "_" + module.replace(".", "_")
            self.modules[module] = alias
        return alias

    def to(self, obj: Any) -> str | None:
        """``alias.qualname`` for a module-level function or class, if importing its
        module and following its qualname gives it back; else ``None``."""
        if isinstance(obj, types.MethodType) or not (
            inspect.isfunction(obj) or inspect.isclass(obj)
        ):
            return None
        module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", "")
        if not module or module == "__main__" or "<" in qualname:
            return None
        try:
            found: Any = importlib.import_module(module)
            for part in qualname.split("."):
                found = getattr(found, part)
        except (ImportError, AttributeError):
            return None
        if found is not obj:
            return None
        return qualname if module == "builtins" else f"{self._alias(module)}.{qualname}"

    def type_of(self, schema: Any) -> str:
        """Source for the type ``schema`` (of a ``queue()``, ``input=``), ``Any`` where
        it cannot be written."""
        return self._type(schema) or self.typing("Any")

    def _type(self, schema: Any) -> str | None:
        if schema is None or schema is type(None):
            return "None"
        if schema is Any:
            return self.typing("Any")
        origin, args = typing.get_origin(schema), typing.get_args(schema)
        if origin is typing.Annotated:
            return self._type(args[0])
        if origin is typing.Literal:
            if not all(isinstance(arg, str | int | bool) for arg in args):
                return None
            values = [_string(a) if isinstance(a, str) else repr(a) for a in args]
            return f"{self.typing('Literal')}[{', '.join(values)}]"
        parts = ["..." if arg is Ellipsis else self._type(arg) for arg in args]
        if None in parts:
            return None
        if origin is typing.Union or origin is types.UnionType:
            return " | ".join(typing.cast(list[str], parts))
        if origin is not None and args:
            base = self.to(origin)
            return None if base is None else f"{base}[{', '.join(typing.cast(list[str], parts))}]"
        return self.to(schema)

    def argument(self, source: str) -> str:
        """``source`` as a base class's type argument: a string where it names a module
        imported at the end (evaluated at import, it would fail before that)."""
        if not any(f"{alias}." in source for alias in self.modules.values()):
            return source
        return f'"{source}"' if '"' not in source else f"'{source}'"


# -- one actor -----------------------------------------------------------------------------


@dataclass
class _Group:
    """The actions under one prefix: the actor's own, or a nested mapping's."""

    stem: str  # of its class names
    path: list[str]
    actions: list[tuple[str, str, list[str]]] = field(default_factory=list)  # attr, call
    groups: list[tuple[str, _Group]] = field(default_factory=list)
    unreachable: list[str] = field(default_factory=list)

    @property
    def mixin(self) -> str:
        return f"_{self.stem}Actions"


@dataclass
class _Actor:
    name: str
    stem: str
    attribute: str | None
    workflow: bool
    root: _Group
    events: str  # the type arguments of the base classes
    queues: str
    bodies: str
    input: str
    output: str | None  # the reference to its workflow's run

    @classmethod
    def of(cls, name: str, definition: ActorDefinition, refs: _References, names: _Names) -> _Actor:
        stem = names.classes(
            _camel(name),
            ("_{}Actions", "{}Connection", "Sync{}Connection", "{}Handle", "Sync{}Handle"),
        )
        root = _actions(refs, names, definition.raw_actions, stem, [])
        queues = definition.queues or {}
        bodies = [
            refs.type_of(q.schema) if q.schema is not None else "Any" for q in queues.values()
        ]
        run = definition.hooks.get("run")
        typed_run = definition.kind == "workflow" and inspect.iscoroutinefunction(run)
        return cls(
            name=name,
            stem=stem,
            attribute=names.attribute(name),
            workflow=definition.kind == "workflow",
            root=root,
            events=_names(refs, definition.events, unset="str"),
            queues=_names(refs, definition.queues, unset=refs.typing("Never")),
            bodies=refs.typing("Any")
            if "Any" in bodies or not bodies
            else " | ".join(dict.fromkeys(bodies)),
            input=refs.typing("Any")
            if definition.input_schema is None
            else refs.type_of(definition.input_schema),
            output=refs.to(run) if typed_run else None,
        )

    def write(self, out: _Lines, refs: _References) -> None:
        for group in _innermost_first(self.root):
            _write_group(out, group, refs)
        refs.typing("Any")  # connect()'s params
        for mode in _MODES:
            kind = refs.perdure(f"{mode}TypedConnection")
            bases = [self.root.mixin, f"{kind}[{self.events}]"]
            out.class_(
                f"{mode}{self.stem}Connection", bases, f"A connection to a `{self.name}` actor."
            )
        for mode in _MODES:
            kind = refs.perdure(f"{mode}Typed{'Workflow' if self.workflow else ''}Handle")
            arguments = f"{self.queues}, {refs.argument(self.bodies)}"
            bases = [self.root.mixin, f"{kind}[{arguments}]"]
            out.class_(f"{mode}{self.stem}Handle", bases, f"A handle to a `{self.name}` actor.")
            out.blank()
            if self.output is not None:
                factory = refs.perdure("workflow_output")
                out.split("    ", f"workflow_result = {factory}(", [f"lambda: {self.output}"], ")")
                out.blank()
            connection = f"{mode}{self.stem}Connection"
            out.split("    ", "def connect(", ["self", "params: Any = None"], f") -> {connection}:")
            out.add(f"        return {connection}(self.untyped.connect(params))")


def _names(refs: _References, specs: Mapping[str, Any] | None, *, unset: str) -> str:
    """The type of the names of an actor's events or queues: ``unset`` when it declares
    none (any event may be broadcast; no queue exists), ``Never`` for an empty mapping."""
    if specs is None:
        return unset
    if not specs:
        return refs.typing("Never")
    return f"{refs.typing('Literal')}[{', '.join(_string(name) for name in specs)}]"


def _actions(
    refs: _References, names: _Names, raw: Mapping[str, Any], stem: str, path: list[str]
) -> _Group:
    group = _Group(stem, path)
    taken = _TAKEN_BY_HANDLES if not path else frozenset()
    for key, value in raw.items():
        full = ".".join([*path, key])
        if not _is_attribute(key, taken):
            group.unreachable.append(full)
        elif isinstance(value, Mapping):
            inner = names.classes(f"{stem}{_camel(key)}", ("_{}Actions", "{}", "Sync{}"))
            group.groups.append((key, _actions(refs, names, value, inner, [*path, key])))
        elif (reference := refs.to(value)) is None:
            group.actions.append((key, refs.perdure("untyped_action"), [_string(full)]))
        else:
            factory = "async_action" if inspect.iscoroutinefunction(value) else "action"
            call = [_string(full), f"lambda: {reference}"]
            group.actions.append((key, refs.perdure(factory), call))
    return group


def _innermost_first(group: _Group) -> Iterator[_Group]:
    """A group's classes are written before the class that names them."""
    for _, inner in group.groups:
        yield from _innermost_first(inner)
    yield group


def _write_group(out: _Lines, group: _Group, refs: _References) -> None:
    out.blank(2)
    out.add(f"class {group.mixin}:")
    if not group.actions and not group.groups:
        where = f"`{'.'.join(group.path)}`" if group.path else "the actor"
        out.add(f'    """No action of {where} can be named as an attribute."""')
    for attribute, factory, arguments in group.actions:
        out.split("    ", f"{attribute} = {factory}(", arguments, ")")
    for attribute, inner in group.groups:
        out.split(
            "    ",
            f"{attribute} = {refs.perdure('group')}(",
            [inner.stem, f"Sync{inner.stem}"],
            ")",
        )
    if group.unreachable:
        out.add("    # Not attributes (call them with `.untyped.action(name, …)`):")
        out.add(f"    # {', '.join(_string(name) for name in group.unreachable)}")
    if group.path:
        prefix = ".".join(group.path)
        for mode in _MODES:
            base = refs.perdure(f"{mode}ActionGroup")
            out.class_(
                f"{mode}{group.stem}", [group.mixin, base], f"The actions under `{prefix}.`."
            )


def _write_clients(out: _Lines, actors: list[_Actor], refs: _References) -> None:
    for mode, name in zip(_MODES, (CLIENT, SYNC_CLIENT), strict=True):
        accessor = refs.perdure(f"{mode}TypedAccessor")
        kind = "blocking" if mode else "asyncio"
        out.class_(
            name, [refs.perdure(f"{mode}TypedClient")], f"The registry's actors, for {kind} code."
        )
        for item in actors:
            out.blank()
            if item.attribute is None:
                out.add(f"    # `{item.name}`: `client.untyped.actor({_string(item.name)})`")
                continue
            handle = f"{mode}{item.stem}Handle"
            out.add("    @property")
            out.split(
                "    ",
                f"def {item.attribute}(",
                ["self"],
                f") -> {accessor}[{handle}, {item.input}]:",
            )
            out.split("        ", "return self._accessor(", [_string(item.name), handle], ")")
