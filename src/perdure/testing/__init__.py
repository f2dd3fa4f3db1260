"""perdure's test kit: an in-process runtime with time under the test's control.

:class:`ActorTestEnv` hosts a registry on a memory or temporary SQLite store, on a
:class:`ManualClock`; ``await env.advance(timedelta(days=3))`` fires the schedules, cron
jobs, workflow sleeps, retry backoffs and timeouts due in those three days, in
milliseconds. Installing perdure also installs a pytest plugin with the fixture
``perdure_env`` (see ``docs/testing.md``).

Names are loaded on first use, so that the pytest plugin (imported by every pytest run
where perdure is installed) loads no engine module until a test asks for one.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "ActorTestEnv",
    "ManualClock",
    "SettleTimeout",
    "StoreChoice",
    "SystemClock",
    "TimeTravelError",
]

_EXPORTS: dict[str, str] = {
    "ActorTestEnv": "perdure.testing.env",
    "StoreChoice": "perdure.testing.env",
    "ManualClock": "perdure.runtime",
    "SystemClock": "perdure.runtime",
    "SettleTimeout": "perdure.testing.errors",
    "TimeTravelError": "perdure.testing.errors",
}

if TYPE_CHECKING:
    from perdure.runtime import ManualClock, SystemClock
    from perdure.testing.env import ActorTestEnv, StoreChoice
    from perdure.testing.errors import SettleTimeout, TimeTravelError


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'perdure.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
