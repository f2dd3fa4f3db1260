"""Prometheus metrics on and off, alternating in one sitting (issue 13: within 5 % of off).

Run by hand (not a test)::

    python bench/observe_bench.py                 # 4 rounds of every workload
    python bench/observe_bench.py --rounds 6 a b  # some workloads, more rounds

The workloads are the other benchmarks' own, imported:

(a) ``workflow_bench``'s progress workload over HTTP: 2,000 jobs sent by 32 senders to one
    actor of a real ``perdure serve``, with a WebSocket subscriber counting the events;
    metrics are turned off with ``PERDURE_METRICS=0`` in the server's environment;
(b) ``workflow_bench``'s durable step (in process, SQLite): µs per step, with a
    :class:`~perdure.observe.metrics.MetricsObserver` on the runtime or without;
(c) ``latency.py``'s 32 concurrent HTTP callers of the ``increment`` action (a real
    server): actions/s, the action hooks' hot path.

Each round runs both sides, on then off, and the next round off then on, so that a drift
of the machine falls on both alike. Printed: every run; each side's median and best run,
and on ÷ off of both (for (b) a time: above 1 is slower; for (a) and (c) a rate: below 1
is slower). A busy machine can only make a run slower, so there, given enough short
rounds, the best runs are the steadier figure. Also printed: the CPU time metrics add
per unit of work, the difference of the medians of the CPU each run used (this process,
and the servers it started and reaped) divided by the jobs, steps or calls of a run.
``--idle 0.9`` waits before each run until the CPUs were 90 % idle for a second (Linux),
so that a neighbour's burst is less likely to land on one side only; ``--hooks`` only
times the reports of one unit of work, with metrics and without.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import time
import timeit
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import latency
import workflow_bench

from perdure import ActorRuntime
from perdure.observe.metrics import MetricsObserver
from perdure.telemetry import Observers
from perdure.tuning import tune_garbage_collector


class _MeteredRuntime(ActorRuntime):
    """A runtime watched by a metrics observer, as ``perdure serve`` watches its own."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.observers.add(MetricsObserver(self.registry.actors))


@contextmanager
def metrics(on: bool) -> Iterator[None]:
    """Metrics on or off for what starts inside: servers (their environment) and the
    runtimes ``workflow_bench`` builds (the class it names)."""
    saved_env = os.environ.get("PERDURE_METRICS")
    os.environ["PERDURE_METRICS"] = "1" if on else "0"
    workflow_bench.ActorRuntime = _MeteredRuntime if on else ActorRuntime  # type: ignore[misc]
    try:
        yield
    finally:
        workflow_bench.ActorRuntime = ActorRuntime  # type: ignore[misc]
        if saved_env is None:
            os.environ.pop("PERDURE_METRICS", None)
        else:
            os.environ["PERDURE_METRICS"] = saved_env


CALLERS = 32  # (c): concurrent HTTP callers, as latency.py's default


@dataclass(frozen=True)
class Sizes:
    """How much work one run does."""

    jobs: int  # (a)
    steps: int  # (b)
    calls: int  # (c)


async def progress_over_http(sizes: Sizes) -> float:
    """(a) jobs/s (and how often the queue was full: senders then wait and send again)."""
    result = await workflow_bench.bench_progress_over_http(jobs=sizes.jobs)
    print(f"    queue full, sent again: {result['queue_full_retries']}", flush=True)
    return float(result["jobs_per_s"])


async def durable_step(sizes: Sizes) -> float:
    """(b) µs per step."""
    return float((await workflow_bench.bench_step_cost(steps=sizes.steps))["us_per_step"])


async def http_actions(sizes: Sizes) -> float:
    """(c) actions/s of 32 HTTP callers of ``increment``."""
    with latency.server(None) as url:
        return await latency.http_throughput(url, "increment", CALLERS, sizes.calls)


def cpu_seconds() -> float:
    """CPU time of this process and of its children that have exited (the servers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def cpu_idle_share(seconds: float = 1.0) -> float | None:
    """The share of CPU time spent idle over ``seconds`` (None where /proc is absent)."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat") as stat:
            fields = [int(value) for value in stat.readline().split()[1:]]
        return fields[3] + fields[4], sum(fields)  # idle + iowait, all

    try:
        idle_before, total_before = sample()
        time.sleep(seconds)
        idle_after, total_after = sample()
    except OSError:
        return None
    return (idle_after - idle_before) / max(total_after - total_before, 1)


def wait_for_idle(threshold: float, patience: float = 120.0) -> None:
    """Wait (at most ``patience`` seconds) until the CPUs were idle ``threshold`` of a second."""
    deadline = time.monotonic() + patience
    while time.monotonic() < deadline:
        idle = cpu_idle_share()
        if idle is None or idle >= threshold:
            return
    print(f"  (the machine stayed busy for {patience:.0f} s; running anyway)", flush=True)


@dataclass(frozen=True)
class Workload:
    """A workload: what it measures, and how much work (for CPU per unit) a run does."""

    what: str
    unit: str
    run: Callable[[Sizes], Awaitable[float]]
    higher_is_better: bool
    work: Callable[[Sizes], int]
    per: str


WORKLOADS = {
    "a": Workload(
        "progress over HTTP with subscriber",
        "jobs/s",
        progress_over_http,
        True,
        lambda sizes: sizes.jobs,
        "job",
    ),
    "b": Workload("durable step", "µs", durable_step, False, lambda sizes: sizes.steps, "step"),
    "c": Workload(
        f"{CALLERS} HTTP callers, increment",
        "actions/s",
        http_actions,
        True,
        # latency.http_throughput warms up with 20 calls per caller first.
        lambda sizes: sizes.calls + CALLERS * 20,
        "action",
    ),
}
Runs = dict[bool, list[tuple[float, float]]]  # metrics on? -> (figure, CPU seconds) per run


def run_rounds(name: str, rounds: int, sizes: Sizes, idle: tuple[float, float] | None) -> Runs:
    """Both sides of one workload, ``rounds`` times, alternating which goes first."""
    workload = WORKLOADS[name]
    results: Runs = {True: [], False: []}
    for index in range(rounds):
        for on in (True, False) if index % 2 == 0 else (False, True):
            if idle is not None:
                wait_for_idle(*idle)
            cpu = cpu_seconds()
            with metrics(on):
                value = asyncio.run(workload.run(sizes))
            cpu = cpu_seconds() - cpu
            results[on].append((value, cpu))
            side = "on " if on else "off"
            print(
                f"({name}) round {index + 1} metrics {side}: {value:,.1f} {workload.unit}, "
                f"CPU {cpu:.3f} s",
                flush=True,
            )
    return results


def report(name: str, results: Runs, sizes: Sizes) -> str:
    """One table row: each side's median and best run, on ÷ off of both, the verdict on
    the medians, and the CPU that metrics add per unit of work (the medians' difference;
    servers included)."""
    workload = WORKLOADS[name]
    best = max if workload.higher_is_better else min
    figures = {side: [value for value, _ in results[side]] for side in (True, False)}
    median = {side: statistics.median(values) for side, values in figures.items()}
    top = {side: best(values) for side, values in figures.items()}
    ratio = median[True] / median[False]
    cost = 1 - ratio if workload.higher_is_better else ratio - 1
    verdict = "within 5 %" if cost <= 0.05 else "MISS"
    cpu = {side: statistics.median(cpu for _, cpu in results[side]) for side in (True, False)}
    added = (cpu[True] - cpu[False]) / workload.work(sizes) * 1e6
    return (
        f"| ({name}) {workload.what}, {workload.unit} | {median[False]:,.1f} / {top[False]:,.1f} "
        f"| {median[True]:,.1f} / {top[True]:,.1f} | {ratio:.3f} / {top[True] / top[False]:.3f} "
        f"| {verdict} | {added:+.1f} µs per {workload.per} |"
    )


# ------------------------------------------------------------------ hook costs


@dataclass(frozen=True)
class _Actor:
    name: str = "progressActor"
    actor_id: str = "bench"
    key: tuple[str, ...] = ("bench",)


def _timed(observers: Observers, hook: str, *args: Any) -> None:
    span = getattr(observers, hook)(*args)
    if span is not None:
        span.end(None)


def _reports(observers: Observers) -> dict[str, Callable[[], None]]:
    """What the engine reports for one unit of each kind of work, as it reports it."""
    actor = _Actor()

    def committed() -> None:
        _timed(observers, "commit", 1)
        if observers.follows_changes:  # as the commit pipeline asks (metrics do not)
            observers.history_changed(actor, ["loop/1/step"], ())
            observers.state_changed(actor)

    def action() -> None:
        _timed(observers, "action", actor, "increment")
        committed()

    def step() -> None:
        _timed(observers, "step", actor, "loop/1/step", 1)
        committed()

    def message() -> None:
        _timed(observers, "queue_send", actor, "jobs")
        committed()
        observers.message_consumed(actor, "jobs", 1)

    def job() -> None:  # the progress workload: a message, two steps, two events
        message()
        for _ in range(2):
            step()
            observers.event_sent(actor, "progressUpdated", [], 1)

    return {"action": action, "durable step": step, "queue message": message, "progress job": job}


def hook_costs(number: int = 50_000, repeats: int = 7) -> None:
    """Print the CPU the reports of one unit of work take, with metrics and without (the
    runtime's empty fan-out): the minimum of ``repeats`` timings, which a busy machine
    can only make slower, so it is the steadiest figure there is."""
    sides = {"off": _reports(Observers()), "on": _reports(Observers([MetricsObserver()]))}
    print("\n| reports of one | off, µs | on, µs | added, µs |\n|---|---|---|---|")
    for what in sides["off"]:
        costs = {
            side: min(timeit.Timer(reports[what], timer=time.process_time).repeat(repeats, number))
            / number
            * 1e6
            for side, reports in sides.items()
        }
        added = costs["on"] - costs["off"]
        print(f"| {what} | {costs['off']:.2f} | {costs['on']:.2f} | {added:.2f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("workloads", nargs="*", help="a, b and/or c (default: all)")
    parser.add_argument(
        "--hooks", action="store_true", help="only time the reports of one unit of work"
    )
    parser.add_argument("--rounds", type=int, default=4, help="rounds of on and off (default 4)")
    parser.add_argument("--jobs", type=int, default=2000, help="(a) jobs per run")
    parser.add_argument("--steps", type=int, default=5000, help="(b) steps per run")
    parser.add_argument("--calls", type=int, default=10000, help="(c) calls per run")
    parser.add_argument(
        "--idle", type=float, help="before each run, wait until the CPUs were this idle (0-1)"
    )
    parser.add_argument(
        "--patience", type=float, default=120, help="with --idle: wait at most this long (s)"
    )
    args = parser.parse_args()
    unknown = set(args.workloads) - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown workloads: {', '.join(sorted(unknown))} (choose from a, b, c)")
    tune_garbage_collector()  # (b) runs in this process, as perdure serve would
    if args.hooks:
        hook_costs()
        return
    sizes = Sizes(args.jobs, args.steps, args.calls)
    idle = None if args.idle is None else (args.idle, args.patience)
    rows = [
        report(name, run_rounds(name, args.rounds, sizes, idle), sizes)
        for name in args.workloads or list(WORKLOADS)
    ]
    print(
        f"\n{args.rounds} rounds; median / best run of each side\n\n"
        "| workload | off | on | on ÷ off | | CPU added |\n|---|---|---|---|---|---|"
    )
    print("\n".join(rows))


if __name__ == "__main__":
    main()
