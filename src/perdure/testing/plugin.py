"""perdure's pytest plugin (registered as the ``perdure`` entry point of ``pytest11``).

Fixtures:

- ``perdure_env``: a started :class:`~perdure.testing.ActorTestEnv` for the test, on a
  memory store (or a temporary SQLite file: ``--perdure-store=sqlite``, the
  ``perdure_store`` ini option, or ``@pytest.mark.perdure(store="sqlite")``);
- ``perdure_registry``: the registry it hosts. Give it with
  ``@pytest.mark.perdure(registry=...)`` on a test, class or module, or override the
  fixture (``def perdure_registry(): return registry`` in a ``conftest.py``).

The marker also takes ``start`` (an aware datetime) and ``idle_sleep``. Async fixtures
need an async test runner: with pytest-asyncio installed the fixture is one of its
fixtures (any mode); without it, a plain pytest fixture (anyio's plugin runs those).

This module is imported by every pytest run where perdure is installed: it imports
nothing of the engine until a test asks for a fixture.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import pytest

if TYPE_CHECKING:
    from perdure.registry import Registry
    from perdure.testing.env import ActorTestEnv

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["perdure_env", "perdure_registry"]

_STORES = ("memory", "sqlite")
_MARKER = (
    "perdure(registry=None, store=None, start=None, idle_sleep=True): options of the "
    "perdure_env fixture (the registry to host, 'memory' or 'sqlite', the clock's start)"
)


def _async_fixture(fn: F) -> F:
    """A pytest-asyncio fixture when it is installed (so it runs in its strict mode
    too), else a plain one."""
    try:
        import pytest_asyncio
    except ImportError:  # pragma: no cover - depends on what is installed
        return cast("F", pytest.fixture(fn))
    return cast("F", pytest_asyncio.fixture(fn))


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("perdure", "perdure test kit")
    group.addoption(
        "--perdure-store",
        choices=_STORES,
        default=None,
        help="the store of the perdure_env fixture (default: the perdure_store ini "
        "option, else memory)",
    )
    parser.addini("perdure_store", "the store of the perdure_env fixture", default="memory")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", _MARKER)


def _options(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The ``perdure`` markers' keywords, the closest (the test's own) winning."""
    options: dict[str, Any] = {}
    for marker in reversed(list(request.node.iter_markers("perdure"))):
        if marker.args:
            raise pytest.UsageError(
                "@pytest.mark.perdure takes keywords only: registry=, store=, start=, idle_sleep=."
            )
        options.update(marker.kwargs)
    return options


@pytest.fixture
def perdure_registry(request: pytest.FixtureRequest) -> Registry:
    """The registry ``perdure_env`` hosts: ``@pytest.mark.perdure(registry=...)``, or
    override this fixture."""
    registry = _options(request).get("registry")
    if registry is None:
        raise pytest.UsageError(
            "perdure_env needs a registry: mark the test @pytest.mark.perdure(registry=...) "
            "or define a `perdure_registry` fixture that returns one."
        )
    return registry  # type: ignore[no-any-return]


@_async_fixture
async def perdure_env(
    request: pytest.FixtureRequest, perdure_registry: Registry
) -> AsyncIterator[ActorTestEnv]:
    """A started ``ActorTestEnv`` hosting ``perdure_registry`` (stopped after the test)."""
    from perdure.testing.env import ActorTestEnv

    options = _options(request)
    store: Any = options.get("store") or request.config.getoption("perdure_store")
    store = store or request.config.getini("perdure_store") or "memory"
    if store not in _STORES:
        raise pytest.UsageError(f"perdure store must be one of {_STORES}, not {store!r}.")
    async with ActorTestEnv(
        perdure_registry,
        store=store,
        start=options.get("start"),
        idle_sleep=options.get("idle_sleep", True),
    ) as env:
        yield env
