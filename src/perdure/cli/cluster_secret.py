"""The cluster's secret from the command line: ``perdure serve`` agrees on it with the
store before it serves, and ``perdure reset-cluster-secret`` forgets it (docs/deploy.md).

A node's secret is agreed on (:mod:`perdure.runtime.cluster.secret`) before the server
starts, so that a node given another secret than its cluster's exits at once (status 1,
``perdure: error: ...`` saying what to pass), before it registers or takes any actor,
and so that every part of the server is built with the secret the nodes share. The
runtime agrees again as it starts (it does for any embedding application too); that
finds the same secret.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from typing import Any

from perdure.cli.loading import CliError, add_store_options, open_store_at, store_url
from perdure.errors import ClusterSecretMismatch
from perdure.runtime import NodeConfig, agree_cluster_secret

__all__ = ["RESET_COMMAND", "add_reset_command", "agreed_node", "reset_cluster_secret"]

RESET_COMMAND = "reset-cluster-secret"


def agreed_node(node: NodeConfig, url: str, store_timeout: float | None) -> NodeConfig:
    """``node`` with the secret its cluster's nodes share (``node.secret`` if it was
    given one, else the one the store keeps, made now if this is the first node).
    ``ClusterSecretMismatch`` when the node may not join."""

    async def agree() -> str:
        store = open_store_at(url, exclusive=False, store_timeout=store_timeout)
        await store.open()
        try:
            return await agree_cluster_secret(store, node.secret)
        finally:
            await store.close()

    try:
        secret = asyncio.run(agree())
    except ClusterSecretMismatch:
        raise
    except Exception as exc:  # the store cannot be reached or read: one line, no traceback
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CliError(
            f"cannot agree on the cluster's secret: the store does not answer ({first_line}); "
            "check --store and that PostgreSQL runs"
        ) from None
    return dataclasses.replace(node, secret=secret)


def add_reset_command(commands: Any) -> None:
    """Add ``reset-cluster-secret`` to ``commands`` (the subparsers of ``perdure``)."""
    reset = commands.add_parser(
        RESET_COMMAND,
        help="forget a cluster's secret: the next node to start sets it again",
        description="Forget the secret the nodes of the cluster on this store share. The next "
        "node to start sets it again: its --cluster-secret, or, without one, a new random "
        "secret the nodes agree on. Nodes still running keep the old one until restarted "
        "(`perdure docs deploy`).",
    )
    add_store_options(reset)


def reset_cluster_secret(args: argparse.Namespace) -> int:
    """Run ``perdure reset-cluster-secret``: forget the secret, say what comes next."""
    return asyncio.run(_reset(args))


async def _reset(args: argparse.Namespace) -> int:
    store = open_store_at(store_url(args, create=False), exclusive=False)
    await store.open()
    try:
        forgotten = await store.forget_cluster_secret()
        live = await store.list_nodes(count_actors=False)
    finally:
        await store.close()
    if not forgotten:
        print("This store keeps no cluster secret: the next node to start sets one.")
        return 0
    print(
        "The cluster's secret is forgotten: the next node to start sets it (its "
        "--cluster-secret, or a new random one without)."
    )
    if live:
        names = ", ".join(node.node_id for node in live)
        print(
            f"{len(live)} node(s) still run with the old secret ({names}): restart each. "
            "Until then, requests between nodes with different secrets are refused (403 "
            "actor.forbidden).",
            file=sys.stderr,
        )
    return 0
