"""The admin commands of ``perdure``: ``inspect``, ``workflow`` (``status``, ``retry``,
``replay``, ``fork``, ``cancel``, ``pause``, ``resume``), ``destroy``, ``kv``, ``db``
(and ``dead-letters``, in a module of its own).

They work on a running server through its admin API (``/admin/…``, described at
``/admin/openapi.json``), found at ``--url`` (``$PERDURE_URL``, default
``http://127.0.0.1:6420``). A server started with ``--admin-token`` wants that token:
``--token`` or ``$PERDURE_ADMIN_TOKEN`` (the variable the server reads too), sent as
``Authorization: Bearer``. Without a token the server answers only its own host.

An actor is named by its name and its key: ``perdure inspect counter main`` is the actor
``counter`` with key ``["main"]``; a key of several parts is given part by part
(``perdure inspect chat eu room-7`` is ``["eu", "room-7"]``), and no part at all names the
actor with the empty key. The name and key are resolved to the actor's id with the
management API (``GET /actors?name=&key=``) first.

Exit status: 0 done; 1 the server refused (``perdure: error: MESSAGE (group.code)`` on
stderr), could not be reached, or the user declined; 2 a usage error; 130 interrupted.

This module is the HTTP client side only (httpx and :mod:`perdure.keys`): it imports no
engine module, and import-linter's "Clients load no engine module" contract holds it to
that. Everything it knows of the server is what the admin API answers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from perdure.cli.admin_api import (
    DEFAULT_URL,
    Actor,
    AdminApi,
    AdminCliError,
    Json,
    Subparsers,
    add_actor_arguments,
    confirmed,
    print_json,
    resolve_actor,
)
from perdure.cli.admin_report import inspect_report, workflow_lines

__all__ = ["ADMIN_COMMANDS", "DEFAULT_URL", "add_admin_commands", "run_admin_command"]

ADMIN_COMMANDS = frozenset({"inspect", "workflow", "destroy", "dead-letters", "kv", "db"})

_UNSETTLED = frozenset({"pending", "running"})
_POLL_INTERVAL = 0.2  # seconds between looks at a retried or replayed workflow


# ------------------------------------------------------------------------- parser


def add_admin_commands(commands: Subparsers[argparse.ArgumentParser]) -> None:
    """Add ``inspect``, ``workflow``, ``destroy``, ``kv``, ``db`` and ``dead-letters`` to
    the ``perdure`` parser."""
    common = _common_options()
    inspect = commands.add_parser(
        "inspect",
        parents=[common],
        help="show an actor on a running server: state, queue, schedules, workflow",
        description="Show one actor of a running server (`perdure docs cli`).",
    )
    add_actor_arguments(inspect)
    inspect.add_argument("--json", action="store_true", help="print the admin API's answer")
    inspect.set_defaults(admin_run=_inspect)
    _add_workflow_commands(commands, common)
    destroy = commands.add_parser(
        "destroy",
        parents=[common],
        help="destroy an actor on a running server (on_destroy runs, its data is deleted)",
    )
    add_actor_arguments(destroy)
    destroy.add_argument(
        "--yes", "-y", action="store_true", help="do not ask (needed when stdin is no terminal)"
    )
    destroy.set_defaults(admin_run=_destroy)
    kv = commands.add_parser(
        "kv",
        parents=[common],
        help="list an actor's KV records on a running server, a page at a time",
        description="An actor's KV records (c.kv) in key order, as committed.",
    )
    add_actor_arguments(kv)
    kv.add_argument("--prefix", help="only the string keys that start with PREFIX")
    kv.add_argument("--limit", type=int, default=50, help="records per page (at most 500)")
    kv.add_argument("--after", metavar="CURSOR", help="the page after CURSOR (printed last)")
    kv.add_argument("--json", action="store_true", help="print the admin API's answer")
    kv.set_defaults(admin_run=_kv)
    # Its own module (which uses this one's client): imported here, not at the top.
    _add_db_command(commands, common)
    from perdure.cli.dead_letters import add_dead_letter_commands

    add_dead_letter_commands(commands, common)


def _add_workflow_commands(
    commands: Subparsers[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    workflow = commands.add_parser(
        "workflow", help="a workflow actor's status; retry or replay it on a running server"
    )
    actions = workflow.add_subparsers(dest="workflow_command", metavar="ACTION", required=True)
    for name, run, text in (
        ("status", _workflow_status, "the workflow's status and history"),
        ("retry", _workflow_retry, "run a failed workflow again (failed steps get new attempts)"),
        ("replay", _workflow_replay, "forget the history from a step on and run from there"),
        ("fork", _workflow_fork, "start a new run from a step, keeping the old run's history"),
        ("cancel", _workflow_cancel, "cancel the run at its next durable point (compensates)"),
        ("pause", _workflow_pause, "hold the run before its next step until resumed"),
        ("resume", _workflow_resume, "let a paused run go on"),
    ):
        description = f"{text[0].upper()}{text[1:]}."
        sub = actions.add_parser(name, parents=[common], help=text, description=description)
        add_actor_arguments(sub)
        if name in ("replay", "fork"):
            sub.add_argument(
                "--from",
                dest="step",
                required=True,
                metavar="STEP",
                help="the location of the step to rerun from, as `workflow status` lists it",
            )
        if name == "fork":
            sub.add_argument("--input", metavar="JSON", help="the new run's input (ctx.input)")
            sub.add_argument(
                "--message",
                metavar="JSON",
                help="the message the receive at STEP gets, instead of the one it took",
            )
        if name == "cancel":
            sub.add_argument("--reason", help="why, kept with the cancelled run")
        if name != "status":
            sub.add_argument(
                "--wait",
                type=float,
                default=5.0,
                metavar="SECONDS",
                help="how long to wait for the workflow to complete or fail before printing "
                "its status (default 5; 0: print it at once)",
            )
        sub.add_argument("--json", action="store_true", help="print the workflow as JSON")
        sub.set_defaults(admin_run=run)


def _common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("server")
    group.add_argument(
        "--url",
        default=os.environ.get("PERDURE_URL") or DEFAULT_URL,
        help=f"the server (env PERDURE_URL; default {DEFAULT_URL})",
    )
    group.add_argument(
        "--token",
        default=os.environ.get("PERDURE_ADMIN_TOKEN") or None,
        help="the server's admin token (env PERDURE_ADMIN_TOKEN); needed when the server "
        "has --admin-token",
    )
    group.add_argument(
        "--timeout", type=float, default=30.0, help="seconds to wait for an answer (default 30)"
    )
    return common


# ----------------------------------------------------------------------- dispatch


def run_admin_command(args: argparse.Namespace) -> int:
    """Run the admin command ``args`` names; print what failed; return the exit status."""
    run: Callable[[AdminApi, argparse.Namespace], int] = args.admin_run
    try:
        with AdminApi(args.url, args.token, args.timeout) as api:
            return run(api, args)
    except AdminCliError as exc:
        print(f"perdure: error: {exc}", file=sys.stderr)
        if exc.hint:
            print(f"perdure: {exc.hint}", file=sys.stderr)
        return exc.status
    except KeyboardInterrupt:
        # Ctrl-C while waiting for a server or a workflow: what was sent stays done.
        print(file=sys.stderr)
        return 130


# ----------------------------------------------------------------------- commands


def _inspect(api: AdminApi, args: argparse.Namespace) -> int:
    return _show(api, args, lambda actor, detail: detail, inspect_report)


def _workflow_status(api: AdminApi, args: argparse.Namespace) -> int:
    return _show(api, args, _workflow_of, workflow_lines)


def _workflow_of(actor: Actor, detail: Json) -> Json:
    flow = detail.get("workflow")
    if flow is None:
        raise AdminCliError(f"{actor.label} is not a workflow actor")
    return flow


def _show(
    api: AdminApi,
    args: argparse.Namespace,
    pick: Callable[[Actor, Json], Json],
    render: Callable[..., list[str]],
) -> int:
    """Print the part ``pick`` takes of the actor's detail: raw (``--json``) or rendered."""
    actor = resolve_actor(api, args)
    value = pick(actor, api.call("GET", f"/admin/actors/{actor.actor_id}"))
    if args.json:
        print_json(value)
    else:
        print("\n".join(render(value, now_ms=time.time() * 1000)))
    return 0


def _workflow_retry(api: AdminApi, args: argparse.Namespace) -> int:
    actor = resolve_actor(api, args)
    api.call("POST", f"/admin/actors/{actor.actor_id}/workflow/retry")
    return _print_outcome(api, actor, args, f"retried the workflow of {actor.label}")


def _workflow_replay(api: AdminApi, args: argparse.Namespace) -> int:
    actor = resolve_actor(api, args)
    path = f"/admin/actors/{actor.actor_id}/workflow/replay"
    api.call("POST", path, json={"from": args.step})
    done = f"replayed the workflow of {actor.label} from {args.step}"
    return _print_outcome(api, actor, args, done)


def _workflow_fork(api: AdminApi, args: argparse.Namespace) -> int:
    actor = resolve_actor(api, args)
    body: dict[str, Any] = {"from": args.step}
    for name in ("input", "message"):
        text = getattr(args, name)
        if text is not None:
            body[name] = _json_option(text, f"--{name}")
    answer = api.call("POST", f"/admin/actors/{actor.actor_id}/workflow/fork", json=body)
    done = f"forked the workflow of {actor.label} from {args.step}: run {answer.get('run')}"
    return _print_outcome(api, actor, args, done)


def _json_option(text: str, option: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise AdminCliError(
            f"{option} is not JSON: {exc}", hint="a text is quoted: --input '\"abc\"'", status=2
        ) from None


def _workflow_cancel(api: AdminApi, args: argparse.Namespace) -> int:
    actor = resolve_actor(api, args)
    api.call(
        "POST", f"/admin/actors/{actor.actor_id}/workflow/cancel", json={"reason": args.reason}
    )
    return _print_outcome(api, actor, args, f"cancelled the workflow of {actor.label}")


def _workflow_pause(api: AdminApi, args: argparse.Namespace) -> int:
    actor = resolve_actor(api, args)
    api.call("POST", f"/admin/actors/{actor.actor_id}/workflow/pause")
    return _print_outcome(api, actor, args, f"paused the workflow of {actor.label}")


def _workflow_resume(api: AdminApi, args: argparse.Namespace) -> int:
    actor = resolve_actor(api, args)
    api.call("POST", f"/admin/actors/{actor.actor_id}/workflow/resume")
    return _print_outcome(api, actor, args, f"resumed the workflow of {actor.label}")


def _print_outcome(api: AdminApi, actor: Actor, args: argparse.Namespace, done: str) -> int:
    """Print the workflow once it has stopped running, or as it is after ``--wait``."""
    flow = _settled(api, actor, args.wait)
    if args.json:
        print_json(flow)
        return 0
    print(done)
    print("\n".join(workflow_lines(flow, now_ms=time.time() * 1000)))
    if flow.get("status") in _UNSETTLED:
        status, wait = flow.get("status"), args.wait
        print(f"(still {status} after {wait:g} s: `perdure workflow status` shows it later)")
    return 0


def _settled(api: AdminApi, actor: Actor, wait: float) -> Json:
    # The API answers once the run has started; a workflow that finishes or fails soon
    # is worth waiting for, one that waits for a message or a timer is not.
    deadline = time.monotonic() + wait
    while True:
        flow = _workflow_of(actor, api.call("GET", f"/admin/actors/{actor.actor_id}"))
        if flow.get("status") not in _UNSETTLED or time.monotonic() >= deadline:
            return flow
        time.sleep(_POLL_INTERVAL)


def _destroy(api: AdminApi, args: argparse.Namespace) -> int:
    actor = resolve_actor(api, args)
    question = f"Destroy {actor.label} (id {actor.actor_id}) and delete its data?"
    if not confirmed(args.yes, f"destroying {actor.label}", question, "not destroyed"):
        return 1
    api.call("DELETE", f"/admin/actors/{actor.actor_id}")
    print(f"destroyed {actor.label} (id {actor.actor_id})")
    return 0


def _kv(api: AdminApi, args: argparse.Namespace) -> int:
    actor = resolve_actor(api, args)
    params: dict[str, Any] = {"limit": args.limit}
    for name in ("prefix", "after"):
        if getattr(args, name) is not None:
            params[name] = getattr(args, name)
    answer = api.call("GET", f"/admin/actors/{actor.actor_id}/kv", params=params)
    if args.json:
        print_json(answer)
        return 0
    records: list[Json] = answer.get("records") or []
    if not records:
        print(f"{actor.label}: no KV records{' after the cursor' * bool(args.after)}")
        return 0
    for record in records:
        key = json.dumps(record["key"], ensure_ascii=False)
        value = json.dumps(record["value"], ensure_ascii=False)
        value = value if len(value) <= 200 else value[:199] + "…"
        print(f"{key}  {value}  ({record['size']} bytes)")
    if answer.get("next"):
        print(f"more: --after {answer['next']}")
    return 0


# ------------------------------------------------------------------------------ db
# `perdure db NAME KEY… [--rows TABLE | --query SQL]`: the tables and their columns,
# a page of a table's rows, or a read-only query (the server refuses one that writes,
# db.read_only), through /admin/actors/{id}/db/….

_SHOWN_WIDTH = 60  # characters of one value in a table's cell


def _add_db_command(
    commands: Subparsers[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add ``db`` to the ``perdure`` parser."""
    parser = commands.add_parser(
        "db",
        parents=[common],
        help="an actor's SQL database on a running server: tables, rows, read-only queries",
        description="An actor's SQL database (c.db) as committed (`perdure docs cli`).",
    )
    add_actor_arguments(parser)
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--rows", metavar="TABLE", help="a page of TABLE's rows")
    what.add_argument("--query", metavar="SQL", help="run a read-only query")
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="JSON",
        help="a value for the query's next `?` (JSON; plain text if it is not JSON)",
    )
    parser.add_argument("--offset", type=int, default=0, help="rows to skip (--rows)")
    parser.add_argument("--limit", type=int, default=50, help="rows per page (at most 500)")
    parser.add_argument("--json", action="store_true", help="print the admin API's answer")
    parser.set_defaults(admin_run=_db)


def _db(api: AdminApi, args: argparse.Namespace) -> int:
    actor = resolve_actor(api, args)
    base = f"/admin/actors/{actor.actor_id}/db"
    if args.query is not None:
        body = {"sql": args.query, "params": [_param(text) for text in args.param]}
        answer = api.call("POST", base + "/query", json=body)
    elif args.rows is not None:
        params = {"offset": args.offset, "limit": args.limit}
        answer = api.call("GET", f"{base}/tables/{args.rows}/rows", params=params)
    else:
        answer = api.call("GET", base + "/tables")
        if args.json:
            print_json(answer)
        else:
            _print_tables(actor.label, answer.get("tables") or [])
        return 0
    if args.json:
        print_json(answer)
        return 0
    _print_rows(answer)
    return 0


def _param(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _print_tables(label: str, tables: list[Json]) -> None:
    if not tables:
        print(f"{label}: no tables")
        return
    for table in tables:
        columns = ", ".join(
            f"{c['name']} {c['type']}".strip() + " PRIMARY KEY" * bool(c["pk"])
            for c in table["columns"]
        )
        print(f"{table['type']} {table['name']} ({columns})")


def _print_rows(answer: Json) -> None:
    columns: list[str] = answer.get("columns") or []
    rows: list[list[Any]] = answer.get("rows") or []
    print("\t".join(columns))
    for row in rows:
        print("\t".join(_cell(value) for value in row))
    shown = len(rows)
    if "total" in answer:
        first = answer["offset"]
        print(f"({shown} of {answer['total']} rows from offset {first})")
    else:
        print(f"({shown} row{'s' * (shown != 1)})")


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _SHOWN_WIDTH else text[: _SHOWN_WIDTH - 1] + "…"
