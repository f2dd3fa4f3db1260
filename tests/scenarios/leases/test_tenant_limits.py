"""The newcomer's per-tenant limit over a real ``perdure serve`` (SQLite), with kill -9.

``farm`` (tests/support/apps/tenant_limits.py) declares its queue with
``queue(concurrency=2, rate=(10, 1.0), key="tenant")`` and runs 8 receivers at once, each
job taking ``WORK_S`` (so 2 at a time could start 20 a second: the rate binds too).
Three tenants send 20, 8 and 4 jobs; the server is killed with
``kill -9`` while jobs are in progress and restarted. The app logs every delivery's
start (once received) and end (work done, just before ``complete()``) to a file, one
``write`` each, from which:

- per tenant, never more than 2 deliveries in progress at once, counting a delivery cut
  short by the kill as in progress until its lease ended (what the limit promises: the
  restarted server must not start more of that tenant's jobs while those leases hold);
- per tenant, never more than 10 starts within a second;
- both limits were reached (8 receivers would otherwise take more), other tenants
  went on while one was at its limit, and every job was done and completed (the queue
  is empty): nothing lost.

The log's times are taken just after each start (its lease is durable first), so a
window is checked with a 50 ms margin for that lag.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from perdure.client import Client
from perdure.errors import PerdureError
from tests.support.apps.tenant_limits import CONCURRENCY, RATE
from tests.support.scrape import Samples
from tests.support.server import ServerProcess

pytestmark = pytest.mark.timeout(120)

REGISTRY = "tests.support.apps.tenant_limits:registry"
LEASE = 1.5
WORK_S = 0.1
TENANTS = {"acme": 20, "globex": 8, "initech": 4}
MARGIN_MS = 50


def test_two_in_progress_and_ten_a_second_per_tenant_across_a_kill(tmp_path: Path) -> None:
    log = tmp_path / "deliveries.log"
    env = {
        "PERDURE_LEASE_S": str(LEASE),
        "PERDURE_WORK_S": str(WORK_S),
        "PERDURE_LIMITS_LOG": str(log),
    }
    server = ServerProcess(REGISTRY, tmp_path / "data", env=env).start()
    try:
        with Client(server.url) as client:
            farm = client.farm.get_or_create("f")
            for index in range(max(TENANTS.values())):
                for tenant, count in TENANTS.items():
                    if index < count:
                        farm.send("jobs", {"tenant": tenant, "n": index})
            actor_id = farm.resolve()
            with pytest.raises(PerdureError) as refused:  # a job without its tenant
                farm.send("jobs", {"n": 0})
            assert refused.value.code == "invalid_limit_key"
            _wait_for(lambda: len(_in_progress(log)) >= 4, "jobs in progress")
            seen = _observed(server.url, actor_id)
            _wait_for(lambda: len(_in_progress(log)) >= 2, "jobs in progress again")
        server.kill()  # kill -9 with jobs in progress
        killed_at = int(time.time() * 1000)
        server.restart()
        with Client(server.url) as client:
            farm = client.farm.get_or_create("f")
            _wait_for(lambda: farm.size() == 0, "every job completed", timeout=30)
    finally:
        server.kill()
    starts, ends = _read(log)
    cut = {delivery for delivery in starts if delivery not in ends}
    assert cut, "the kill landed between jobs: nothing was in progress"
    assert all(starts[d] <= killed_at for d in cut)
    _check_limits(starts, ends, cut)
    # Nothing lost: every job of every tenant ended once in a delivery.
    done = {(tenant, message_id) for tenant, message_id, _ in ends}
    assert len(done) == sum(TENANTS.values())
    assert {tenant for tenant, _ in done} == set(TENANTS)
    in_progress, waiting, view = seen
    assert 1 <= in_progress <= CONCURRENCY * len(TENANTS)
    assert waiting >= 1  # acme's other jobs were passed over, not lost
    assert view["concurrency"] == CONCURRENCY
    assert all(key["in_progress"] <= CONCURRENCY for key in view["keys"])


Delivery = tuple[str, int, int]  # tenant, message id, attempt


def _read(log: Path) -> tuple[dict[Delivery, int], dict[Delivery, int]]:
    starts: dict[Delivery, int] = {}
    ends: dict[Delivery, int] = {}
    for line in log.read_text().splitlines():
        kind, tenant, message_id, attempt, at = line.split()
        (starts if kind == "start" else ends)[tenant, int(message_id), int(attempt)] = int(at)
    return starts, ends


def _in_progress(log: Path) -> set[Delivery]:
    if not log.exists():
        return set()
    starts, ends = _read(log)
    return set(starts) - set(ends)


def _check_limits(
    starts: dict[Delivery, int], ends: dict[Delivery, int], cut: set[Delivery]
) -> None:
    by_tenant: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for delivery, start in starts.items():
        # A delivery the kill cut short holds its slot until its lease ends.
        end = start + int(LEASE * 1000) - MARGIN_MS if delivery in cut else ends[delivery]
        by_tenant[delivery[0]].append((start, end))
    most_at_once: dict[str, int] = {}
    most_in_a_second: dict[str, int] = {}
    for tenant, spans in by_tenant.items():
        most_at_once[tenant] = _most_overlapping(spans)
        times = sorted(start for start, _ in spans)
        window = int(RATE[1] * 1000) - MARGIN_MS
        most_in_a_second[tenant] = max(
            sum(1 for t in times if first <= t < first + window) for first in times
        )
    assert max(most_at_once.values()) == CONCURRENCY, most_at_once  # reached, never passed
    assert max(most_in_a_second.values()) <= RATE[0], most_in_a_second
    assert most_in_a_second["acme"] >= RATE[0] - 1, most_in_a_second  # the rate held it back


def _most_overlapping(spans: list[tuple[int, int]]) -> int:
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    most = current = 0
    for _, change in events:  # an end sorts before a start at the same millisecond
        current += change
        most = max(most, current)
    return most


def _observed(url: str, actor_id: str) -> tuple[int, int, dict[str, object]]:
    """The limits as /metrics and the admin API show them, mid-run."""
    with httpx.Client(timeout=10) as http:
        samples = Samples(http.get(f"{url}/metrics").text)
        view = http.get(f"{url}/admin/actors/{actor_id}").json()["limits"]["jobs"]
    in_progress = samples.get("perdure_queue_in_progress", actor="farm", queue="jobs")
    waiting = samples.get("perdure_queue_waiting_for_slot", actor="farm", queue="jobs")
    return int(in_progress), int(waiting), view


def _wait_for(condition: Callable[[], object], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")
