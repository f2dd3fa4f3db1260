"""What only the network clients show: a waiting send against the HTTP client's own
timeout, and Ctrl-C during the blocking client's long-poll."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

from perdure.client import Client, create_client
from tests.support.server import ServerProcess

REPO_ROOT = Path(__file__).resolve().parents[3]


async def test_a_waiting_send_outlasts_a_shorter_http_timeout(
    handles_server: ServerProcess, key: str
) -> None:
    # The client's timeout (1 s) bounds requests; a send that waits 2 s gets its answer.
    async with create_client(handles_server.url, timeout=1.0) as client:
        mailbox = client.mailbox.get_or_create([key])
        await mailbox.resolve()
        started = time.monotonic()
        result = await mailbox.send("held", {"n": 1}, wait=True, timeout=2.0)
        assert result.status == "timedOut"
        assert 1.9 <= time.monotonic() - started < 4.0

    def blocking() -> str:
        with Client(handles_server.url, timeout=1.0) as sync_client:
            handle = sync_client.mailbox.get_or_create([key])
            return handle.send("held", {"n": 2}, wait=True, timeout=2.0).status

    assert await asyncio.to_thread(blocking) == "timedOut"


WAITER = """
import sys
from perdure.client import Client

with Client(sys.argv[1]) as client:
    mailbox = client.mailbox.get_or_create([sys.argv[2]])
    mailbox.resolve()
    print("waiting", flush=True)
    mailbox.send("held", {"n": 1}, wait=True)  # no timeout: until completed
"""


def test_ctrl_c_interrupts_a_blocking_waiting_send_at_once(
    handles_server: ServerProcess, key: str
) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", WAITER, handles_server.url, key],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "waiting"
        time.sleep(0.5)  # inside the long-poll now
        interrupted = time.monotonic()
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=10)
        assert time.monotonic() - interrupted < 2.0
        assert process.returncode != 0
        assert "KeyboardInterrupt" in stderr
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(5)
