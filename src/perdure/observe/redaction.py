"""Credentials never reach a log line: :class:`RedactingFormatter`.

A client may carry its token in a URL (``rvt-token=…``, ``/gateway/{id}@TOKEN/…``) or a
WebSocket subprotocol (``rivet_token.TOKEN``), and uvicorn's access and WebSocket lines
(``--log-level debug``) print the whole request target; an exception's text may quote a
URL or a header. So every formatted line is masked last, whatever logger wrote it and
at whatever level: the credentials' known shapes (the forms of
:mod:`perdure.server.edge.client_access`, ``Authorization: Bearer``, the token and
cluster-secret headers) and, exactly, the secrets the process was configured with.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Final

__all__ = ["MASK", "RedactingFormatter", "redact"]

MASK: Final = "[redacted]"

# Each pattern keeps its first group (the name of the credential) and masks the rest.
_SHAPES: Final = re.compile(
    r"(rvt-token=)[^&\s\"'#]+"  # the query parameter
    r"|(/gateway/[^/@\s\"'?]*@)[^/\s\"'?#]+"  # an actor id with its token
    r"|(rivet_token\.)[^,\s\"']+"  # the WebSocket subprotocol
    r"|([Bb]earer\s+)[^\s,\"']+"  # Authorization: Bearer TOKEN
    r"|((?:x-rivet-token|x-perdure-cluster-secret)[\"']?\s*[:=,]\s*[\"']?)[^\s,\"']+",
    re.IGNORECASE,
)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every credential of a known shape, and each of ``secrets``, masked."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    if not _may_hold_a_credential(text):
        return text
    return _SHAPES.sub(_keep_the_name, text)


def _may_hold_a_credential(text: str) -> bool:
    # The patterns need one of these; most lines have none, and skip the regex.
    lowered = text.lower()
    return any(mark in lowered for mark in ("token", "@", "bearer", "secret"))


def _keep_the_name(match: re.Match[str]) -> str:
    name = next(group for group in match.groups() if group is not None)
    return name + MASK


class RedactingFormatter(logging.Formatter):
    """Formats with ``inner`` (message, exception and stack alike), then masks
    credentials (:func:`redact`) and each of ``secrets`` in the line."""

    def __init__(self, inner: logging.Formatter, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self.inner = inner
        # Longest first, so that a secret containing another is masked whole.
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def format(self, record: logging.LogRecord) -> str:
        """The inner formatter's line, redacted."""
        return redact(self.inner.format(record), self.secrets)
