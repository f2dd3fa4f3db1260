"""SQLite with a full disk (issue 16, outages): writes fail cleanly and the store recovers.

The full disk is simulated with a cap on the database file (``PRAGMA max_page_count``,
set through ``SQLiteStore(max_size=…)`` / ``set_max_size`` or ``?max_size=`` in the
URL): SQLite then answers a write that needs another page with ``SQLITE_FULL``, exactly
as on a full file system, and this works in CI without mounting anything. A write that
does not fit fails with 507 ``store.full``; nothing of it is applied, every acknowledged
write stays, and writes succeed again once there is room (the cap raised). The same in
process, on the runtime and the store: tests/store/sqlite/test_store_full.py.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.support.server import ServerProcess

BIG = 300_000  # entries too many for the capped file (each is a CBOR integer)


def test_the_server_answers_507_store_full_with_retry_after(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    db = data / "capped.db"
    # 200 KB: room for the schema and a few small actors, not for a big state.
    capped = ServerProcess(
        "tests.support.apps.outage:registry",
        data,
        extra_args=["--store", f"sqlite:///{db}?max_size=204800"],
    ).start()
    url = f"{capped.url}/gateway/ledger/action/add?rvt-namespace=default&rvt-method=getOrCreate"
    try:
        with httpx.Client(timeout=30) as http:
            assert http.post(f"{url}&rvt-key=a", json={"args": [1]}).status_code == 200
            response = http.post(f"{url}&rvt-key=a", json={"args": [list(range(BIG))]})
            assert response.status_code == 507, response.text
            assert response.json()["code"] == "full"
            assert response.headers["x-rivet-error"] == "store.full"
            assert int(response.headers["retry-after"]) >= 1
            assert http.post(f"{url}&rvt-key=a", json={"args": [2]}).status_code == 200
    finally:
        assert capped.terminate() == 0
    # Space returns (the cap raised): the acknowledged writes are there, new ones fit.
    roomy = ServerProcess(
        "tests.support.apps.outage:registry",
        data,
        port=capped.port,
        extra_args=["--store", f"sqlite:///{db}"],
    ).start()
    try:
        with httpx.Client(timeout=30) as http:
            response = http.post(f"{url}&rvt-key=a", json={"args": [list(range(BIG))]})
            assert response.status_code == 200, response.text
            entries = http.post(
                url.replace("action/add", "action/entries") + "&rvt-key=a", json={"args": []}
            )
            assert entries.json()["output"][:2] == [1, 2]
            assert len(entries.json()["output"]) == 3
    finally:
        roomy.kill()
