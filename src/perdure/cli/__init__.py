"""The ``perdure`` command line: ``serve``, ``actors``, ``nodes``, ``check``, ``types`` and
the admin commands.

- :mod:`perdure.cli.app` parses the command line and runs the server and the store
  commands (it composes the registry, the store, the runtime and the server);
- :mod:`perdure.cli.check_command` is ``perdure check``, :mod:`perdure.cli.types_command`
  ``perdure types``;
- :mod:`perdure.cli.admin`, :mod:`perdure.cli.admin_report` and
  :mod:`perdure.cli.dead_letters` are HTTP clients of the admin API: they load no engine
  module, so this package's face imports nothing at import time either.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``perdure`` command (the console script's entry point)."""
    from perdure.cli.app import main as run

    return run(argv)
