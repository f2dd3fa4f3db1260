"""User values on the wire: RivetKit's tagged JSON, and CBOR as the official client reads it.

A *user value* is what actions take and return, events carry, queues hold and errors attach
as metadata. The wire value model is: ``None``, ``bool``, ``int`` (any size), ``float``,
``str``, ``bytes`` (also ``bytearray``/``memoryview``), ``list``/``tuple``, ``dict``,
``set``/``frozenset`` and timezone-aware ``datetime``. Anything else is refused when
encoding with :class:`~perdure.errors.InternalError` naming where the value sits.

**JSON** uses RivetKit's tagged two-element arrays for what JSON cannot say
(``rivetkit/src/common/encoding.ts``: ``encodeJsonCompatValue``/``reviveJsonCompatValue``):
``["$BigInt", "123"]`` (ints beyond ±(2**53 - 1)), ``["$Uint8Array", "<base64>"]``
(bytes), ``["$ArrayBuffer", "<base64>"]`` (decoded to bytes), ``["$Undefined", 0]``
(→ ``None``) and ``["$Set", [...]]``. A real two-element array whose first element is a
string starting with ``$`` is escaped with one more ``$``. Datetimes become ISO-8601
strings, as JavaScript's ``Date.toJSON`` does, and stay strings when read back.

**CBOR** values are native CBOR (byte strings, bignums, tag 258 sets, tag 1 datetimes),
with three accommodations for the official client (cbor-x) that reads and writes them:

- The client passes every decoded value through the same JSON-compat reviver, so the
  ``$`` escaping applies inside CBOR too, and the tags above are accepted when decoding.
- cbor-x turns a 64-bit CBOR integer into a ``BigInt`` and misreads negative integers
  with a 32-bit argument below -2**31, and it writes JavaScript numbers outside the
  32-bit range as float64. So ints with 2**32 <= |n| <= 2**53 - 1 (and negatives below
  -2**31) travel as float64, which JavaScript reads as a plain ``number`` (epoch
  milliseconds, for one); integral float64 values in exactly that band decode back to
  ``int``. Python ints round-trip exactly; the price is that a Python ``float`` with an
  integral value in that band also comes back as ``int``.
- CBOR ``undefined`` decodes to ``None``; tag 64 (cbor-x's ``Uint8Array``) to ``bytes``.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime as _dt
import io
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

import cbor2

from perdure.errors import InternalError, InvalidRequest, MessageError
from perdure.protocol._budget import count_cbor_items

__all__ = [
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "UnsendableValue",
    "decode_cbor",
    "decode_cbor_value",
    "encode_cbor_value",
    "from_json_value",
    "may_need_revival",
    "revive_cbor_value",
    "to_json_value",
]

MAX_SAFE_INTEGER = 2**53 - 1
"""Largest integer a JavaScript ``number`` holds exactly (``Number.MAX_SAFE_INTEGER``)."""

MAX_DEPTH = 400
"""Deepest nesting of containers accepted in a value (the same limit cbor2 applies)."""

# Integers cbor-x writes and reads as CBOR integers; outside this range (and inside the
# safe-integer range) JavaScript numbers travel as float64.
_CBOR_INT_MIN = -(2**31)
_CBOR_INT_MAX = 2**32 - 1

_BIGINT = "$BigInt"
_UINT8ARRAY = "$Uint8Array"
_ARRAYBUFFER = "$ArrayBuffer"
_UNDEFINED = "$Undefined"
_SET = "$Set"

_BIGINT_TEXT = re.compile(r"-?[0-9]+")
# Bignums whose decimal form Python can still write (its limit is 4,300 digits); the
# server's value domain has the same bound (perdure.protocol._budget.MAX_INT_BITS).
_MAX_BIGNUM_BYTES = 1780
_MAX_JSON_INT_BITS = _MAX_BIGNUM_BYTES * 8
_MAX_BIGINT_TEXT = 4301  # a sign and Python's digit limit (int() of more is refused)
_BYTES_TYPES = (bytes, bytearray, memoryview)
_SCALARS = frozenset({str, float, bool, type(None)})
# Types the revivers never need to look into (floats and CBOR `undefined` may need a fix).
_JSON_SETTLED = frozenset({str, int, float, bool, type(None)})
_CBOR_SETTLED = frozenset({str, int, bool, type(None), bytes})


class _Unencodable(Exception):
    """Raised inside the encoding walks; turned into InternalError with a path."""

    def __init__(self, reason: str, path: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.path = path


def _invalid(message: str) -> NoReturn:
    raise InvalidRequest(message)


def _describe(value: Any) -> str:
    return type(value).__name__


class UnsendableValue(MessageError, InternalError):
    """A value (stored earlier, or made by actor code) that an encoding cannot carry:
    ``message.value_not_sendable`` (400), saying where it sits, rather than a bare 500.
    Still an :class:`~perdure.errors.InternalError` for code that catches those."""

    group = "message"
    default_code = "value_not_sendable"


def _encode_failure(what: str, exc: _Unencodable | Exception) -> InternalError:
    if isinstance(exc, _Unencodable):
        where = f"{what}{exc.path}"
        return UnsendableValue(f"Cannot send {where}: {exc.reason}.")
    if isinstance(exc, ValueError) and "integer string conversion" in str(exc):
        return UnsendableValue(f"Cannot send {what}: it holds an integer of over 4300 digits.")
    if isinstance(exc, ValueError) and "JSON compliant" in str(exc):
        return UnsendableValue(f"Cannot send {what}: JSON has no Infinity or NaN.")
    return UnsendableValue(f"Cannot send {what}: {type(exc).__name__}.")


def _js_datetime(value: _dt.datetime) -> str:
    if value.tzinfo is None:
        raise _Unencodable("a naive datetime has no time zone (give it one)")
    text = value.astimezone(_dt.UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


# -- JSON: encoding ---------------------------------------------------------------------


def to_json_value(value: Any, what: str = "value") -> Any:
    """Return ``value`` as a JSON-ready structure using RivetKit's tags.

    The result shares unchanged parts with ``value`` (nothing is copied when no tag or
    escape is needed). Raises :class:`~perdure.errors.InternalError` for a value outside
    the wire value model.
    """
    try:
        return _tag(value, 0)
    except _Unencodable as exc:
        raise _encode_failure(what, exc) from None
    except RecursionError:
        raise InternalError(f"Cannot send {what}: it is nested too deeply.") from None


def _tag(value: Any, depth: int) -> Any:
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is float:
        if value - value != 0.0:  # inf - inf and nan - nan are nan
            raise _Unencodable(f"JSON has no {value} (only finite numbers)")
        return value
    if kind is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
        if value.bit_length() > _MAX_JSON_INT_BITS:
            raise _Unencodable("an integer of over 4,000 decimal digits cannot be sent as JSON")
        return [_BIGINT, str(value)]
    if depth >= MAX_DEPTH:
        raise _Unencodable(f"it is nested deeper than {MAX_DEPTH} levels")
    if kind is dict:
        return _tag_dict(value, depth)
    if kind is list or kind is tuple:
        return _tag_array(value, depth)
    return _tag_other(value, depth)


def _convert_dict(
    value: dict[Any, Any], depth: int, convert: Callable[[Any, int], Any]
) -> dict[Any, Any]:
    """Apply ``convert`` to the non-scalar items; copy the dict only if one changed."""
    changed: dict[Any, Any] | None = None
    for key, item in value.items():
        if type(item) in _SCALARS:
            continue
        try:
            converted = convert(item, depth + 1)
        except _Unencodable as exc:
            exc.path = f"[{key!r}]{exc.path}"
            raise
        if converted is not item:
            if changed is None:
                changed = dict(value)
            changed[key] = converted
    return value if changed is None else changed


def _convert_array(
    value: list[Any] | tuple[Any, ...], depth: int, convert: Callable[[Any, int], Any]
) -> Any:
    """Like :func:`_convert_dict` for arrays; escapes arrays that look like tags.

    The official client revives ``["$Tag", value]`` pairs in JSON and, since it runs the
    same reviver over CBOR values, in CBOR too: a user array of that shape gets an extra
    ``$`` so that it is read back as the array it is.
    """
    changed: list[Any] | None = None
    for index, item in enumerate(value):
        if type(item) in _SCALARS:
            continue
        try:
            converted = convert(item, depth + 1)
        except _Unencodable as exc:
            exc.path = f"[{index}]{exc.path}"
            raise
        if converted is not item:
            if changed is None:
                changed = list(value)
            changed[index] = converted
    result = value if changed is None else changed
    if len(result) == 2 and isinstance(result[0], str) and result[0].startswith("$"):
        return ["$" + result[0], result[1]]
    return result


def _tag_dict(value: dict[Any, Any], depth: int) -> dict[Any, Any]:
    return _convert_dict(value, depth, _tag)


def _tag_array(value: list[Any] | tuple[Any, ...], depth: int) -> Any:
    return _convert_array(value, depth, _tag)


def _tag_other(value: Any, depth: int) -> Any:
    if isinstance(value, _BYTES_TYPES):
        return [_UINT8ARRAY, base64.b64encode(value).decode("ascii")]
    if isinstance(value, (set, frozenset)):
        return [_SET, [_tag(item, depth + 1) for item in value]]
    if isinstance(value, _dt.datetime):
        return _js_datetime(value)
    # Subclasses of the plain types (IntEnum, StrEnum, OrderedDict …) behave as their base.
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return _tag(int(value), depth)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, Mapping):
        return _tag_dict(dict(value), depth)
    if isinstance(value, (list, tuple)):
        return _tag_array(list(value), depth)
    return _tag(_dump_model(value), depth)


def _dump_model(value: Any) -> Any:
    """A pydantic model's or a dataclass instance's plain JSON form (what the official
    client sees); ``_Unencodable`` for any other value."""
    pydantic = sys.modules.get("pydantic")  # no model exists before pydantic is loaded
    is_model = pydantic is not None and isinstance(value, pydantic.BaseModel)
    if not is_model and not (dataclasses.is_dataclass(value) and not isinstance(value, type)):
        raise _Unencodable(f"values of type {_describe(value)} cannot be sent")
    # Imported here: a client process loads pydantic only once it sends a model.
    from perdure.schemas import dump_model

    try:
        return dump_model(value)
    except Exception as exc:  # a field pydantic cannot serialise
        raise _Unencodable(f"{_describe(value)} cannot be converted ({exc})") from None


# -- JSON: decoding ---------------------------------------------------------------------


def from_json_value(value: Any, what: str = "value") -> Any:
    """Revive RivetKit's tags in a freshly parsed JSON value (mutated in place).

    Raises :class:`~perdure.errors.InvalidRequest` for an unknown or malformed tag.
    """
    kind = type(value)
    if kind is list or kind is dict:
        return _revive(value, 0, what, cbor=False)
    return value


def _revive(value: Any, depth: int, what: str, *, cbor: bool) -> Any:
    """Shared reviver of JSON and CBOR values; ``cbor`` adds the CBOR-only fixes."""
    kind = type(value)
    if kind is list:
        if depth >= MAX_DEPTH:
            _invalid(f"Invalid {what}: nested deeper than {MAX_DEPTH} levels.")
        if len(value) == 2 and type(value[0]) is str and value[0][:1] == "$":
            return _untag(value, depth, what, cbor=cbor)
        settled = _CBOR_SETTLED if cbor else _JSON_SETTLED
        for index, item in enumerate(value):
            if type(item) not in settled:
                value[index] = _revive(item, depth + 1, what, cbor=cbor)
        return value
    if kind is dict:
        if depth >= MAX_DEPTH:
            _invalid(f"Invalid {what}: nested deeper than {MAX_DEPTH} levels.")
        settled = _CBOR_SETTLED if cbor else _JSON_SETTLED
        for key, item in value.items():
            if type(item) not in settled:
                value[key] = _revive(item, depth + 1, what, cbor=cbor)
        return value
    if not cbor:
        return value
    if kind is float:
        return _cbor_float(value)
    if value is cbor2.undefined:
        return None
    if kind is set or kind is frozenset:
        revived = [_revive(item, depth + 1, what, cbor=True) for item in value]
        return kind(revived)
    return value


def _untag(value: list[Any], depth: int, what: str, *, cbor: bool) -> Any:
    tag: str = value[0]
    payload = value[1]
    if tag == _BIGINT:
        return _parse_bigint(payload, what)
    if tag in (_UINT8ARRAY, _ARRAYBUFFER):
        return _parse_base64(tag, payload, what)
    if tag == _UNDEFINED:
        return None
    if tag == _SET:
        return _parse_set(payload, depth, what, cbor=cbor)
    if tag.startswith("$$"):
        value[0] = tag[1:]
        value[1] = _revive(payload, depth + 1, what, cbor=cbor)
        return value
    _invalid(
        f"Invalid {what}: unknown tag {tag!r} (a two-element array whose first element "
        "starts with `$` is a tag; escape a literal one as `$$…`)."
    )


def _parse_bigint(payload: Any, what: str) -> int:
    if type(payload) is int:
        return payload
    text_ok = isinstance(payload, str) and len(payload) <= _MAX_BIGINT_TEXT
    if text_ok and _BIGINT_TEXT.fullmatch(payload):
        return int(payload)
    _invalid(f"Invalid {what}: `$BigInt` needs a decimal integer string, got {payload!r:.40}.")


def _parse_base64(tag: str, payload: Any, what: str) -> bytes:
    if isinstance(payload, str):
        try:
            return base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            pass
    _invalid(f"Invalid {what}: `{tag}` needs a base64 string, got {payload!r:.40}.")


def _parse_set(payload: Any, depth: int, what: str, *, cbor: bool) -> set[Any]:
    if type(payload) is not list:
        _invalid(f"Invalid {what}: `$Set` needs an array of items, got {_describe(payload)}.")
    items = _revive(payload, depth + 1, what, cbor=cbor)
    try:
        return set(items)
    except TypeError:
        _invalid(f"Invalid {what}: a `$Set` may only hold hashable items (no arrays or maps).")


# -- CBOR: encoding ---------------------------------------------------------------------


def encode_cbor_value(value: Any, what: str = "value") -> bytes:
    """Encode a user value as CBOR the official client reads back faithfully.

    Raises :class:`~perdure.errors.InternalError` for a value outside the wire value model.
    """
    try:
        prepared = _prepare(value, 0)
        return cbor2.dumps(prepared, datetime_as_timestamp=True)
    except _Unencodable as exc:
        raise _encode_failure(what, exc) from None
    except RecursionError:
        raise InternalError(f"Cannot send {what}: it is nested too deeply.") from None
    except (cbor2.CBOREncodeError, ValueError, TypeError) as exc:
        raise _encode_failure(what, exc) from None


def _prepare(value: Any, depth: int) -> Any:
    kind = type(value)
    if kind is str or kind is bool or kind is float or value is None or kind is bytes:
        return value
    if kind is int:
        if _CBOR_INT_MIN <= value <= _CBOR_INT_MAX:
            return value
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return float(value)  # exact: |value| < 2**53
        return value
    if depth >= MAX_DEPTH:
        raise _Unencodable(f"it is nested deeper than {MAX_DEPTH} levels")
    if kind is dict:
        return _prepare_dict(value, depth)
    if kind is list or kind is tuple:
        return _prepare_array(value, depth)
    return _prepare_other(value, depth)


def _prepare_dict(value: dict[Any, Any], depth: int) -> dict[Any, Any]:
    return _convert_dict(value, depth, _prepare)


def _prepare_array(value: list[Any] | tuple[Any, ...], depth: int) -> Any:
    return _convert_array(value, depth, _prepare)


def _prepare_other(value: Any, depth: int) -> Any:
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)  # cbor2 would write a memoryview as an array of ints
    if isinstance(value, (set, frozenset)):
        return frozenset(_prepare(item, depth + 1) for item in value)
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            raise _Unencodable("a naive datetime has no time zone (give it one)")
        return value
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return _prepare(int(value), depth)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, Mapping):
        return _prepare_dict(dict(value), depth)
    if isinstance(value, (list, tuple)):
        return _prepare_array(list(value), depth)
    return _prepare(_dump_model(value), depth)


# -- CBOR: decoding ---------------------------------------------------------------------


def _tag_hook(tag: cbor2.CBORTag, immutable: bool) -> Any:
    # cbor-x writes a Uint8Array that is not a Node Buffer as tag 64 around a byte string.
    if tag.tag == 64 and isinstance(tag.value, bytes):
        return tag.value
    raise _TagRefused(f"CBOR tag {tag.tag} is not accepted (see `perdure docs edge`)")


class _TagRefused(ValueError):
    """Raised by the tag decoders: its message is ours, safe to show."""


def _refuse_tag(tag: int) -> Callable[[Any, bool], NoReturn]:
    def refuse(_value: Any, _immutable: bool) -> NoReturn:
        raise _TagRefused(f"CBOR tag {tag} is not accepted (see `perdure docs edge`)")

    return refuse


def _bignum(sign: int) -> Callable[[Any, bool], int]:
    def decode(value: Any, _immutable: bool) -> int:
        if type(value) is not bytes:
            raise _TagRefused("a CBOR bignum must hold a byte string")
        if len(value) > _MAX_BIGNUM_BYTES:
            raise _TagRefused("a CBOR bignum of over 4,000 decimal digits is not accepted")
        number = int.from_bytes(value, "big")
        return number if sign > 0 else -1 - number

    return decode


def _text_datetime(value: Any, _immutable: bool) -> _dt.datetime:
    if type(value) is str and len(value) <= 64:
        try:
            parsed = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            if parsed.tzinfo is not None:
                return parsed
    raise _TagRefused("a CBOR tag 0 datetime must be an RFC 3339 string with a time zone")


def _epoch_datetime(value: Any, _immutable: bool) -> _dt.datetime:
    if type(value) in (int, float):
        try:
            return _dt.datetime.fromtimestamp(value, _dt.UTC)
        except (OverflowError, OSError, ValueError):
            pass
    raise _TagRefused("a CBOR tag 1 datetime must be a number of seconds within years 1 … 9999")


# What the official client (cbor-x's default encoder) writes: datetimes (0, 1), bignums
# (2, 3), Uint8Array (64, via the tag hook), sets (258) and the self-describe tag (55799,
# left to cbor2). Every other tag cbor2 knows is refused while decoding: string references
# (25, 256) and shared references (28, 29) expand a small input into a huge value (a 1 MB
# body into a 4 GB response); regular expressions compile untrusted patterns, MIME runs
# the email parser; decimals, fractions, UUIDs and IP addresses cannot be sent back in
# JSON. Unknown tags reach the tag hook and are refused there.
_REFUSED = (4, 5, 25, 28, 29, 30, 35, 36, 37, 52, 54, 100, 256, 260, 261, 1004)
_SEMANTIC_DECODERS: dict[int, Any] = {tag: _refuse_tag(tag) for tag in _REFUSED}
_SEMANTIC_DECODERS.update({0: _text_datetime, 1: _epoch_datetime, 2: _bignum(1), 3: _bignum(-1)})


def decode_cbor(data: bytes, what: str) -> Any:
    """Decode exactly one CBOR item filling ``data`` (no revival of user values).

    Tags outside the accepted set are refused while decoding, and a large input is
    counted first (:func:`~perdure.protocol._budget.count_cbor_items`)."""
    count_cbor_items(data, what)
    stream = io.BytesIO(data)
    decoder = cbor2.CBORDecoder(
        stream, tag_hook=_tag_hook, semantic_decoders=_SEMANTIC_DECODERS, max_depth=MAX_DEPTH
    )
    try:
        value = decoder.decode()
    except cbor2.CBORDecodeError as exc:
        _invalid(f"Malformed CBOR in {what}: {_decode_reason(exc)}.")
    except RecursionError:
        _invalid(f"Malformed CBOR in {what}: nested deeper than {MAX_DEPTH} levels.")
    except MemoryError:
        _invalid(f"Malformed CBOR in {what}: too large to decode.")
    except (ValueError, TypeError, OverflowError):
        _invalid(f"Malformed CBOR in {what}: not a valid CBOR item.")
    consumed = stream.tell()
    if consumed != len(data):
        _invalid(f"Malformed CBOR in {what}: {len(data) - consumed} trailing byte(s).")
    return value


def _decode_reason(exc: cbor2.CBORDecodeError) -> str:
    """Our own words for a decoding failure: a refused tag says why; cbor2's own message
    (about the CBOR structure) is kept, but never the text of a Python exception under it."""
    cause = exc.__cause__
    while cause is not None and not isinstance(cause, _TagRefused):
        cause = cause.__cause__
    if cause is not None:
        return str(cause)
    if exc.__cause__ is not None:
        return "a tagged item could not be decoded"
    return str(exc)


def may_need_revival(data: bytes) -> bool:
    """Whether CBOR ``data`` may hold something to revive: a ``$`` string, ``undefined``
    or a float64. A false positive only costs a walk; a false negative is impossible."""
    return b"$" in data or b"\xf7" in data or b"\xfb" in data


def revive_cbor_value(value: Any, what: str = "value") -> Any:
    """Apply the JSON-compat tags and the CBOR fixes to a freshly decoded value."""
    return _revive(value, 0, what, cbor=True)


def decode_cbor_value(data: bytes, what: str = "value") -> Any:
    """Decode a user value written by :func:`encode_cbor_value` or by the official client.

    Empty ``data`` decodes to ``None``, as in the original server. Raises
    :class:`~perdure.errors.InvalidRequest` for malformed CBOR or a malformed tag.
    """
    if not data:
        return None
    value = decode_cbor(data, what)
    if may_need_revival(data):
        return _revive(value, 0, what, cbor=True)
    return value


def _cbor_float(value: float) -> Any:
    # Undo the float64 transport of integers that JavaScript cannot send as CBOR ints.
    if (
        (value > _CBOR_INT_MAX or value < _CBOR_INT_MIN)
        and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER
        and value.is_integer()
    ):
        return int(value)
    return value
