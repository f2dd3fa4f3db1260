"""Idempotency keys and automatic retries of the network clients, against a real
``perdure serve`` (docs/idempotency.md, docs/clients.md "Retries").

An answer is lost on purpose by an HTTP transport that sends the request to the server,
reads its answer and then raises ``httpx.ReadError`` (what a connection broken after the
request went out looks like): the server applied the request, the client cannot know.
Every check reads the actor's state through another client, so a request applied twice
(a retry without its key) fails the test.
"""

from __future__ import annotations

import time

import httpx
import pytest

from perdure.client import ActorError, AsyncClient, Client, TransportError, create_client
from perdure.errors import IdempotencyError

from .conftest import ServerProcess

WAIT = 10.0


class LoseAnswers(httpx.AsyncBaseTransport):
    """Sends every request; loses the answer of the first ``lose`` requests to a path
    containing ``match``. ``keys``: the Idempotency-Key of each request to such a path."""

    def __init__(self, lose: int, match: str = "/gateway/") -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.lose = lose
        self.match = match
        self.keys: list[str | None] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        await response.aread()
        if self.match in request.url.path:
            self.keys.append(request.headers.get("idempotency-key"))
            if self.lose > 0:
                self.lose -= 1
                await response.aclose()
                raise httpx.ReadError("the connection broke before the answer", request=request)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class LoseAnswersSync(httpx.BaseTransport):
    """:class:`LoseAnswers` for the blocking client."""

    def __init__(self, lose: int) -> None:
        self.inner = httpx.HTTPTransport()
        self.lose = lose
        self.keys: list[str | None] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        response.read()
        if "/gateway/" in request.url.path:
            self.keys.append(request.headers.get("idempotency-key"))
            if self.lose > 0:
                self.lose -= 1
                response.close()
                raise httpx.ReadError("the connection broke before the answer", request=request)
        return response

    def close(self) -> None:
        self.inner.close()


class Unavailable(httpx.AsyncBaseTransport):
    """Answers the first ``times`` gateway requests with a 503 itself (the server never
    sees them): a perdure error body, or a proxy's page with ``page``."""

    def __init__(self, times: int, *, page: bool = False) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.times = times
        self.page = page
        self.refused = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if "/gateway/" in request.url.path and self.times > 0:
            self.times -= 1
            self.refused += 1
            if self.page:
                return httpx.Response(503, html="<h1>503 Service Unavailable</h1>")
            error = {"group": "actor", "code": "unavailable", "message": "retry shortly"}
            return httpx.Response(503, json=error)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _client(server: ServerProcess, transport: httpx.AsyncBaseTransport, **kw: int) -> AsyncClient:
    return AsyncClient(server.url, transport=transport, **kw)  # type: ignore[arg-type]


async def _count(server: ServerProcess, key: str) -> int:
    async with create_client(server.url) as plain:
        return int(await plain.counter.get_or_create(key).getCount())


async def _drain(server: ServerProcess, key: str) -> list[object]:
    async with create_client(server.url) as plain:
        return list(await plain.mailbox.get_or_create(key).drain())


async def test_a_lost_answer_to_an_action_is_retried_with_its_key(
    server: ServerProcess, unique: str
) -> None:
    lossy = LoseAnswers(2)
    async with _client(server, lossy) as client:
        keyed = client.counter.get_or_create(unique).with_idempotency_key(f"{unique}-inc")
        assert await keyed.increment(5) == 5
    assert await _count(server, unique) == 5  # applied once, answered
    assert lossy.keys == [f"{unique}-inc"] * 3  # the caller's key, sent three times


async def test_an_action_without_a_key_is_not_retried(server: ServerProcess, unique: str) -> None:
    """It may only have read: a generated key would make every read a write."""
    lossy = LoseAnswers(1)
    async with _client(server, lossy) as client:
        with pytest.raises(TransportError):
            await client.counter.get_or_create(unique).increment(5)
    assert lossy.keys == [None]
    assert await _count(server, unique) == 5  # it was applied; the caller was told it broke


async def test_a_lost_answer_to_a_send_is_retried_with_its_key(
    server: ServerProcess, unique: str
) -> None:
    lossy = LoseAnswers(1)
    async with _client(server, lossy) as client:
        assert await client.mailbox.get_or_create(unique).send("jobs", {"n": 1}) is None
    assert await _drain(server, unique) == [{"n": 1}]
    assert len(lossy.keys) == 2
    assert lossy.keys[0] == lossy.keys[1]


async def test_a_waiting_send_retried_waits_for_its_message(
    server: ServerProcess, unique: str
) -> None:
    lossy = LoseAnswers(1, match="/queue/")
    async with _client(server, lossy) as client:
        handle = client.mailbox.get_or_create(unique)
        # The first answer (timedOut: nobody completed it) is lost; the retry waits again
        # for the same message, which is still queued.
        result = await handle.send("jobs", 7, wait=True, timeout=0.3, idempotency_key="w-1")
        assert result.status == "timedOut"
    assert await _drain(server, unique) == [7]
    assert lossy.keys == ["w-1", "w-1"]


async def test_without_retries_a_lost_answer_is_a_transport_error(
    server: ServerProcess, unique: str
) -> None:
    lossy = LoseAnswers(1)
    async with _client(server, lossy, retries=0) as client:
        with pytest.raises(TransportError):
            await client.counter.get_or_create(unique).increment(5)
    assert lossy.keys == [None]  # no key: a request costs what it did
    assert await _count(server, unique) == 5  # it was applied; the caller cannot know


async def test_retries_are_bounded(server: ServerProcess, unique: str) -> None:
    lossy = LoseAnswers(10)
    started = time.monotonic()
    async with _client(server, lossy, retries=2) as client:
        with pytest.raises(TransportError):
            await client.mailbox.get_or_create(unique).send("jobs", 1)
    assert len(lossy.keys) == 3
    assert time.monotonic() - started < WAIT
    assert await _drain(server, unique) == [1]  # three tries, one key: applied once


@pytest.mark.parametrize("page", [False, True])
async def test_a_503_is_retried(server: ServerProcess, unique: str, page: bool) -> None:
    busy = Unavailable(2, page=page)
    async with _client(server, busy) as client:
        counter = client.counter.get_or_create(unique).with_idempotency_key(f"{unique}-503")
        assert await counter.increment(3) == 3
    assert busy.refused == 2


async def test_a_503_after_the_last_retry_is_raised(server: ServerProcess, unique: str) -> None:
    async with _client(server, Unavailable(5), retries=1) as client:
        counter = client.counter.get_or_create(unique).with_idempotency_key(f"{unique}-503")
        with pytest.raises(ActorError) as info:
            await counter.increment(3)
    assert (info.value.code, info.value.http_status) == ("unavailable", 503)


async def test_an_error_answer_is_not_retried(server: ServerProcess, unique: str) -> None:
    lossy = LoseAnswers(0)
    async with _client(server, lossy) as client:
        with pytest.raises(ActorError) as info:
            await client.counter.get_or_create(unique).fail("nope")
    assert info.value.code == "nope"
    assert len(lossy.keys) == 1


async def test_a_key_given_by_the_caller(server: ServerProcess, unique: str) -> None:
    async with create_client(server.url) as client:
        handle = client.counter.get_or_create(unique)
        keyed = handle.with_idempotency_key(f"{unique}-a")
        assert await keyed.increment(2) == 2
        assert await keyed.increment(2) == 2  # the first answer; not applied again
        with pytest.raises(ActorError) as info:
            await keyed.increment(3)  # the same key for other arguments
        assert (info.value.code, info.value.http_status) == ("key_reused", 409)
        mailbox = client.mailbox.get_or_create(unique)
        for _ in range(3):
            await mailbox.send("jobs", "once", idempotency_key=f"{unique}-s")
        with pytest.raises(IdempotencyError):
            await mailbox.send("jobs", "x", idempotency_key="")
        with pytest.raises(IdempotencyError):
            handle.with_idempotency_key("k" * 300)
    assert await _count(server, unique) == 2
    assert await _drain(server, unique) == ["once"]


def test_the_blocking_client_retries_with_its_key(server: ServerProcess, unique: str) -> None:
    lossy = LoseAnswersSync(1)
    with Client(server.url, transport=lossy) as client:
        counter = client.counter.get_or_create(unique).with_idempotency_key(f"{unique}-c")
        assert counter.increment(4) == 4
        mailbox = client.mailbox.get_or_create(unique)
        mailbox.send("jobs", "a")
        mailbox.with_idempotency_key(f"{unique}-k").send("jobs", "b")
        mailbox.send("jobs", "b", idempotency_key=f"{unique}-k")
    assert len(lossy.keys) == 5
    assert lossy.keys[0] == lossy.keys[1] == f"{unique}-c"
    assert lossy.keys[-2:] == [f"{unique}-k"] * 2
    with Client(server.url) as plain:
        assert plain.counter.get_or_create(unique).getCount() == 4
        assert plain.mailbox.get_or_create(unique).drain() == ["a", "b"]
