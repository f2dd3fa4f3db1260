"""The ``perdure`` command line.

``perdure serve module:registry`` serves a registry over HTTP and WebSocket (uvicorn with
uvloop and httptools). It binds to 127.0.0.1 unless ``--host`` says otherwise, keeps its
data in ``./.perdure/perdure.db`` (SQLite) unless ``--data`` or ``--store`` says
otherwise, and shuts down gracefully on SIGTERM or SIGINT: every live actor goes to sleep
(``on_sleep`` runs, state is flushed) before the process exits.

One server per SQLite data directory: a second ``perdure serve`` on a directory in use
exits at once (status 1) with a message naming the directory and the process holding it
(see :mod:`perdure.store.sqlite.lock`); a killed holder's lock goes with it.

``perdure actors`` lists the actors in a store, with their decoded state, without a
server (SQLite readers do not block a running server, and take no lock).

On a PostgreSQL store every ``perdure serve`` is a node of one cluster (docs/deploy.md):
``--node-id``, ``--advertise``, ``--lease-ttl`` and ``--cluster-secret`` (or their
``PERDURE_*`` environment variables) say who it is to its peers. ``perdure nodes`` lists
the live nodes with the number of actors each holds. The nodes authenticate each other
with a secret they agree on through the store when none is given
(:mod:`perdure.cli.cluster_secret`); ``perdure reset-cluster-secret`` forgets it.

``perdure types module:registry -o app_types.py`` writes the registry's typed clients
(:mod:`perdure.cli.types_command`).

``perdure inspect``, ``perdure workflow status|retry|replay`` and ``perdure destroy`` work on
a running server through its admin API (:mod:`perdure.cli.admin`, docs/cli.md).

The registry is named ``package.module:attribute`` or ``path/to/file.py:attribute``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import dataclasses
import datetime as _dt
import json
import logging
import sys
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from perdure._version import __version__
from perdure.cli.admin import ADMIN_COMMANDS, add_admin_commands, run_admin_command
from perdure.cli.check_command import add_check_command, run_check
from perdure.cli.cluster_secret import RESET_COMMAND, add_reset_command, reset_cluster_secret
from perdure.cli.docs_command import add_docs_command, run_docs
from perdure.cli.loading import (
    CliError,
    add_store_options,
    load_registry,
    open_store_at,
    store_url,
)
from perdure.cli.reload import serve_reloading
from perdure.cli.serve import serve
from perdure.cli.serve_options import add_serve_command
from perdure.cli.types_command import add_types_command, run_types
from perdure.keys import serialize_key
from perdure.store.base import ActorRecord
from perdure.store.encoding import decode_value

__all__ = ["load_registry", "main"]

_log = logging.getLogger("perdure.cli.app")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``perdure`` console script."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "serve":
            if args.reload:
                return serve_reloading(args, sys.argv[1:] if argv is None else argv)
            return serve(args)
        if args.command == "actors":
            return asyncio.run(_actors(args))
        if args.command == "nodes":
            return asyncio.run(_nodes(args))
        if args.command == RESET_COMMAND:
            return reset_cluster_secret(args)
        if args.command in ADMIN_COMMANDS:
            return run_admin_command(args)
        if args.command == "check":
            return run_check(args)
        if args.command == "docs":
            return run_docs(args)
        if args.command == "types":
            return run_types(args)
    except CliError as exc:
        print(f"perdure: error: {exc}", file=sys.stderr)
        return 2
    parser.print_help()
    return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="perdure", description="Durable actors and workflows.")
    parser.add_argument("--version", action="version", version=f"perdure {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_serve_command(commands)
    actors = commands.add_parser("actors", help="list the actors in a store and their state")
    add_store_options(actors)
    actors.add_argument("--name", help="only actors of this name")
    actors.add_argument("--json", action="store_true", help="one JSON object per line")
    nodes = commands.add_parser("nodes", help="list the live nodes of a cluster")
    add_store_options(nodes)
    nodes.add_argument("--all", action="store_true", help="also nodes whose heartbeat stopped")
    nodes.add_argument("--json", action="store_true", help="one JSON object per line")
    add_reset_command(commands)
    add_admin_commands(commands)
    add_check_command(commands)
    add_docs_command(commands)
    add_types_command(commands)
    return parser


# -------------------------------------------------------------------------- actors


async def _actors(args: argparse.Namespace) -> int:
    # Not exclusive: listing reads beside a running server, which holds the lock.
    store = open_store_at(store_url(args, create=False), exclusive=False)
    await store.open()
    try:
        after: str | None = None
        while True:
            page = await store.list_actors(name=args.name, after=after, limit=500)
            for record in page:
                print(_actor_line(record, as_json=args.json))
            if len(page) < 500:
                break
            after = page[-1].actor_id
    finally:
        await store.close()
    return 0


async def _nodes(args: argparse.Namespace) -> int:
    store = open_store_at(store_url(args, create=False), exclusive=False)
    await store.open()
    try:
        records = await store.list_nodes(include_dead=args.all)
    finally:
        await store.close()
    now = _dt.datetime.now(_dt.UTC).timestamp() * 1000
    for node in records:
        alive = node.expires_at > now
        if args.json:
            print(json.dumps({**dataclasses.asdict(node), "alive": alive}))
            continue
        state = "draining" if node.draining else ("live" if alive else "dead")
        beat = (now - node.heartbeat_at) / 1000
        print(
            f"{node.node_id}  {node.address}  {state}  code {node.code_version or '-'}  "
            f"{node.actors} actor(s)  heartbeat {beat:.1f} s ago"
        )
    if not records and not args.json:
        print("no live nodes", file=sys.stderr)
    return 0


def _actor_line(record: ActorRecord, *, as_json: bool) -> str:
    state = None if record.state is None else plain(decode_value(record.state))
    created = _dt.datetime.fromtimestamp(record.created_at / 1000, _dt.UTC)
    if as_json:
        return json.dumps(
            {
                "actor_id": record.actor_id,
                "name": record.name,
                "key": list(record.key),
                "created_at": created.isoformat(),
                "generation": record.generation,
                "state": state,
            },
            ensure_ascii=False,
        )
    key = serialize_key(record.key)
    text = json.dumps(state, ensure_ascii=False, separators=(",", ":"))
    return f"{record.actor_id}  {record.name}  [{key}]  gen {record.generation}  {text}"


def plain(value: Any) -> Any:
    """A JSON-friendly copy of a stored value (bytes as base64, instants as ISO text)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, (_dt.date, _dt.datetime)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return {str(k) if not isinstance(k, str) else k: plain(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return [plain(v) for v in sorted(value, key=repr)]
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return repr(value)
