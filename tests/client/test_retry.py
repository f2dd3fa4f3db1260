"""The no-I/O part of retries: which failures are retried, the pauses, the keys a request
carries and which requests may be retried at all (docs/clients.md, "Retries")."""

from __future__ import annotations

import pytest

from perdure.client import ActorError, AsyncClient, ConnectionDisposed, TransportError
from perdure.client._base import (
    ClientConfig,
    HttpReply,
    action_call,
    error_from_reply,
    query_target,
    queue_call,
)
from perdure.client._retry import (
    DEFAULT_RETRIES,
    LONGEST_PAUSE,
    Retrying,
    outcome_unknown,
    request_key,
)
from perdure.client._shared import HandleBase
from perdure.client.aio import AsyncActorHandle
from perdure.errors import IdempotencyError
from perdure.handles import WORKFLOW_CANCEL_ACTION, WORKFLOW_RESULT_ACTION

CONFIG = ClientConfig.build("http://127.0.0.1:6499")
TARGET = query_target("counter", ["k"], "getOrCreate")


def _error(status: int, code: str = "unavailable") -> ActorError:
    return ActorError("actor", code, "…", http_status=status)


@pytest.mark.parametrize(
    ("error", "unknown"),
    [
        (TransportError("refused", retryable=True), True),
        (TransportError("malformed reply"), False),
        (ConnectionDisposed("closed"), False),
        (_error(503), True),
        (ActorError("store", "unavailable", "…", http_status=503), True),
        (_error(503, "owner_no_answer"), True),
        (_error(409, "key_reused"), False),
        (_error(500, "internal_error"), False),
        (_error(400, "invalid_request"), False),
        (ActorError("user", "failed", "…"), False),
        (ValueError("not ours"), False),
    ],
)
def test_which_failures_leave_the_outcome_unknown(error: BaseException, unknown: bool) -> None:
    assert outcome_unknown(error) is unknown


@pytest.mark.parametrize("status", [502, 503, 504])
def test_a_proxys_failure_page_is_retryable(status: int) -> None:
    error = error_from_reply(HttpReply(status, {"content-type": "text/html"}, b"<html>"), "json")
    assert isinstance(error, TransportError)
    assert outcome_unknown(error)


def test_another_non_protocol_page_is_final() -> None:
    error = error_from_reply(HttpReply(500, {"content-type": "text/html"}, b"<html>"), "json")
    assert isinstance(error, TransportError)
    assert not outcome_unknown(error)


def test_pauses_double_with_jitter_up_to_a_bound_and_run_out() -> None:
    retrying = Retrying(6)
    pauses = [retrying.pause(_error(503)) for _ in range(6)]
    assert retrying.pause(_error(503)) is None  # six retries, no seventh
    assert all(pause is not None and 0 < pause <= LONGEST_PAUSE for pause in pauses)
    assert 0.125 <= pauses[0] <= 0.25
    assert 1.0 <= pauses[-1] <= LONGEST_PAUSE


def test_an_answer_is_never_retried() -> None:
    retrying = Retrying(3)
    assert retrying.pause(_error(409, "key_reused")) is None
    assert Retrying(0).pause(_error(503)) is None


def test_request_keys() -> None:
    assert request_key(3, "order-1") == "order-1"
    assert request_key(0, "order-1") == "order-1"  # the caller's key goes out, retries or not
    assert request_key(0, None) is None  # retrying off: a request costs what it did
    first, second = request_key(3, None), request_key(3, None)
    assert first
    assert second
    assert first != second
    assert first.startswith("perdure-")
    with pytest.raises(IdempotencyError):
        request_key(3, "")
    with pytest.raises(IdempotencyError):
        request_key(3, "é")
    with pytest.raises(IdempotencyError):
        request_key(3, "k" * 257)


@pytest.mark.parametrize("retries", [-1, 1.5, True, "3"])
def test_retries_must_be_a_count(retries: object) -> None:
    with pytest.raises(ValueError, match="retries"):
        ClientConfig.build("http://127.0.0.1:6499", retries=retries)  # type: ignore[arg-type]


def test_the_default_is_three() -> None:
    assert CONFIG.retries == DEFAULT_RETRIES == 3


def test_keyed_calls_carry_the_header_and_may_be_retried() -> None:
    target = TARGET
    action = action_call(CONFIG, target, "increment", [1], None).keyed("k1")
    send = queue_call(CONFIG, target, "jobs", 1, None, wait=False, timeout=None).keyed("k2")
    assert action.headers["idempotency-key"] == "k1"
    assert action.retryable
    assert send.headers["idempotency-key"] == "k2"
    assert send.retryable
    plain = action_call(CONFIG, target, "increment", [1], None)
    assert "idempotency-key" not in plain.headers
    assert not plain.retryable
    read = action_call(CONFIG, target, "$workflow", [], None, read=True)
    assert "idempotency-key" not in read.headers
    assert read.retryable


async def test_handles_choose_the_key() -> None:
    async with AsyncClient("http://127.0.0.1:6499") as client:
        handle = client.counter.get_or_create("k")
        # An action without the caller's key carries none (it may only read) and is not
        # retried; a send gets a fresh key each time.
        assert "idempotency-key" not in handle._action_call("increment", (1,)).headers
        assert not handle._action_call("increment", (1,)).retryable
        one, two = handle._key(), handle._key()
        assert one is not None
        assert two is not None
        assert one != two
        keyed = handle.with_idempotency_key("order-7")
        assert isinstance(keyed, AsyncActorHandle)
        assert keyed is not handle
        assert keyed._action_call("increment", (1,)).headers["idempotency-key"] == "order-7"
        call = handle._queue_call("jobs", 1, wait=False, timeout=None)
        assert call.keyed(handle._key("mine")).headers["idempotency-key"] == "mine"
        # Reads are retried without a key; the workflow controls carry one.
        assert "idempotency-key" not in handle._status_call().headers
        result = handle._workflow_call(WORKFLOW_RESULT_ACTION, [1.0], 1.0)
        assert "idempotency-key" not in result.headers
        assert result.retryable
        assert "idempotency-key" in handle._workflow_call(WORKFLOW_CANCEL_ACTION, [None]).headers
        with pytest.raises(IdempotencyError):
            handle.with_idempotency_key("")
    async with AsyncClient("http://127.0.0.1:6499", retries=0) as client:
        handle = client.counter.get_or_create("k")
        assert "idempotency-key" not in handle._action_call("increment", (1,)).headers
        keyed: HandleBase[AsyncClient] = handle.with_idempotency_key("order-8")
        assert keyed._action_call("increment", (1,)).headers["idempotency-key"] == "order-8"
