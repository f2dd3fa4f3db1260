"""The client's import edge: ``import perdure.client`` loads no engine module.

A client process (a web app calling actors, a script) needs the wire protocol and an
HTTP/WebSocket stack, not the runtime, the workflow engine, the stores or the server; an
import that drags them in (and sqlite3, pydantic, starlette …) makes every client slower
to start and heavier to deploy. Each check runs in a fresh interpreter, since this one
has long loaded everything.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# What the client may load of perdure: the package root (whose public names load lazily),
# the shared base it speaks (errors, keys, the wire protocol), the version, and itself.
ALLOWED_PACKAGES = (
    "perdure._time",
    "perdure._version",
    "perdure.client",
    "perdure.errors",
    "perdure.handles",
    "perdure.keys",
    "perdure.protocol",
)

# Third-party modules only the engine uses: the SQLite and PostgreSQL stores, the
# server's ASGI stack, schemas and validation, cron schedules.
ENGINE_LIBRARIES = (
    "sqlite3",
    "_sqlite3",
    "psycopg",
    "psycopg_pool",
    "starlette",
    "uvicorn",
    "pydantic",
    "croniter",
)


def _modules_loaded_by(statement: str) -> set[str]:
    """The modules ``statement`` loads in a fresh interpreter (beyond its start-up ones)."""
    code = (
        "import json, sys\n"
        "before = set(sys.modules)\n"
        f"{statement}\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr[-2000:]
    loaded: list[str] = json.loads(result.stdout.splitlines()[-1])
    return set(loaded)


def _engine_modules(loaded: set[str]) -> list[str]:
    """What of ``loaded`` a client must not load."""
    outside = [
        name
        for name in loaded
        if name.startswith("perdure.")
        and not any(name == p or name.startswith(p + ".") for p in ALLOWED_PACKAGES)
    ]
    libraries = [name for name in loaded if name.split(".", 1)[0] in ENGINE_LIBRARIES]
    return sorted(outside + libraries)


def test_import_perdure_client_loads_no_engine_module() -> None:
    loaded = _modules_loaded_by("import perdure.client")
    assert "perdure.client.aio" in loaded  # the import did happen
    assert "perdure.client.sync" in loaded
    assert _engine_modules(loaded) == [], (
        "import perdure.client loads engine modules; import them lazily or move what the "
        "client needs into perdure.errors / perdure.keys / perdure.protocol"
    )


def test_the_public_client_names_load_no_engine_module() -> None:
    loaded = _modules_loaded_by(
        "from perdure.client import AsyncClient, Client, create_client\n"
        "from perdure import __version__"
    )
    assert _engine_modules(loaded) == []


def test_the_typed_clients_load_no_engine_module() -> None:
    """The bases of the generated typed clients wrap a client: a client process imports
    them with no more of the engine (their generator, which reads definitions, is for
    the ``perdure types`` command only)."""
    loaded = _modules_loaded_by("import perdure.client, perdure.typed")
    assert "perdure.typed.aio" in loaded
    assert "perdure.typed.generate" not in loaded
    typed = {name for name in loaded if name.startswith("perdure.typed")}
    assert _engine_modules(loaded - typed) == []


def test_the_check_sees_an_engine_import() -> None:
    """The check can fail: the runtime does load engine modules."""
    loaded = _modules_loaded_by("import perdure.client, perdure.runtime")
    engine = _engine_modules(loaded)
    assert any(name.startswith("perdure.runtime") for name in engine), engine
