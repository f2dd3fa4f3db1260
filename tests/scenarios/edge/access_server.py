"""A real ``perdure serve tests.scenarios.edge.access_app:registry`` with a server token (and the
CORS policy a test asks for), for the access tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.server import ServerProcess

TOKEN = "edge-test-token-0123456789"
ADMIN_TOKEN = "edge-admin-token-0123456789"
REGISTRY = "tests.scenarios.edge.access_app:registry"


@contextmanager
def access_server(data: Path, *extra: str, token: str | None = TOKEN) -> Iterator[ServerProcess]:
    """The access registry served with ``--token`` (unless ``token`` is None) and ``extra``
    arguments; killed at the end whatever happened."""
    args = ["--log-level", "warning", *extra]
    if token is not None:
        args += ["--token", token]
    process = ServerProcess(REGISTRY, data, extra_args=args).start()
    try:
        yield process
    finally:
        process.kill()


def new_key() -> str:
    """A key no other test uses."""
    return f"k-{uuid.uuid4().hex[:12]}"
