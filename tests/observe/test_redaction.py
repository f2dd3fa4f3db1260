"""The masking of credentials in log lines (perdure.observe.redaction); over a real
server: tests/scenarios/observe/test_log_redaction.py."""

from __future__ import annotations

import logging
import sys

import pytest

from perdure.observe.redaction import MASK, RedactingFormatter, redact


@pytest.mark.parametrize(
    ("line", "masked"),
    [
        (
            '1.2.3.4:5 - "POST /gateway/c/action/x?rvt-key=a&rvt-token=abc123 HTTP/1.1" 200',
            f'1.2.3.4:5 - "POST /gateway/c/action/x?rvt-key=a&rvt-token={MASK} HTTP/1.1" 200',
        ),
        ('"WebSocket /gateway/0abc@tok.en-1/connect"', f'"WebSocket /gateway/0abc@{MASK}/connect"'),
        (
            "rivet, rivet_token.s3cr3t, rivet_encoding.json",
            f"rivet, rivet_token.{MASK}, rivet_encoding.json",
        ),
        ("Authorization: Bearer abc.def", f"Authorization: Bearer {MASK}"),
        ("{'x-rivet-token': 'zz'}", f"{{'x-rivet-token': '{MASK}'}}"),
        ("x-perdure-cluster-secret: qq", f"x-perdure-cluster-secret: {MASK}"),
        # Nothing that only looks alike.
        ("mail user@example.com about 5 tokens", "mail user@example.com about 5 tokens"),
        ("runtime started: 3 actor type(s)", "runtime started: 3 actor type(s)"),
    ],
)
def test_known_shapes_are_masked(line: str, masked: str) -> None:
    assert redact(line) == masked


def test_configured_secrets_are_masked_wherever_they_appear() -> None:
    assert redact("opaque-value and opaque-value-longer", ["opaque-value"]) == (
        f"{MASK} and {MASK}-longer"
    )
    formatter = RedactingFormatter(logging.Formatter("%(message)s"), ["abc", "abcdef"])
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "saw %s", ("abcdef!",), None)
    assert formatter.format(record) == f"saw {MASK}!"


def test_an_exception_text_is_masked() -> None:
    formatter = RedactingFormatter(logging.Formatter("%(message)s"))
    try:
        raise ValueError("GET /gateway/a/connect?rvt-token=hidden failed")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "boom", (), None)
        record.exc_info = sys.exc_info()
    text = formatter.format(record)
    assert "hidden" not in text
    assert f"rvt-token={MASK}" in text
