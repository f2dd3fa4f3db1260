"""Runtime benchmark: in-process action throughput and latency, creations/s, memory.

Run by hand (not a test)::

    python bench/runtime_bench.py                 # every scenario, a table at the end
    python bench/runtime_bench.py --quick         # smaller counts, for a smoke run
    python bench/runtime_bench.py --only actions_concurrent --profile

Each scenario runs in a fresh interpreter (this file, re-run with ``--scenario``), so the
memory figures of one are not inflated by what another left behind. Targets are those of
issue 2 for a 2-core machine. ``--profile`` runs the scenarios under cProfile instead
and prints where the time goes (the figures are then slower than real).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import json
import os
import platform
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from perdure import ActorRuntime, actor, setup
from perdure.registry import Registry
from perdure.runtime import ActionContext
from perdure.store import MemoryStore, SQLiteStore, Store

MIB = 1024 * 1024

# name -> (what it measures, unit, target, whether higher is better)
TARGETS: dict[str, tuple[str, str, float | None, bool]] = {
    "actions_concurrent": (
        "state-changing actions, 1 actor, 32 callers",
        "actions/s",
        20_000,
        True,
    ),
    "actions_sequential": ("state-changing actions, 1 actor, 1 caller", "actions/s", None, True),
    "creations": ("get_or_create of new keys, 64 creators", "actors/s", 5_000, True),
    "memory_awake": ("RSS of the process, actors awake", "MiB", 300, False),
    "memory_hibernated": ("RSS of the process, actors hibernated", "MiB", None, False),
}


# --------------------------------------------------------------------------- helpers


def rss_mib() -> float:
    """Current resident set size (VmRSS), in MiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    # Not Linux: the peak is the best we have.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def file_size_mib(path: Path) -> float:
    """Size of a SQLite database with its WAL and shared-memory files, in MiB."""
    total = 0
    for suffix in ("", "-wal", "-shm"):
        candidate = Path(f"{path}{suffix}")
        if candidate.exists():
            total += candidate.stat().st_size
    return total / MIB


def counter_registry(sleep_timeout: float = 300.0) -> Registry:
    """A counter whose ``increment`` changes state, so every call needs a durable write."""

    def increment(c: ActionContext) -> int:
        c.state["n"] += 1
        return int(c.state["n"])

    return setup(
        use={
            "counter": actor(
                state={"n": 0},
                actions={"increment": increment},
                options={"sleep_timeout": sleep_timeout},
            )
        }
    )


def make_store(kind: str, directory: Path) -> tuple[Store, Path | None]:
    if kind == "memory":
        return MemoryStore(), None
    path = directory / "bench.db"
    return SQLiteStore(path), path


async def run_in_workers(count: int, workers: int, job: Callable[[int], Awaitable[Any]]) -> None:
    """Run ``job(i)`` for ``i in range(count)`` with ``workers`` concurrent callers."""
    next_index = 0

    async def worker() -> None:
        nonlocal next_index
        while next_index < count:
            index = next_index
            next_index += 1
            await job(index)

    await asyncio.gather(*(worker() for _ in range(workers)))


# ------------------------------------------------------------------------- scenarios


async def actions_concurrent(args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    store, _ = make_store(args.store, directory)
    async with ActorRuntime(counter_registry(), store) as runtime:
        handle = runtime.client().counter.get_or_create("bench")
        await handle.increment()
        callers, per_caller = 32, args.actions // 32

        async def caller() -> None:
            for _ in range(per_caller):
                await handle.increment()

        await asyncio.gather(*(caller() for _ in range(callers)))  # warm-up round
        started = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(callers)))
        elapsed = time.perf_counter() - started
        total = callers * per_caller
        final = await handle.increment()
    assert final == 2 * total + 2, f"lost updates: {final} != {2 * total + 2}"
    return {"value": total / elapsed, "detail": f"{total} calls in {elapsed:.2f} s"}


async def actions_sequential(args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    store, _ = make_store(args.store, directory)
    async with ActorRuntime(counter_registry(), store) as runtime:
        handle = runtime.client().counter.get_or_create("bench")
        for _ in range(200):
            await handle.increment()
        latencies: list[float] = []
        count = args.actions // 8
        started = time.perf_counter()
        for _ in range(count):
            begin = time.perf_counter()
            await handle.increment()
            latencies.append(time.perf_counter() - begin)
        elapsed = time.perf_counter() - started
    latencies.sort()
    p50 = statistics.median(latencies) * 1e6
    p99 = latencies[int(len(latencies) * 0.99)] * 1e6
    return {
        "value": count / elapsed,
        "detail": f"latency p50 {p50:.0f} µs, p99 {p99:.0f} µs",
        "p50_us": p50,
        "p99_us": p99,
    }


async def creations(args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    store, _ = make_store(args.store, directory)
    async with ActorRuntime(counter_registry(), store) as runtime:
        accessor = runtime.client().counter
        await run_in_workers(500, 64, lambda i: accessor.get_or_create(f"warm-{i}").resolve())
        count = args.creations
        started = time.perf_counter()
        await run_in_workers(count, 64, lambda i: accessor.get_or_create(f"k-{i}").resolve())
        elapsed = time.perf_counter() - started
        assert await runtime.store.count_actors() == count + 500
        live = runtime.live_count
    return {"value": count / elapsed, "detail": f"{count} actors in {elapsed:.2f} s, {live} awake"}


async def memory_awake(args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    store, _ = make_store(args.store, directory)
    async with ActorRuntime(counter_registry(), store) as runtime:
        gc.collect()
        baseline = rss_mib()
        accessor = runtime.client().counter
        count = args.awake
        await run_in_workers(count, 64, lambda i: accessor.get_or_create(f"k-{i}").increment())
        assert runtime.live_count == count, runtime.live_count
        gc.collect()
        total = rss_mib()
    per_actor = (total - baseline) * MIB / count
    return {
        "value": total,
        "detail": f"{count} awake; baseline {baseline:.0f} MiB, {per_actor / 1024:.1f} KiB/actor",
    }


async def memory_hibernated(args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    store, path = make_store(args.store, directory)
    async with ActorRuntime(counter_registry(sleep_timeout=0.2), store) as runtime:
        gc.collect()
        baseline = rss_mib()
        accessor = runtime.client().counter
        count = args.hibernated
        started = time.perf_counter()
        await run_in_workers(count, 64, lambda i: accessor.get_or_create(f"k-{i}").increment())
        created = time.perf_counter() - started
        peak_live = runtime.live_count
        # The runtime has no "everyone is asleep" event to wait on: poll, for 120 s at most.
        for _ in range(1200):
            if not runtime.live_count:
                break
            await asyncio.sleep(0.1)
        assert runtime.live_count == 0, runtime.live_count
        await asyncio.sleep(0.1)
        gc.collect()
        total = rss_mib()
        stored = await runtime.store.count_actors()
    size = file_size_mib(path) if path is not None else 0.0
    return {
        "value": total,
        "detail": (
            f"{stored} stored, 0 awake (peak {peak_live}); baseline {baseline:.0f} MiB; "
            f"created in {created:.1f} s; store {size:.1f} MiB"
        ),
        "store_mib": size,
    }


SCENARIOS: dict[str, Callable[[argparse.Namespace, Path], Awaitable[dict[str, Any]]]] = {
    "actions_concurrent": actions_concurrent,
    "actions_sequential": actions_sequential,
    "creations": creations,
    "memory_awake": memory_awake,
    "memory_hibernated": memory_hibernated,
}


# ---------------------------------------------------------------------------- driver


def run_scenario(args: argparse.Namespace) -> dict[str, Any]:
    """Run one scenario in this process; with ``--profile``, print a cProfile summary."""
    with tempfile.TemporaryDirectory(prefix="perdure-bench-") as tmp:
        coro = SCENARIOS[args.scenario](args, Path(tmp))
        if not args.profile:
            return asyncio.run(coro)
        profiler = cProfile.Profile()
        profiler.enable()
        result = asyncio.run(coro)
        profiler.disable()
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out).strip_dirs()
        stats.sort_stats("tottime").print_stats(25)
        stats.sort_stats("cumulative").print_stats(35)
        print(out.getvalue(), file=sys.stderr)
        return result


def child_command(args: argparse.Namespace, scenario: str) -> list[str]:
    command = [sys.executable, __file__, "--scenario", scenario, "--store", args.store]
    for option in ("actions", "creations", "awake", "hibernated"):
        command += [f"--{option}", str(getattr(args, option))]
    if args.profile:
        command.append("--profile")
    if args.gc_threshold:
        command += ["--gc-threshold", str(args.gc_threshold)]
    return command


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median run, with the spread of all runs appended to its detail."""
    if len(runs) == 1:
        return runs[0]
    ordered = sorted(runs, key=lambda run: float(run["value"]))
    median = dict(ordered[len(ordered) // 2])
    spread = ", ".join(f"{run['value']:,.0f}" for run in runs)
    median["detail"] = f"{median['detail']}; median of {len(runs)} runs ({spread})"
    median["runs"] = [run["value"] for run in runs]
    return median


def print_table(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> None:
    gc_text = f"gc threshold {args.gc_threshold}" if args.gc_threshold else "default gc"
    print()
    print(f"perdure runtime benchmark — {args.store} store, {gc_text}, ")
    print(f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs")
    print()
    header = f"{'scenario':<20} {'result':>14} {'target':>12} {'vs target':>10}  detail"
    print(header)
    print("-" * len(header))
    for name, result in results.items():
        what, unit, target, higher = TARGETS[name]
        if "error" in result:
            print(f"{name:<20} {'FAILED':>14}  {result['error']}")
            continue
        value = result["value"]
        shown = f"{value:,.0f} {unit}" if unit != "MiB" else f"{value:,.1f} MiB"
        if target is None:
            target_text, ratio_text = "-", "-"
        else:
            target_text = f"{'≥' if higher else '≤'} {target:,.0f}"
            ratio = value / target if higher else target / value
            ratio_text = f"{ratio:.2f}x {'ok' if ratio >= 1 else 'MISS'}"
        print(f"{name:<20} {shown:>14} {target_text:>12} {ratio_text:>10}  {what}")
        print(f"{'':<20} {'':>14} {'':>12} {'':>10}  {result['detail']}")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=SCENARIOS, help=argparse.SUPPRESS)
    parser.add_argument("--only", action="append", choices=SCENARIOS, help="run only these")
    parser.add_argument("--store", choices=("sqlite", "memory"), default="sqlite")
    parser.add_argument("--quick", action="store_true", help="small counts (smoke run)")
    parser.add_argument("--profile", action="store_true", help="cProfile each scenario")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--repeat", type=int, default=3, help="runs per throughput scenario")
    parser.add_argument(
        "--gc-threshold",
        type=int,
        default=0,
        help="gc.set_threshold(N, 20, 20) in each scenario (default: Python's 700, 10, 10)",
    )
    parser.add_argument("--actions", type=int, default=128_000)
    parser.add_argument("--creations", type=int, default=20_000)
    parser.add_argument("--awake", type=int, default=10_000)
    parser.add_argument("--hibernated", type=int, default=100_000)
    args = parser.parse_args()
    if args.quick:
        args.actions, args.creations, args.hibernated = 16_000, 2_000, 5_000
        args.awake = min(args.awake, 2_000)

    if args.scenario:  # a child: run one scenario, answer with one JSON line
        if args.gc_threshold:
            # Fewer young collections mean fewer promotions, so fewer full collections,
            # each of which walks every live object (about 20 per awake actor).
            gc.set_threshold(args.gc_threshold, 20, 20)
        print(json.dumps(run_scenario(args)))
        return

    results: dict[str, dict[str, Any]] = {}
    for scenario in args.only or list(SCENARIOS):
        # Throughput on a shared 2-core machine is noisy: report the median of several
        # fresh runs. Memory figures barely move, and the 100,000-actor run is long.
        repeat = 1 if scenario.startswith("memory") or args.profile else args.repeat
        runs: list[dict[str, Any]] = []
        for attempt in range(repeat):
            print(f"running {scenario} ({attempt + 1}/{repeat}) …", file=sys.stderr, flush=True)
            done = subprocess.run(child_command(args, scenario), capture_output=True, text=True)
            if args.profile:
                print(done.stderr, file=sys.stderr)
            if done.returncode != 0:
                print(done.stderr, file=sys.stderr)
                runs = [{"error": done.stderr.strip().splitlines()[-1:]}]
                break
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        results[scenario] = summarise(runs)
    if args.json:
        print(json.dumps(results, indent=2))
    print_table(results, args)


if __name__ == "__main__":
    main()
