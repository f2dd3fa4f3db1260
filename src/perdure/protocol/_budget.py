"""The value domain and the size budgets of user values, in and out.

**Incoming.** Every user value decoded from the network (any encoding) is checked by
:func:`check_value` before anything acts on it. A value is accepted only if perdure can
send it back in every encoding it speaks (JSON, CBOR, BARE), so an accepted value can
always be read back:

- ``None``, ``bool``, ``str`` (no lone surrogates: UTF-8 cannot carry them), ``bytes``;
- ``int`` of less than :data:`MAX_INT_BITS` bits: what every encoding carries (CBOR as a
  bignum of at most 1,780 bytes, JSON as ``$BigInt`` text, which Python refuses past
  4,300 digits and converts in quadratic time: about 80 µs for the largest);
- finite ``float`` (JSON has no ``Infinity`` or ``NaN``);
- ``list``, ``dict`` with ``str`` keys (JSON objects have no other keys), sets of
  scalars, timezone-aware ``datetime``;
- at most :data:`MAX_DEPTH` levels and :data:`MAX_ELEMENTS` elements. (Text and bytes
  need no budget of their own: with string references refused, a value holds no more of
  them than the request that carried it, and that is bounded by the body limit.)

Anything else is refused with ``actor.unsupported_value`` (400) naming the path inside
the value (``args[0].items[3]``); a value over a budget with ``actor.value_too_large``
(413).

**Outgoing.** :func:`check_outgoing` bounds what an encoder would write *before* it runs:
it adds up a lower bound of the encoded size (string and byte lengths, one byte per
element) and stops at the limit, so a value that cannot fit is refused
(``message.outgoing_too_long``) without the encoder asking for its memory.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from typing import Any, Final

from perdure.errors import InvalidRequest, MessageError

__all__ = [
    "MAX_ELEMENTS",
    "MAX_INT_BITS",
    "ValueTooLarge",
    "check_outgoing",
    "check_value",
    "count_cbor_items",
    "count_json_containers",
    "outgoing_too_long",
    "root_of",
]

MAX_INT_BITS: Final = 1780 * 8
"""Largest integer magnitude accepted: ``|n| < 2**14240`` (4,287 decimal digits), the
largest bignum the CBOR decoder takes (1,780 bytes) and within Python's 4,300-digit
limit for JSON's ``$BigInt`` text."""

MAX_ELEMENTS: Final = 1_000_000
"""Most containers and items in one incoming value."""

MAX_DEPTH: Final = 400

_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_REASON = "a string with a lone surrogate cannot be sent as UTF-8"
_INT_LIMIT = 2**MAX_INT_BITS
_MAX_PATH_TEXT = 200
_INT_REASON = f"an integer beyond ±2**{MAX_INT_BITS} cannot be sent"
_NONE = type(None)
_SET_ITEMS = frozenset({str, int, float, bool, _NONE, bytes})


class ValueTooLarge(InvalidRequest):
    """An incoming value over one of the decoding budgets."""

    default_code = "value_too_large"
    status = 413


class _Refused(Exception):
    """Raised inside the walk; becomes InvalidRequest with the path."""

    def __init__(self, reason: str, *, too_large: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.too_large = too_large
        self.path: list[str] = []


def outgoing_too_long(limit: int) -> MessageError:
    """The error for a response (or frame) above ``limit`` bytes."""
    return MessageError(
        "Outgoing message too long",  # rivetkit 2.3.19's text; the limit is in the metadata
        code="outgoing_too_long",
        metadata={"limit": limit},
    )


def root_of(what: str) -> str:
    """The field a value sits in, from a decoder's ``what`` (``HttpActionRequest `args```
    or ``ActionRequest.args``): ``args``."""
    if what.endswith("`"):
        return what[what.rfind("`", 0, -1) + 1 : -1]
    return what.rsplit(".", 1)[-1].rsplit(" ", 1)[-1]


def check_value(value: Any, what: str) -> None:
    """Refuse an incoming value outside the domain or over a budget (see module doc)."""
    if _quick(value):
        return
    budget = [MAX_ELEMENTS]
    try:
        _check(value, 0, budget)
    except RecursionError:  # only if the caller's own stack was already deep
        exc = _Refused(f"nested deeper than {MAX_DEPTH} levels", too_large=True)
        raise ValueTooLarge(
            f"Invalid {root_of(what)}: {exc.reason}.", metadata={"path": root_of(what)}
        ) from None
    except _Refused as exc:
        path = root_of(what) + "".join(reversed(exc.path))
        if len(path) > _MAX_PATH_TEXT:  # 400 levels of `[0]` say nothing more than 60
            path = path[:_MAX_PATH_TEXT] + "…"
        cls = ValueTooLarge if exc.too_large else InvalidRequest
        code = None if exc.too_large else "unsupported_value"
        raise cls(f"Invalid {path}: {exc.reason}.", code=code, metadata={"path": path}) from None


def _quick(value: Any) -> bool:
    """The hot path: ``True`` when ``value`` is plainly within the domain, in one loop
    without a call per container. Anything unusual (a non-ASCII key, a tuple, a set, a
    datetime, a fault) answers ``False`` and the precise walk below decides, naming the
    path."""
    todo = [(value, 0)]
    elements = 0
    while todo:
        container, depth = todo.pop()
        if depth >= MAX_DEPTH:
            return False
        kind = type(container)
        if kind is dict:
            for key in container:
                if type(key) is not str or not key.isascii():
                    return False
            items: Any = container.values()
        elif kind is list:
            items = container
        else:
            return _settled(container, kind)
        elements += len(container) + 1
        for item in items:
            kind = type(item)
            if kind is str:
                if not item.isascii() and _SURROGATE.search(item):
                    return False
            elif kind is int:
                if not -_INT_LIMIT < item < _INT_LIMIT:
                    return False
            elif kind is float:
                if item - item != 0.0:  # inf or nan
                    return False
            elif kind is dict or kind is list:
                todo.append((item, depth + 1))
            elif kind is not bool and kind is not _NONE and kind is not bytes:
                return False
    return elements <= MAX_ELEMENTS


def _refused(reason: str, step: str) -> _Refused:
    exc = _Refused(reason)
    exc.path.append(step)
    return exc


def _scalar_fault(item: Any, kind: type) -> str | None:
    """Why a scalar cannot be sent back, ``None`` if it can; ``""`` for a non-scalar.
    Called only for the rare types the loops below do not settle inline."""
    if kind is str:
        return _SURROGATE_REASON if _SURROGATE.search(item) else None
    if kind is int:
        return None if -_INT_LIMIT < item < _INT_LIMIT else _INT_REASON
    if kind is float:
        return (
            None if math.isfinite(item) else f"{item} cannot be sent as JSON (only finite numbers)"
        )
    return ""


def _check(value: Any, depth: int, budget: list[int]) -> None:
    kind = type(value)
    if kind is list or kind is tuple:
        _check_array(value, depth, budget)
    elif kind is dict:
        _check_map(value, depth, budget)
    else:
        _check_rare(value, kind, depth, budget)


def _enter(value: Any, depth: int, budget: list[int]) -> None:
    if depth >= MAX_DEPTH:
        raise _Refused(f"nested deeper than {MAX_DEPTH} levels", too_large=True)
    budget[0] -= len(value) + 1
    if budget[0] < 0:
        raise _Refused(f"more than {MAX_ELEMENTS} elements", too_large=True)


def _settled(item: Any, kind: type) -> bool:
    """Whether a scalar is plainly within the domain (``False`` for anything to look at)."""
    if kind is str:
        return bool(item.isascii())
    if kind is int:
        return bool(-_INT_LIMIT < item < _INT_LIMIT)
    if kind is float:
        return bool(item - item == 0.0)  # neither inf nor nan
    return kind is bool or kind is _NONE or kind is bytes


# The precise walk: it runs only when the quick pass found something to look at, and
# names the path of what it refuses.


def _check_array(value: list[Any] | tuple[Any, ...], depth: int, budget: list[int]) -> None:
    _enter(value, depth, budget)
    for index, item in enumerate(value):
        try:
            _check_item(item, depth, budget)
        except _Refused as exc:
            exc.path.append(f"[{index}]")
            raise


def _check_map(value: dict[Any, Any], depth: int, budget: list[int]) -> None:
    _enter(value, depth, budget)
    for key, item in value.items():
        if type(key) is not str or (not key.isascii() and _SURROGATE.search(key)):
            raise _refused(_key_fault(key), f"[{key!r:.40}]")
        try:
            _check_item(item, depth, budget)
        except _Refused as exc:
            exc.path.append(_key_path(key))
            raise


def _check_item(item: Any, depth: int, budget: list[int]) -> None:
    # Two frames a level (this and the container's): 400 levels stay clear of Python's
    # recursion limit.
    kind = type(item)
    if kind is dict:
        _check_map(item, depth + 1, budget)
    elif kind is list:
        _check_array(item, depth + 1, budget)
    elif not _settled(item, kind):
        _check_rare(item, kind, depth + 1, budget)


def _key_fault(key: Any) -> str:
    if type(key) is str:
        return _SURROGATE_REASON
    return f"a map key must be a string, got {type(key).__name__}"


def _check_rare(value: Any, kind: type, depth: int, budget: list[int]) -> None:
    """Everything the loops do not settle: a non-ASCII string, a large int, a non-finite
    float, a tuple, a set, a datetime, or a value outside the domain."""
    if kind is tuple:
        _check_array(value, depth, budget)
        return
    if kind is bool or kind is _NONE or kind is bytes:
        return
    fault = _scalar_fault(value, kind)
    if fault == "":
        _check_other(value, kind, budget)
    elif fault is not None:
        raise _Refused(fault)


def _key_path(key: str) -> str:
    return f".{key}" if key.isidentifier() else f"[{key!r:.40}]"


def _check_other(value: Any, kind: type, budget: list[int]) -> None:
    if kind is set or kind is frozenset:
        budget[0] -= len(value) + 1
        for item in value:
            item_kind = type(item)
            if item_kind not in _SET_ITEMS:
                raise _Refused(
                    f"a set may only hold strings, numbers and bytes, not {item_kind.__name__}"
                )
            fault = _scalar_fault(item, item_kind)
            if fault:
                raise _Refused(fault)
        return
    if kind is _dt.datetime:
        if value.tzinfo is None:
            raise _Refused("a datetime without a time zone cannot be sent")
        return
    raise _Refused(f"values of type {_describe(value)} cannot be sent")


def _describe(value: Any) -> str:
    name = type(value).__name__
    return {"CBORTag": "CBOR tag", "CBORSimpleValue": "CBOR simple value"}.get(name, name)


def check_outgoing(value: Any, limit: int) -> None:
    """Refuse (``message.outgoing_too_long``) a value whose encoding certainly exceeds
    ``limit`` bytes, before any encoder runs.

    Adds up a lower bound of the encoded size (a byte per element, plus the length of
    every string and byte string; keys are not counted) and stops as soon as it passes
    the limit, so a list of millions of references to one string is refused after
    looking at a few of them. A cyclic value grows the count on every lap: it ends too.
    """
    kind = type(value)
    if kind is str or kind is bytes:
        if len(value) > limit:
            raise outgoing_too_long(limit)
        return
    if kind is not list and kind is not dict and kind is not tuple:
        return
    todo = [value]
    size = 0
    while todo:
        container = todo.pop()
        size += len(container) + 1
        if size > limit:
            raise outgoing_too_long(limit)
        for item in container.values() if type(container) is dict else container:
            kind = type(item)
            if kind is str or kind is bytes:
                size += len(item)
                if size > limit:
                    raise outgoing_too_long(limit)
            elif kind is list or kind is dict or kind is tuple:
                todo.append(item)
            elif kind is not int and kind is not float and kind is not bool and item is not None:
                size += _other_size(item, todo)


def _other_size(item: Any, todo: list[Any]) -> int:
    """Subclasses of the plain types count as their base; other objects (models,
    datetimes) at least a byte."""
    if isinstance(item, (str, bytes, bytearray, memoryview)):
        return len(item)
    if isinstance(item, (list, tuple, dict)):
        todo.append(item)
    elif isinstance(item, (set, frozenset)):
        todo.append(list(item))
    return 1


# -- While decoding ---------------------------------------------------------------------

SCAN_ABOVE: Final = 256 * 1024
"""Inputs up to this size hold too few items to matter (each item takes a byte at
least); larger ones are counted before the decoder builds anything."""

MAX_JSON_CONTAINERS: Final = 250_000
"""Most arrays and objects in one JSON message (each costs ~64 bytes once decoded)."""

# Bytes of argument after a CBOR head, by its additional information (28-30: malformed,
# 31: indefinite length, no argument).
_ARGUMENT_BYTES = (0,) * 24 + (1, 2, 4, 8, 0, 0, 0, 0)


def count_cbor_items(data: bytes, what: str) -> None:
    """Refuse (413 ``actor.value_too_large``) CBOR holding more than
    :data:`MAX_ELEMENTS` items, counting heads without building anything. An empty
    array is one byte on the wire and ~64 in memory: a 20 MB body of them would be 1.3 GB
    decoded. Stops counting at the budget; malformed input is left to the decoder."""
    if len(data) <= SCAN_ABOVE:
        return
    position, end, items = 0, len(data), 0
    while position < end:
        head = data[position]
        info = head & 0x1F
        size = _ARGUMENT_BYTES[info]
        major = head >> 5
        if size:
            argument = int.from_bytes(data[position + 1 : position + 1 + size], "big")
        else:
            argument = info if info < 24 else 0
        position += 1 + size
        if major == 2 or major == 3:
            position += argument  # a string's bytes hold no items
        items += 1
        if items > MAX_ELEMENTS:
            raise ValueTooLarge(
                f"Invalid {what}: more than {MAX_ELEMENTS} CBOR items.",
                metadata={"limit": MAX_ELEMENTS},
            )


def count_json_containers(text: str, what: str) -> None:
    """Refuse (413) JSON with more than :data:`MAX_JSON_CONTAINERS` arrays and objects,
    counted (brackets inside strings included: an upper bound) before parsing."""
    if len(text) <= SCAN_ABOVE:
        return
    if text.count("[") + text.count("{") > MAX_JSON_CONTAINERS:
        raise ValueTooLarge(
            f"Invalid {what}: more than {MAX_JSON_CONTAINERS} arrays and objects.",
            metadata={"limit": MAX_JSON_CONTAINERS},
        )
