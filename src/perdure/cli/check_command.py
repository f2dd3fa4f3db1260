"""``perdure check MODULE:registry``: the pre-deploy history check on the command line.

Opens the store read-only, replays every stored workflow against the registry given
(:mod:`perdure.history_audit`) and prints what would diverge, where, and what to add. Exit
status 0 when every stored workflow would restart cleanly on this code, 1 when one
would not (or the check could not finish in its time limit), 2 for a usage error or a
store that cannot be read. docs/check.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

from perdure.cli import loading
from perdure.keys import serialize_key

if TYPE_CHECKING:  # the engine loads only when the command runs
    from perdure.history_audit import CheckOptions, CheckReport, Finding
    from perdure.registry import Registry
    from perdure.store.base import Store

__all__ = ["add_check_command", "run_check"]

PROGRESS_EVERY = 2.0  # seconds between progress lines


def add_check_command(commands: Any) -> None:
    """Add ``perdure check`` to the ``perdure`` subcommands."""

    check = commands.add_parser(
        "check",
        help="replay every stored workflow against this code, before deploying it",
        description="Replay every stored workflow history against the registry given, "
        "with no side effect, and list what would diverge (`perdure docs check`).",
    )
    check.add_argument("registry", help="module:attribute or path/to/file.py:attribute")
    loading.add_store_options(check)
    check.add_argument("--json", action="store_true", help="print one JSON report")
    check.add_argument(
        "--strict",
        action="store_true",
        help="warnings fail the check too (finished workflows that diverge, actors of "
        "removed names that hold no unfinished workflow)",
    )
    check.add_argument(
        "--timeout",
        type=loading.positive_seconds,  # a positive number of seconds
        default=10.0,
        help="seconds one workflow's replay may take (default 10)",
    )
    check.add_argument(
        "--time-limit",
        type=loading.positive_seconds,
        default=600.0,
        help="seconds for the whole check; what is left unchecked fails it (default 600)",
    )
    check.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def run_check(args: argparse.Namespace) -> int:
    """Run ``perdure check``; its exit status."""
    from perdure.history_audit import CheckOptions, open_read_only

    registry = loading.load_registry(args.registry)
    store = open_read_only(
        loading.open_store_at(loading.store_url(args, create=False), exclusive=False)
    )
    options = CheckOptions(timeout=args.timeout, time_limit=args.time_limit, strict=args.strict)
    progress = None if args.quiet else _Progress(sys.stderr)
    try:
        report = asyncio.run(_check(store, registry, options, progress))
    except Exception as exc:  # the store could not be read: no verdict at all
        raise loading.CliError(f"cannot read the store: {type(exc).__name__}: {exc}") from exc
    if args.json:
        print(json.dumps(report_json(report), ensure_ascii=False))
    else:
        print_report(report, sys.stdout)
    return 0 if report.ok else 1


async def _check(
    store: Store, registry: Registry, options: CheckOptions, progress: _Progress | None
) -> CheckReport:
    from perdure.history_audit import check_store

    await store.open()
    try:
        return await check_store(store, registry, options, progress)
    finally:
        await store.close()


class _Progress:
    """``checked N/M actors`` on stderr, at most every few seconds (large stores only)."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._started = time.monotonic()
        self._last = self._started

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self._last < PROGRESS_EVERY:
            return
        self._last = now
        rate = done / max(now - self._started, 1e-9)
        print(
            f"perdure check: {done}/{total} actors checked ({rate:.0f}/s)",
            file=self._out,
            flush=True,
        )


# -------------------------------------------------------------------------------- output


def report_json(report: CheckReport) -> dict[str, Any]:
    """The report as ``--json`` prints it."""
    return {
        "ok": report.ok,
        "complete": report.complete,
        "total": report.total,
        "actors": report.actors,
        "workflows": report.workflows,
        "outcomes": dict(report.outcomes),
        "seconds": round(report.seconds, 3),
        "problems": [finding.to_json() for finding in report.problems],
        "warnings": [finding.to_json() for finding in report.warnings],
    }


_LABELS = {
    "diverged": "DIVERGED",
    "error": "ERROR",
    "missing": "MISSING",
    "not_a_workflow": "NO WORKFLOW",
}


def print_report(report: CheckReport, out: TextIO) -> None:
    """The report for people: problems, then warnings, then a summary."""
    for finding in report.problems:
        _print_finding(finding, out)
    if report.warnings:
        print("warnings (they fail the check only with --strict):", file=out)
        for finding in report.warnings:
            _print_finding(finding, out)
    outcomes = ", ".join(f"{count} {name}" for name, count in sorted(report.outcomes.items()))
    print(
        f"checked {report.actors} of {report.total} actors, replayed {report.workflows} "
        f"workflows in {report.seconds:.1f} s" + (f" ({outcomes})" if outcomes else ""),
        file=out,
    )
    if not report.complete:
        print(
            f"NOT COMPLETE: the time limit ended the check; {report.total - report.actors} "
            "actors were not checked",
            file=out,
        )
    problems = len(report.problems)
    if problems:
        print(f"FAILED: {problems} actor(s) would not restart cleanly on this code", file=out)
    elif report.complete:
        print("OK: every stored workflow would restart cleanly on this code", file=out)


def _print_finding(finding: Finding, out: TextIO) -> None:
    head = f"{_LABELS.get(finding.kind, finding.kind.upper())}  {finding.name}/{finding.actor_id}"
    head += f"  [{serialize_key(finding.key)}]"
    verdict = finding.verdict
    if verdict is None:
        print(f"{head}: {finding.message}", file=out)
        return
    where = f" at `{verdict.location}`" if verdict.location else ""
    print(f"{head}  ({verdict.status} workflow){where}", file=out)
    for label, text in (
        ("history", verdict.history),
        ("code", verdict.code),
        ("error", verdict.message if finding.kind == "error" else None),
        ("fix", verdict.fix),
    ):
        if text:
            print(f"    {label + ':':9}{text}", file=out)
