"""``perdure serve --reload``: for development, run the server as a child process and start
it again whenever a Python file under the current directory changes.

The data stays where it is (the child opens the same store each time): actors keep their
state across reloads, and a workflow whose code changed replays its history under the new
code, exactly as after a deploy. The watching and restarting is watchfiles' (which uvicorn's
own ``--reload`` uses too); a change stops the child with SIGINT, which puts every live
actor to sleep, and starts a new one once it has exited, so the two never share the port
or the data directory's lock.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from perdure.observe.serving import configure_logging

__all__ = ["RELOAD_FLAG", "serve_reloading"]

RELOAD_FLAG = "--reload"
# Enough for a child with many live actors to put them all to sleep before it is killed.
_STOP_TIMEOUT_S = 30

_log = logging.getLogger("perdure.cli.app")


def serve_reloading(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Serve ``argv`` (the ``perdure`` command line, ``serve`` first) without the reload
    flag in a child, restarting it on changes to ``.py`` files under the working
    directory; returns when stopped (SIGINT or SIGTERM)."""
    import watchfiles

    configure_logging(getattr(logging, args.log_level.upper()), args.log_format, [])

    child = [sys.executable, "-m", "perdure", *(a for a in argv if a != RELOAD_FLAG)]
    watched = Path.cwd()
    _log.info("reloading: watching the .py files under %s", watched)

    def changed(changes: set[tuple[watchfiles.Change, str]]) -> None:
        names = sorted({Path(path).name for _, path in changes})
        _log.info("reloading: %s changed; restarting the server", ", ".join(names))

    watchfiles.run_process(
        watched,
        target=shlex.join(child),
        target_type="command",
        callback=changed,
        watch_filter=watchfiles.PythonFilter(),
        sigint_timeout=_STOP_TIMEOUT_S,
    )
    return 0
