"""Turning exceptions into wire errors, and the actor headers every gateway response carries.

A :class:`~perdure.errors.PerdureError` that is ``public`` keeps its group, code, message
and metadata (a :class:`~perdure.errors.UserError` raised by actor code included). Any
other exception becomes ``actor.internal_error`` with a generic message; its details go
to the log only.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

from perdure.errors import InternalError, PerdureError, status_for
from perdure.keys import serialize_key
from perdure.protocol.codec import Encoding, content_type, encode_http
from perdure.protocol.messages import ActorInfo, HttpResponseError
from perdure.server.edge.asgi import Headers, Send, send_bytes

if TYPE_CHECKING:
    from perdure.runtime import ActorIdentity

__all__ = [
    "actor_headers",
    "actor_info",
    "error_body",
    "header_text",
    "public_error",
    "send_error",
]

_log = logging.getLogger("perdure.server")
_PRINTABLE = frozenset(chr(c) for c in range(0x20, 0x7F))


def public_error(exc: BaseException) -> PerdureError:
    """The error a remote caller may see; logs anything unexpected in full."""
    if isinstance(exc, PerdureError) and exc.public:
        return exc
    _log.error("unexpected error while serving a request", exc_info=exc)
    return InternalError()


def header_text(text: str) -> bytes:
    """A header value for ``text``: verbatim when printable ASCII, else percent-encoded UTF-8.

    HTTP header values cannot carry arbitrary Unicode or control characters, and actor
    keys may contain both.
    """
    if all(char in _PRINTABLE for char in text):
        return text.encode("ascii")
    return "".join(
        char if char in _PRINTABLE and char != "%" else _percent(char) for char in text
    ).encode("ascii")


def _percent(char: str) -> str:
    return "".join(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))


def actor_headers(instance: ActorIdentity | None) -> Headers:
    """``x-rivet-actor``, ``x-rivet-actor-generation`` and ``x-rivet-actor-key`` (none
    when the request did not reach an actor)."""
    if instance is None:
        return []
    return [
        (b"x-rivet-actor", instance.actor_id.encode("ascii", "replace")),
        (b"x-rivet-actor-generation", str(instance.generation).encode()),
        (b"x-rivet-actor-key", header_text(serialize_key(instance.key))),
    ]


def actor_info(instance: ActorIdentity | None) -> ActorInfo | None:
    """The ``actor`` field of an error body, when the request reached an actor."""
    if instance is None:
        return None
    return ActorInfo(instance.actor_id, instance.generation, serialize_key(instance.key))


def error_body(error: PerdureError, enc: Encoding, actor: ActorInfo | None) -> bytes:
    """An encoded error body; drops metadata the encoding cannot carry rather than fail."""
    body = HttpResponseError(error.group, error.code, error.message, error.metadata, actor)
    try:
        return encode_http(body, enc)
    except Exception:
        _log.warning("error metadata of %s cannot be encoded; sent without it", error.identifier)
        return encode_http(dataclasses.replace(body, metadata=None), enc)


async def send_error(
    send: Send, exc: BaseException, enc: Encoding, instance: ActorIdentity | None = None
) -> None:
    """Answer a failed request: error body in the request's encoding, ``x-rivet-error``."""
    error = public_error(exc)
    extra: Headers = [(b"x-rivet-error", header_text(error.identifier))]
    retry_after = getattr(error, "retry_after", None)  # store.unavailable, store.full
    if retry_after is not None:
        extra.append((b"retry-after", str(retry_after).encode()))
    extra.extend(actor_headers(instance))
    body = error_body(error, enc, actor_info(instance))
    await send_bytes(send, status_for(error), body, content_type(enc).encode(), extra)
