"""rivetkit's actor-db-raw and actor-db driver tests, in process: their fixture actor
``dbActorRaw`` written with perdure's ``c.db`` (tests/support/apps/db_raw.py) does what
those tests expect: tables made by ``on_migrate`` at start, CRUD, multi-statement SQL,
data kept across instances and sleeps and apart between actors, text with a NUL byte,
transactions (commit, rollback, SQLite's own ROLLBACK conflict policy, FIFO without
interleaving, ordinary SQL parked behind one, a completed handle refused), manual
``BEGIN``/``COMMIT``, payloads across page boundaries and large ones, shrink and
regrow, repeated updates, and an intact database after a mixed workload and a sleep.
On the memory, SQLite and PostgreSQL stores. Where perdure answers differently (the
deadlock diagnostics: refused at once rather than after a timeout), the test says so.
"""

from __future__ import annotations

import asyncio
from typing import Any

from perdure import setup
from tests.support.apps.db_raw import db_actor_raw
from tests.support.runtimes import RuntimeFactory

registry = setup(use={"dbActorRaw": db_actor_raw})

PAGE = 4096  # rivetkit's CHUNK_SIZE: its boundaries, whatever perdure's page size
CHUNK_BOUNDARY_SIZES = [n * PAGE + d for n in (1, 2, 4) for d in (-1, 0, 1)]


async def _client(make_runtime: RuntimeFactory) -> Any:
    runtime = await make_runtime(registry)
    return runtime.client().dbActorRaw


async def _after_sleep(handle: Any) -> None:
    await handle.triggerSleep()
    await asyncio.sleep(0.3)  # sleep_timeout 0.1 s: it has stopped by then


# ------------------------------------------------------------------ actor-db-raw.test


async def test_creates_and_queries_database_tables(make_runtime: RuntimeFactory) -> None:
    actor = (await _client(make_runtime)).get_or_create([])
    await actor.insertValue("Alice")
    await actor.insertValue("Bob")
    values = await actor.getValues()
    assert [row["value"] for row in values] == ["Alice", "Bob"]


async def test_round_trips_text_containing_an_embedded_nul_byte(
    make_runtime: RuntimeFactory,
) -> None:
    actor = (await _client(make_runtime)).get_or_create(["nul-text"])
    row = await actor.insertValueAndReadBack("a\0b")
    assert row["value"] == "a\0b"
    assert row["hex_value"] == "610062"
    assert row["sqlite_length"] == 1  # SQLite's length() stops at the NUL, as in rivetkit


async def test_persists_data_across_actor_instances_and_sleeps(
    make_runtime: RuntimeFactory,
) -> None:
    client = await _client(make_runtime)
    first = client.get_or_create(["test-persistence"])
    await first.insertValue("Item 1")
    await first.insertValue("Item 2")
    await _after_sleep(first)
    assert await client.get_or_create(["test-persistence"]).getCount() == 2


async def test_maintains_separate_databases_for_different_actors(
    make_runtime: RuntimeFactory,
) -> None:
    client = await _client(make_runtime)
    await client.get_or_create(["actor-1"]).insertValue("A")
    await client.get_or_create(["actor-1"]).insertValue("B")
    await client.get_or_create(["actor-2"]).insertValue("X")
    assert await client.get_or_create(["actor-1"]).getCount() == 2
    assert await client.get_or_create(["actor-2"]).getCount() == 1


# ---------------------------------------------------------------------- actor-db.test


async def test_supports_crud_raw_sql_and_multi_statement_exec(
    make_runtime: RuntimeFactory,
) -> None:
    actor = (await _client(make_runtime)).get_or_create(["crud"])
    assert await actor.getCount() == 0  # bootstraps schema on startup
    first = await actor.insertValue("alpha")
    second = await actor.insertValue("beta")
    assert {row["value"] for row in await actor.getValues()} == {"alpha", "beta"}
    await actor.updateValue(first["id"], "alpha-updated")
    assert await actor.getValue(first["id"]) == "alpha-updated"
    await actor.deleteValue(second["id"])
    assert await actor.getCount() == 1
    assert await actor.rawSelectCount() == 1
    assert await actor.multiStatementInsert("gamma") == "gamma-updated"


async def test_handles_transactions(make_runtime: RuntimeFactory) -> None:
    actor = (await _client(make_runtime)).get_or_create(["tx"])
    await actor.transactionCommit("commit")
    assert await actor.getCount() == 1
    await actor.transactionRollback("rollback")
    assert await actor.getCount() == 1
    await actor.transactionWithTimeout(120_000)
    assert await actor.transactionExec() == ["commit", "exec-first", "exec-second"]
    assert await actor.transactionAutomaticRollback() == [{"id": 2, "value": "after"}]


async def test_queues_concurrent_transactions_without_interleaving(
    make_runtime: RuntimeFactory,
) -> None:
    actor = (await _client(make_runtime)).get_or_create(["tx-fifo"])
    values = await actor.concurrentTransactions()
    assert values[:2] == ["first-start", "first-end"]
    assert sorted(values[2:]) == ["second", "third"]


async def test_parks_ordinary_actor_sql_behind_a_transaction(
    make_runtime: RuntimeFactory,
) -> None:
    actor = (await _client(make_runtime)).get_or_create(["tx-ordinary"])
    assert await actor.transactionParksOrdinarySql() == ["tx-start", "tx-end", "ordinary"]


async def test_refuses_nested_and_outer_db_use_inside_a_transaction(
    make_runtime: RuntimeFactory,
) -> None:
    # rivetkit times these out (a "safety backstop"); perdure refuses them at once.
    actor = (await _client(make_runtime)).get_or_create(["tx-deadlock"])
    assert "do not nest" in await actor.transactionDeadlockDiagnostic(True)
    assert "tx.execute" in await actor.transactionDeadlockDiagnostic(False)


async def test_rejects_completed_transaction_handles(make_runtime: RuntimeFactory) -> None:
    actor = (await _client(make_runtime)).get_or_create(["tx-terminal"])
    assert "already committed" in await actor.terminalTransactionDiagnostic()


async def test_preserves_manual_cross_call_transactions(make_runtime: RuntimeFactory) -> None:
    actor = (await _client(make_runtime)).get_or_create(["tx-manual"])
    assert await actor.manualTransactionCompatibility() == 1


async def test_handles_high_volume_inserts_and_payload_sizes(
    make_runtime: RuntimeFactory,
) -> None:
    actor = (await _client(make_runtime)).get_or_create(["volume"])
    await actor.insertMany(1000)
    assert await actor.getCount() == 1000
    for size in [*CHUNK_BOUNDARY_SIZES, 32_768]:
        inserted = await actor.insertPayloadOfSize(size)
        assert await actor.getPayloadSize(inserted["id"]) == size


async def test_supports_shrink_and_regrow_workloads(make_runtime: RuntimeFactory) -> None:
    actor = (await _client(make_runtime)).get_or_create(["shrink-regrow"])
    await actor.vacuum()
    baseline = await actor.getPageCount()
    await actor.insertPayloadRows(16, 4096)
    grown = await actor.getPageCount()
    await actor.reset()
    await actor.vacuum()
    shrunk = await actor.getPageCount()
    await actor.insertPayloadRows(10, 6144)
    regrown = await actor.getPageCount()
    assert grown > baseline
    assert shrunk < grown  # incremental_vacuum gave the pages back
    assert regrown > shrunk


async def test_handles_repeated_updates_to_the_same_row(make_runtime: RuntimeFactory) -> None:
    actor = (await _client(make_runtime)).get_or_create(["updates"])
    row = await actor.insertValue("base")
    assert await actor.repeatUpdate(row["id"], 50) == {"value": "Updated 49"}
    assert await actor.getValue(row["id"]) == "Updated 49"
    hot = [(await actor.insertValue(f"init-{i}"))["id"] for i in range(10)]
    updated = await actor.roundRobinUpdateValues(hot, 240)
    assert len(updated) == 10
    assert all(r["value"].startswith("v-") and r["value"][2:].isdigit() for r in updated)


async def test_passes_integrity_checks_after_mixed_workload_and_sleep(
    make_runtime: RuntimeFactory,
) -> None:
    actor = (await _client(make_runtime)).get_or_create(["integrity"])
    await actor.runMixedWorkload(64, 120)
    assert (await actor.integrityCheck()).lower() == "ok"
    await _after_sleep(actor)
    assert (await actor.integrityCheck()).lower() == "ok"
    # Ids 1-64 seeded; the churn deletes ids it then writes again, except those whose
    # last touch was a delete.
    last_touch: dict[int, bool] = {}
    for i in range(120):
        last_touch[i % 64 + 1] = i % 9 != 0
    assert await actor.getCount() == 64 - sum(1 for kept in last_touch.values() if not kept)
