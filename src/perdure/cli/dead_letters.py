"""``perdure dead-letters list|requeue|drop``: an actor's dead letters on a running server.

A completable message received outside a workflow that was delivered ``max_attempts``
times without being completed becomes a dead letter of its queue (docs/queues.md). These
commands list them, put one back in its queue (its attempts reset) or drop one for good,
through the admin API (``/admin/actors/{id}/dead-letters``), like the other admin
commands (:mod:`perdure.cli.admin`: the same ``--url``, ``--token``, ``NAME KEY…``).

A client module: it imports no engine module.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json

from perdure.cli.admin_api import (
    AdminApi,
    Json,
    Subparsers,
    add_actor_arguments,
    confirmed,
    print_json,
    resolve_actor,
)

__all__ = ["add_dead_letter_commands"]


def add_dead_letter_commands(
    commands: Subparsers[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add ``dead-letters list|requeue|drop`` to the ``perdure`` parser."""
    parser = commands.add_parser(
        "dead-letters",
        help="list, requeue or drop the dead letters of an actor's queues on a running server",
    )
    actions = parser.add_subparsers(dest="dead_letter_command", metavar="ACTION", required=True)
    listing = actions.add_parser(
        "list", parents=[common], help="the actor's dead letters, oldest message first"
    )
    add_actor_arguments(listing)
    listing.add_argument("--queue", metavar="QUEUE", help="only this queue's dead letters")
    listing.add_argument("--json", action="store_true", help="print the admin API's answer")
    listing.set_defaults(admin_run=_list)
    for name, run, text in (
        ("requeue", _requeue, "put a dead letter back in its queue (its attempts reset)"),
        ("drop", _drop, "delete a dead letter for good"),
    ):
        sub = actions.add_parser(name, parents=[common], help=text, description=f"{text}.")
        add_actor_arguments(sub)
        sub.add_argument(
            "--id", dest="message_id", type=int, required=True, help="the message id (`list`)"
        )
        if name == "drop":
            sub.add_argument(
                "--yes", "-y", action="store_true", help="do not ask (needed without a terminal)"
            )
        sub.set_defaults(admin_run=run)


def _list(api: AdminApi, args: argparse.Namespace) -> int:
    actor = resolve_actor(api, args)
    params = {"queue": args.queue} if args.queue else {}
    answer = api.call("GET", f"/admin/actors/{actor.actor_id}/dead-letters", params=params)
    letters: list[Json] = answer.get("dead_letters") or []
    if args.json:
        print_json(answer)
        return 0
    where = f" in queue {args.queue!r}" if args.queue else ""
    if not letters:
        print(f"{actor.label}: no dead letters{where}")
        return 0
    print(f"{actor.label}: {len(letters)} dead letter{'s' * (len(letters) != 1)}{where}")
    for letter in letters:
        print("\n".join(_letter_lines(letter)))
    return 0


def _letter_lines(letter: Json) -> list[str]:
    died = _dt.datetime.fromtimestamp(letter["dead_at"] / 1000, _dt.UTC)
    body = json.dumps(letter.get("body"), ensure_ascii=False)
    return [
        f"  #{letter['id']}  {letter['queue']}  attempts {letter['attempts']}"
        f"  died {died:%Y-%m-%d %H:%M:%S} UTC",
        f"      error: {letter.get('error') or '-'}",
        f"      body:  {body if len(body) <= 200 else body[:199] + '…'}",
    ]


def _requeue(api: AdminApi, args: argparse.Namespace) -> int:
    actor = resolve_actor(api, args)
    path = f"/admin/actors/{actor.actor_id}/dead-letters/{args.message_id}/requeue"
    requeued = api.call("POST", path).get("requeued") or {}
    print(f"requeued message {args.message_id} of {actor.label} to {requeued.get('queue')!r}")
    return 0


def _drop(api: AdminApi, args: argparse.Namespace) -> int:
    actor = resolve_actor(api, args)
    question = f"Drop dead letter {args.message_id} of {actor.label} for good?"
    if not confirmed(args.yes, f"dropping message {args.message_id}", question, "not dropped"):
        return 1
    api.call("DELETE", f"/admin/actors/{actor.actor_id}/dead-letters/{args.message_id}")
    print(f"dropped dead letter {args.message_id} of {actor.label}")
    return 0
