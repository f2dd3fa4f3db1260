"""The installed wheel's smoke test, run by scripts/smoke-wheel with a fresh venv's Python
from a directory outside the checkout (so only the installed package can be imported).

It writes a one-actor app (its action writes a row of the actor's SQL database too,
``c.db``: apsw's wheel at work), serves it with ``python -m perdure serve`` on a free
loopback port and a data directory of its own, calls an action twice through the
blocking client, loads the inspector page and one of the assets it links, prints pages
of the installed documentation (``perdure docs edge``, and ``workflows/steps`` of the
guide's folder), then stops the server with SIGTERM and expects exit status 0. Every
wait is bounded. Exits 0 when all of it worked, 1 with the reason (and the server's
output) when not.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

APP = """
from perdure import actor, db, setup


async def _migrate(database):
    await database.execute("CREATE TABLE IF NOT EXISTS log (by INTEGER)")


counter = actor(
    state={"count": 0},
    db=db(on_migrate=_migrate),
    actions={"increment": lambda c, by=1: _increment(c, by)},
)


async def _increment(c, by):
    c.state["count"] += by
    await c.db.execute("INSERT INTO log (by) VALUES (?)", by)  # c.db: apsw's wheel
    rows = await c.db.execute("SELECT sum(by) AS total FROM log")
    assert rows[0]["total"] == c.state["count"]
    return c.state["count"]


registry = setup(use={"counter": counter})
"""

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
HTTP_TIMEOUT_S = 10.0


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="perdure-smoke-") as folder:
        root = Path(folder)
        (root / "smoke_app.py").write_text(APP)
        port = _free_port()
        log = (root / "server.log").open("w+")
        command = [sys.executable, "-m", "perdure", "serve", "smoke_app:registry"]
        command += ["--port", str(port), "--data", str(root / "data")]
        server = subprocess.Popen(
            command,
            cwd=root,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            _check(f"http://127.0.0.1:{port}", server)
        except Exception as exc:
            server.kill()
            server.wait(timeout=STOP_TIMEOUT_S)
            log.seek(0)
            print(f"smoke test failed: {exc}\n--- server output ---\n{log.read()}")
            return 1
        finally:
            log.close()
    import perdure

    print(f"smoke test passed: perdure {perdure.__version__} on Python {sys.version.split()[0]}")
    return 0


def _check(url: str, server: subprocess.Popen[bytes]) -> None:
    _wait_healthy(url, server)
    from perdure.client import Client

    with Client(url) as client:
        handle = client.counter.get_or_create("smoke")
        first, second = handle.increment(2), handle.increment(3)
    if (first, second) != (2, 5):
        raise AssertionError(f"increment answered {first}, {second}; expected 2, 5")
    page = _get(f"{url}/ui/")
    assets = re.findall(r'(?:src|href)="([^"]*/ui/static/[^"]+)"', page)
    if not assets:
        raise AssertionError("the inspector page links no asset")
    _get(url + assets[0] if assets[0].startswith("/") else assets[0])
    for topic, title in (("edge", "# The network edge"), ("workflows/steps", "# Steps and")):
        page = subprocess.run(
            [sys.executable, "-m", "perdure", "docs", topic],
            capture_output=True,
            text=True,
            timeout=HTTP_TIMEOUT_S,
        )
        if page.returncode != 0 or not page.stdout.startswith(title):
            raise AssertionError(f"`perdure docs {topic}` printed no page: {page.stderr}")
    server.send_signal(signal.SIGTERM)
    status = server.wait(timeout=STOP_TIMEOUT_S)
    if status != 0:
        raise AssertionError(f"the server exited with status {status} after SIGTERM")


def _wait_healthy(url: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"the server exited at start with status {server.returncode}")
        try:
            _get(f"{url}/health")
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"the server did not answer /health within {START_TIMEOUT_S} s")


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as answer:
        body: bytes = answer.read()
    return body.decode()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


if __name__ == "__main__":
    sys.exit(main())
