"""docs/embedding.md's examples, run as a reader would run them: ``actors.py``,
``main.py``, ``serve.py`` and ``watch.py`` saved under their names, the FastAPI app served
by ``python serve.py`` (uvicorn with perdure's HTTP protocol) and the client run against
it. The Django blocks are compiled only: Django is not a dependency of perdure."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.docs import named_files, python_blocks
from tests.support.server import REPO_ROOT, HostAppProcess, free_port

DOC = (REPO_ROOT / "docs" / "embedding.md").read_text()
BLOCKS = python_blocks(DOC)
FILES = named_files(BLOCKS)


def test_every_block_compiles_and_the_named_ones_are_all_there() -> None:
    for block in BLOCKS:
        compile(block, "<docs/embedding.md>", "exec")
    assert set(FILES) == {"actors.py", "main.py", "watch.py", "serve.py", "views.py", "urls.py"}


@pytest.mark.timeout(60)
def test_the_fastapi_example_serves_its_routes_and_perdure_on_one_port(tmp_path: Path) -> None:
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    for name in ("actors.py", "main.py", "serve.py", "watch.py"):
        source = FILES[name].replace("port=8000", f"port={port}")
        (tmp_path / name).write_text(source.replace("http://localhost:8000", endpoint))
    server = HostAppProcess("main:app", tmp_path, cwd=tmp_path, port=port, script="serve.py")
    server.start()
    try:
        with httpx.Client(base_url=endpoint, timeout=10) as http:
            # The app's own route, through the runtime it shares with perdure.
            assert http.post("/pages/home/click").json() == {"count": 1}
            watched = subprocess.run(
                [sys.executable, "watch.py"], cwd=tmp_path, capture_output=True, text=True
            )
            assert watched.returncode == 0, watched.stderr
            # The event comes before the answer (the click's may come first: it was
            # just before connect()).
            assert watched.stdout.splitlines()[-2:] == ["changed 2", "2"]
            assert http.post("/pages/home/click").json() == {"count": 3}
            inspector = http.get("/perdure/ui/")
            assert '<meta name="perdure-root" content="/perdure">' in inspector.text
            # perdure's HTTP protocol serves every route: its bounds, its error shape.
            crowded = http.get("/pages/home", headers={f"x-h{i}": "1" for i in range(300)})
            assert crowded.status_code == 431
            assert crowded.headers["x-rivet-error"] == "request.headers_too_large"
    finally:
        server.terminate()
    # The lifespan's exit ran to its end: the actors slept and the store closed.
    assert "Application shutdown complete." in server.log()
    assert (tmp_path / "perdure.db").exists()
