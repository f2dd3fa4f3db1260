"""Request bodies must say what they are: JSON, CBOR or BARE.

A browser sends a form post or a ``no-cors`` fetch to any address without asking first,
and such a request can only carry a "simple" content type (``text/plain``, a form) or
none at all. The origin check (:mod:`perdure.server.edge.cors`) already refuses a page
of another site; this is the second lock on the same door, and it also refuses a body
that a client mislabels. The routes that decode a body in perdure's encodings (gateway
actions and queue sends, ``/actors`` creation, the admin API) accept only
:data:`ACCEPTED`: what the official RivetKit client sends (``application/json`` for
JSON, ``application/octet-stream`` for CBOR and BARE), what perdure's clients send, and
``application/cbor``. The ``x-rivet-encoding`` header still says how the body is
decoded. A request with another type, or a body with no type, is refused with 415
``request.unsupported_media_type`` before anything is read.

Raw handlers (``on_request``) are the actor's own: it reads whatever its body is.
"""

from __future__ import annotations

from typing import Final

from perdure.errors import RequestRefused
from perdure.server.edge.asgi import Scope, header_value

__all__ = ["ACCEPTED", "check_body_type", "decodes_body"]

ACCEPTED: Final = frozenset({"application/json", "application/cbor", "application/octet-stream"})
"""The media types of the bodies perdure decodes (parameters such as ``charset`` aside)."""

_WITH_BODY: Final = frozenset({"POST", "PUT", "PATCH"})
_DECODING_ROUTES: Final = frozenset({"action", "queue"})


def decodes_body(path: str) -> bool:
    """True for the routes whose request body perdure decodes (see the module docstring)."""
    if path.startswith("/gateway/"):
        parts = path.split("/", 5)  # ["", "gateway", target, route, name...]
        return len(parts) >= 5 and parts[3] in _DECODING_ROUTES
    return path == "/actors" or path.startswith("/admin/")


def check_body_type(scope: Scope) -> None:
    """Raise 415 ``request.unsupported_media_type`` if ``scope`` carries a body whose
    content type perdure does not decode (the caller checks :func:`decodes_body`)."""
    if scope["method"] not in _WITH_BODY or not _has_body(scope):
        return
    given = header_value(scope, b"content-type")
    media = (given or "").partition(";")[0].strip().lower()
    if media in ACCEPTED:
        return
    what = f"`{given}`" if given else "no content type"
    raise RequestRefused(
        f"This route reads bodies of type {', '.join(sorted(ACCEPTED))}; the request "
        f"has {what[:120]}. Set Content-Type (x-rivet-encoding says how it is decoded).",
        code="unsupported_media_type",
        status=415,
        metadata={"accepted": sorted(ACCEPTED)},
    )


def _has_body(scope: Scope) -> bool:
    length = header_value(scope, b"content-length")
    if length is not None:
        return length.strip() not in ("0", "")
    return header_value(scope, b"transfer-encoding") is not None
