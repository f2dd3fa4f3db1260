"""Running the TypeScript compatibility programs from Python.

:func:`run_program` starts ``node --import tsx <program> …`` in ``tests/scenarios/compat``,
reads its stdout line by line (a JSON line per check, see ``lib/harness.ts``), answers its
control requests (``restart-server``: SIGTERM the server, start it again on the same port
and data) and returns everything it printed, bounded by a deadline.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest

from tests.support.server import ServerProcess

COMPAT_DIR = Path(__file__).resolve().parent


def node_or_skip() -> str:
    """The ``node`` executable, or skip (fail when ``CI=true``) when the suite cannot run."""
    node = shutil.which("node")
    if node is None:
        reason = "Node.js is not installed (`node` not on PATH)"
    elif not (COMPAT_DIR / "node_modules" / "rivetkit" / "package.json").is_file():
        reason = (
            "tests/scenarios/compat/node_modules is missing: run `npm ci` in tests/scenarios/compat"
        )
    elif not (COMPAT_DIR / "node_modules" / "tsx" / "package.json").is_file():
        reason = "tsx is not installed in tests/scenarios/compat/node_modules: run `npm ci`"
    else:
        return node
    if os.environ.get("CI", "").lower() in {"true", "1"}:
        pytest.fail(f"the official-client suite is required in CI: {reason}")
    pytest.skip(reason)


def node_env() -> dict[str, str]:
    """The environment for a program: no RIVET_* settings leak in; client logs quiet."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIVET")}
    env["RIVET_LOG_LEVEL"] = os.environ.get("COMPAT_RIVET_LOG_LEVEL", "error")
    env.pop("NODE_OPTIONS", None)
    return env


@dataclass
class ProgramRun:
    """What a program printed: check lines, the summary, other output, exit status."""

    checks: list[dict[str, Any]] = field(default_factory=list)
    done: dict[str, Any] | None = None
    other: list[str] = field(default_factory=list)
    stderr: str = ""
    returncode: int | None = None
    timed_out: bool = False
    restarts: int = 0

    @property
    def failed(self) -> list[dict[str, Any]]:
        """The checks that did not pass."""
        return [c for c in self.checks if not c.get("ok")]

    def report(self) -> str:
        """A readable account for an assertion message."""
        lines = [
            f"exit status {self.returncode}, timed out: {self.timed_out}, "
            f"server restarts: {self.restarts}, summary: {self.done}"
        ]
        for item in self.checks:
            mark = "ok  " if item.get("ok") else "FAIL"
            lines.append(f"  {mark} {item['check']} ({item.get('ms')} ms): {item.get('title')}")
            if not item.get("ok"):
                lines.append(f"       {item.get('error')}")
                lines.append(f"       fields: {item.get('fields')}")
        if self.other:
            lines.append("other stdout (last 30 lines):")
            lines.extend(f"  | {line}" for line in self.other[-30:])
        if self.stderr.strip():
            lines.append("stderr (last 40 lines):")
            lines.extend(f"  | {line}" for line in self.stderr.splitlines()[-40:])
        return "\n".join(lines)


def _pump(stream: IO[bytes], into: queue.Queue[bytes | None]) -> None:
    for line in iter(stream.readline, b""):
        into.put(line)
    into.put(None)


def run_program(
    program: str,
    args: list[str],
    *,
    timeout: float,
    server: ServerProcess | None = None,
    stop_when: Callable[[ProgramRun], bool] | None = None,
) -> ProgramRun:
    """Run ``program`` (relative to tests/scenarios/compat) to its end or until ``timeout`` seconds.

    ``stop_when(run)`` (optional) is asked after every stdout line and every 0.1 s; when
    it returns true the program is stopped (for programs that never exit on their own).
    """
    node = node_or_skip()
    command = [node, "--import", "tsx", program, *args]
    process = subprocess.Popen(
        command,
        cwd=COMPAT_DIR,
        env=node_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    assert process.stdin is not None
    lines: queue.Queue[bytes | None] = queue.Queue()
    stderr_lines: queue.Queue[bytes | None] = queue.Queue()
    threads = [
        threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True),
        threading.Thread(target=_pump, args=(process.stderr, stderr_lines), daemon=True),
    ]
    for thread in threads:
        thread.start()
    run = ProgramRun()
    deadline = time.monotonic() + timeout
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                run.timed_out = True
                break
            try:
                raw = lines.get(timeout=min(remaining, 0.1))
            except queue.Empty:
                if stop_when is not None and stop_when(run):
                    break
                continue
            if raw is None:
                break
            text = raw.decode("utf-8", "replace").rstrip("\n")
            message = _json_object(text)
            if message is None:
                run.other.append(text)
            elif "check" in message:
                run.checks.append(message)
            elif message.get("done"):
                run.done = message
            elif message.get("control") == "restart-server":
                answer = _restart(server)
                run.restarts += 1
                process.stdin.write((json.dumps(answer) + "\n").encode())
                process.stdin.flush()
            else:
                run.other.append(text)
            if stop_when is not None and stop_when(run):
                break
    finally:
        if process.poll() is None:
            process.kill()
        run.returncode = process.wait(timeout=10)
        for thread in threads:
            thread.join(timeout=5)
        while not lines.empty():
            raw = lines.get_nowait()
            if raw is not None:
                run.other.append(raw.decode("utf-8", "replace").rstrip("\n"))
        chunks = []
        while not stderr_lines.empty():
            chunk = stderr_lines.get_nowait()
            if chunk is not None:
                chunks.append(chunk.decode("utf-8", "replace"))
        run.stderr = "".join(chunks)
        process.stdin.close()
        process.stdout.close()
        process.stderr.close()
    return run


def _json_object(text: str) -> dict[str, Any] | None:
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _restart(server: ServerProcess | None) -> dict[str, Any]:
    if server is None:
        return {"control": "error", "error": "this run has no server to restart"}
    try:
        server.terminate()
        server.restart()
    except Exception as exc:
        return {"control": "error", "error": f"{type(exc).__name__}: {exc}"}
    return {"control": "restarted"}
