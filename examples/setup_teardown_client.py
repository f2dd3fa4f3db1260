"""The setup & teardown example's client: ticks advancing, then a sleep and a wake.

Run a server first (``perdure serve examples.app:registry``), then
``python -m examples.setup_teardown_client [--endpoint URL] [--key KEY]``. The first call
wakes the actor (``on_wake`` opens its resource; the workflow's ``setup`` step runs once in
the actor's life); the ticks advance once per second; ``goToSleep`` sends it to sleep
(``on_sleep`` closes the resource) and the next call wakes it again. The server's log shows
a line for each wake and sleep.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from perdure.client import create_client


async def main(endpoint: str, key: str, watch: float = 2.5) -> list[str]:
    async with create_client(endpoint) as client:
        handle = client.setupRunTeardownActor.get_or_create([key])
        state: dict[str, Any] = await handle.getState()
        print(f"setup/teardown: awake, initialized={state['initialized']}", flush=True)
        print(f"setup/teardown: ticks {state['ticks']}", flush=True)
        await asyncio.sleep(watch)
        state = await handle.getState()
        print(f"setup/teardown: ticks {state['ticks']} after {watch} s", flush=True)
        await handle.goToSleep()
        print("setup/teardown: sent to sleep (on_sleep closes the resource)", flush=True)
        await asyncio.sleep(0.5)
        state = await handle.getState()  # this call wakes it: on_wake opens the resource
        print(f"setup/teardown: woken again, ticks {state['ticks']}", flush=True)
        lifecycle: list[str] = await handle.getLifecycle()
        print(f"setup/teardown: resource lifecycle in this server: {lifecycle}", flush=True)
        return lifecycle


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--endpoint", default="http://localhost:6420")
    parser.add_argument("--key", default="main")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.endpoint, arguments.key))
