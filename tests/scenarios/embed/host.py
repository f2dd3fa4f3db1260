"""The host app of the embedding tests (docs/embedding.md): a FastAPI app with routes of
its own and perdure serving ``tests.support.apps.compat``'s registry in the same process,
on the same port, on SQLite in ``$PERDURE_EMBED_DATA``.

perdure is mounted twice, one app and one runtime: at ``/perdure``, and at ``/`` after
everything else (the only layout that worked before issue 32), so one server process
serves both tests. ``python -m uvicorn tests.scenarios.embed.host:app --port PORT``.
"""

from __future__ import annotations

import os
from pathlib import Path

from fastapi import FastAPI

from perdure.runtime import ActorRuntime
from perdure.server import create_app
from perdure.store import SQLiteStore
from tests.support.apps.compat import registry

DATA_ENV = "PERDURE_EMBED_DATA"

runtime = ActorRuntime(registry, SQLiteStore(Path(os.environ[DATA_ENV]) / "perdure.db"))
perdure_app = create_app(runtime)
app = FastAPI(lifespan=perdure_app.lifespan)


@app.get("/hello")
async def hello() -> dict[str, str]:
    """A route of the host's own."""
    return {"hello": "from the host app"}


@app.post("/counters/{key}/increment")
async def increment(key: str, by: int = 1) -> dict[str, int]:
    """The host's route calls an actor through the shared runtime: no network hop."""
    counter = perdure_app.client().compatCounter.get_or_create(key)
    return {"count": await counter.increment(by)}


app.mount("/perdure", perdure_app)
app.mount("/", perdure_app)  # last: the host's own routes come first
