"""The server tests' ``perdure serve tests.support.apps.server:registry`` process.

A thin layer over :mod:`tests.support.server`, which every suite shares.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.server import REPO_ROOT, STOP_TIMEOUT, free_port
from tests.support.server import ServerProcess as _ServerProcess

__all__ = ["REGISTRY", "REPO_ROOT", "STOP_TIMEOUT", "ServerProcess", "free_port"]

REGISTRY = "tests.support.apps.server:registry"


class ServerProcess(_ServerProcess):
    """The server test registry on a data directory (same port across restarts)."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__(REGISTRY, data_dir)

    @property
    def ws_url(self) -> str:
        """``ws://127.0.0.1:<port>``."""
        return f"ws://127.0.0.1:{self.port}"
