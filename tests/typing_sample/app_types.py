"""Typed clients for the registry `tests.typing_sample.app:registry`, written by::

    perdure types tests.typing_sample.app:registry -o <this file>

Do not edit. Run it again when an actor, an action, a queue or an event is added,
renamed or removed; a changed signature needs nothing, as the types are read from
the functions themselves. Wrap a client: ``AppClient(create_client(url))``,
``AppClient(runtime.client())``, ``SyncAppClient(Client(url))`` (docs/clients.md).
"""

# ruff: noqa: E402

from __future__ import annotations

from typing import Any, Literal, Never

from perdure.typed import (
    ActionGroup,
    SyncActionGroup,
    SyncTypedAccessor,
    SyncTypedClient,
    SyncTypedConnection,
    SyncTypedHandle,
    SyncTypedWorkflowHandle,
    TypedAccessor,
    TypedClient,
    TypedConnection,
    TypedHandle,
    TypedWorkflowHandle,
    action,
    async_action,
    group,
    untyped_action,
    workflow_output,
)


class _CounterProfileActions:
    rename = action("profile.rename", lambda: _app.rename)


class CounterProfile(_CounterProfileActions, ActionGroup):
    """The actions under `profile.`."""


class SyncCounterProfile(_CounterProfileActions, SyncActionGroup):
    """The actions under `profile.`."""


class _CounterActions:
    increment = action("increment", lambda: _app.increment)
    add = async_action("add", lambda: _app.add)
    owner = action("owner", lambda: _app.owner)
    count = untyped_action("count")
    profile = group(CounterProfile, SyncCounterProfile)
    # Not attributes (call them with `.untyped.action(name, …)`):
    # "send"


class CounterConnection(_CounterActions, TypedConnection[Literal["changed"]]):
    """A connection to a `counter` actor."""


class SyncCounterConnection(_CounterActions, SyncTypedConnection[Literal["changed"]]):
    """A connection to a `counter` actor."""


class CounterHandle(_CounterActions, TypedHandle[Never, Any]):
    """A handle to a `counter` actor."""

    def connect(self, params: Any = None) -> CounterConnection:
        return CounterConnection(self.untyped.connect(params))


class SyncCounterHandle(_CounterActions, SyncTypedHandle[Never, Any]):
    """A handle to a `counter` actor."""

    def connect(self, params: Any = None) -> SyncCounterConnection:
        return SyncCounterConnection(self.untyped.connect(params))


class _RelayerActions:
    relay = async_action("relay", lambda: _app.relay)


class RelayerConnection(_RelayerActions, TypedConnection[str]):
    """A connection to a `relayer` actor."""


class SyncRelayerConnection(_RelayerActions, SyncTypedConnection[str]):
    """A connection to a `relayer` actor."""


class RelayerHandle(_RelayerActions, TypedHandle[Never, Any]):
    """A handle to a `relayer` actor."""

    def connect(self, params: Any = None) -> RelayerConnection:
        return RelayerConnection(self.untyped.connect(params))


class SyncRelayerHandle(_RelayerActions, SyncTypedHandle[Never, Any]):
    """A handle to a `relayer` actor."""

    def connect(self, params: Any = None) -> SyncRelayerConnection:
        return SyncRelayerConnection(self.untyped.connect(params))


class _JobsActions:
    state = untyped_action("state")


class JobsConnection(_JobsActions, TypedConnection[str]):
    """A connection to a `jobs` actor."""


class SyncJobsConnection(_JobsActions, SyncTypedConnection[str]):
    """A connection to a `jobs` actor."""


class JobsHandle(_JobsActions, TypedWorkflowHandle[Literal["jobs"], "_app.Job"]):
    """A handle to a `jobs` actor."""

    workflow_result = workflow_output(lambda: _app.run_jobs)

    def connect(self, params: Any = None) -> JobsConnection:
        return JobsConnection(self.untyped.connect(params))


class SyncJobsHandle(
    _JobsActions,
    SyncTypedWorkflowHandle[Literal["jobs"], "_app.Job"],
):
    """A handle to a `jobs` actor."""

    workflow_result = workflow_output(lambda: _app.run_jobs)

    def connect(self, params: Any = None) -> SyncJobsConnection:
        return SyncJobsConnection(self.untyped.connect(params))


class AppClient(TypedClient):
    """The registry's actors, for asyncio code."""

    @property
    def counter(self) -> TypedAccessor[CounterHandle, Any]:
        return self._accessor("counter", CounterHandle)

    @property
    def relayer(self) -> TypedAccessor[RelayerHandle, Any]:
        return self._accessor("relayer", RelayerHandle)

    @property
    def jobs(self) -> TypedAccessor[JobsHandle, _app.Owner]:
        return self._accessor("jobs", JobsHandle)


class SyncAppClient(SyncTypedClient):
    """The registry's actors, for blocking code."""

    @property
    def counter(self) -> SyncTypedAccessor[SyncCounterHandle, Any]:
        return self._accessor("counter", SyncCounterHandle)

    @property
    def relayer(self) -> SyncTypedAccessor[SyncRelayerHandle, Any]:
        return self._accessor("relayer", SyncRelayerHandle)

    @property
    def jobs(self) -> SyncTypedAccessor[SyncJobsHandle, _app.Owner]:
        return self._accessor("jobs", SyncJobsHandle)


# Last: the app may import this module too (a typed c.client() in an action).
import tests.typing_sample.app as _app
