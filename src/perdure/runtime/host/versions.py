"""Version-aware placement: a workflow run stays on the code it started on.

A cluster node announces the version of its code (``NodeConfig.code_version``) and a
workflow run records, as it starts, the version of the node it starts on (its status
record's ``codeVersion``: :mod:`perdure.workflows.engine`). When a node wakes a workflow
actor whose run is live and recorded another version than its own, it decides before the
run replays anything (docs/deploy.md, "Rolling deploy with versions"):

1. **A live node runs that version**: the node gives the lease back and the request goes
   there (``PlacedByVersion``, an ``ActorOwnedElsewhere`` naming that node: the
   placement forwards it; an alarm's wake is handed over with a status request, which
   wakes the actor there).
2. **None does**: the stored history is judged against this node's code by the judge of
   ``perdure check`` (:func:`perdure.workflows.judge.judge_history`): if it replays, the
   run continues here and records this version; if not, the run is held with the status
   ``waiting_for_version`` (its actor stays awake here, serving actions) and moves to a
   node of its version as soon as one joins (:meth:`VersionPlacement.watch`).

When. Case 1 must be decided before the actor's instance exists (it must not start here,
and a request on its way into it must not find it stopping), so while some live node
runs another version (:meth:`VersionPlacement.mixed`: a deploy under way) the node
reads the history right after taking the lease (:meth:`admit`), and hands what it read
to the run. The rest of the time no node can take the run, so the decision is made in
the run task with the history the run loads anyway (:meth:`admit_here`): the wake waits
for nothing more, as on a single server, which announces no version and never comes
here (nor does a plain actor).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import TYPE_CHECKING

from perdure.errors import ActorOwnedElsewhere
from perdure.registry import Registry, registry_digest
from perdure.runtime.actor.operations import STATUS
from perdure.runtime.actor.workflow_host import Admission
from perdure.store.encoding import decode_value
from perdure.workflows.core import META_LOCATION
from perdure.workflows.judge import judge_history

if TYPE_CHECKING:
    from perdure.definition import ActorDefinition
    from perdure.runtime.actor.instance import ActorInstance
    from perdure.runtime.cluster.member import ClusterMember, NodeConfig
    from perdure.runtime.dispatch.placement import Placement
    from perdure.runtime.host.actor_runtime import ActorRuntime
    from perdure.store.base import ActorRecord, Lease

__all__ = ["PlacedByVersion", "VersionPlacement", "with_code_version"]

_log = logging.getLogger("perdure.cluster")
# The statuses of a run that has not ended (a run of another status replays nothing).
_LIVE = frozenset({"pending", "running", "paused"})
# How long judging one history may take (as `perdure check --timeout`'s default).
_JUDGE_TIMEOUT = 10.0
_HANDED_OVER_RETRY_MS = 1000
_MOVE_GRACE = 5.0  # seconds the calls of a held run's actor have to answer before it moves


class PlacedByVersion(ActorOwnedElsewhere):
    """The actor's run belongs on ``owner_node``, a live node of its code version: this
    node gave the lease back (a request is forwarded there; an alarm is handed over)."""

    def __init__(self, placement: VersionPlacement, actor_id: str, node_id: str) -> None:
        super().__init__(actor_id, node_id, 0)
        self._placement = placement

    async def hand_over(self) -> int:
        """Wake the actor on that node (an alarm's wake); when to look again (epoch ms)."""
        return await self._placement.hand_over(self.actor_id, self.owner_node)


def with_code_version(node: NodeConfig, registry: Registry) -> tuple[NodeConfig, str]:
    """``node`` with its code version (by default the registry's digest), and that."""
    version = node.code_version or registry_digest(registry)
    return dataclasses.replace(node, code_version=version), version


class VersionPlacement:
    """The version check of one cluster node (``runtime.versions``)."""

    def __init__(
        self, runtime: ActorRuntime, member: ClusterMember, placement: Placement, version: str
    ) -> None:
        self._runtime = runtime
        self._store = runtime.store
        self._member = member
        self._placement = placement
        self.version = version
        self._watching: asyncio.Task[None] | None = None
        # What check_wake decided for the actors being woken, until their run asks.
        self._admissions: dict[str, Admission] = {}

    def take_admission(self, actor_id: str) -> Admission | None:
        """What :meth:`check_wake` decided for the actor being woken (asked once)."""
        return self._admissions.pop(actor_id, None)

    async def check_wake(
        self, record: ActorRecord, lease: Lease, definition: ActorDefinition | None
    ) -> None:
        """This node has just taken the lease of an actor it is about to wake: while the
        nodes run several versions, decide for a workflow's run now (:meth:`admit`). On
        any failure but ``PlacedByVersion`` (which gave the lease back) the lease is
        given back too."""
        if definition is None or definition.kind != "workflow" or not self.mixed():
            return  # no node could take its run: the run task decides (admit_here)
        try:
            self._admissions[record.actor_id] = await self.admit(record, lease, definition)
        except PlacedByVersion:
            raise
        except BaseException:
            await self._member.release(record.actor_id, lease.generation)
            raise

    def mixed(self) -> bool:
        """True while some live node that takes work runs another version than this
        one (a deploy under way): a run may then belong elsewhere."""
        return self._member.runs_other_versions(self.version)

    async def admit(
        self, record: ActorRecord, lease: Lease, definition: ActorDefinition
    ) -> Admission:
        """Decide for a workflow actor this node has just taken the lease of, before its
        instance exists (while :meth:`mixed`; see the module docstring). Raises
        ``PlacedByVersion`` after giving the lease back when a live node runs the run's
        version."""
        history = await self._store.load_history(record.actor_id)
        recorded = _recorded_version(history)
        if recorded is None or recorded == self.version:
            return Admission(history)
        node = self._member.node_running(recorded, record.actor_id)
        if node is not None:
            await self._member.release(record.actor_id, lease.generation)
            raise PlacedByVersion(self, record.actor_id, node.node_id)
        waiting_for = await self._judge(record, definition, history, recorded)
        if waiting_for is not None:
            self.watch(self._runtime)  # to move it once a node of its version lives
        return Admission(history, waiting_for=waiting_for)

    async def admit_here(self, instance: ActorInstance, history: dict[str, bytes]) -> str | None:
        """Decide for a run woken while every live node runs this version (checked in
        the run task, with the history it loads: the wake does not wait for it). No node
        can take it: the version it must wait for, or ``None`` to run it here."""
        recorded = _recorded_version(history)
        if recorded is None or recorded == self.version:
            return None
        waiting_for = await self._judge(instance.record, instance.definition, history, recorded)
        if waiting_for is not None:
            self.watch(self._runtime)  # to move it once a node of its version lives
        return waiting_for

    async def _judge(
        self,
        record: ActorRecord,
        definition: ActorDefinition,
        history: dict[str, bytes],
        recorded: str,
    ) -> str | None:
        """No live node runs ``recorded``: ``None`` if the history replays on this
        node's code (the run continues here), else ``recorded`` (it waits)."""
        label = f"{record.name}/{record.actor_id}"
        try:
            verdict = await asyncio.wait_for(
                judge_history(
                    definition, (record.actor_id, record.key), history, record.state, record.input
                ),
                _JUDGE_TIMEOUT,
            )
        except TimeoutError:
            _log.warning("judging workflow %s took over %.0f s: it waits", label, _JUDGE_TIMEOUT)
            return recorded
        if not verdict.problem:
            _log.info(
                "workflow %s started on code version %s, which no live node runs: its "
                "history replays on %s (%s), so it continues here",
                label,
                recorded,
                self.version,
                verdict.outcome,
            )
            return None
        _log.warning(
            "workflow %s waits for a node of code version %s: no live node runs it, and its "
            "history does not replay on %s (%s at %s)",
            label,
            recorded,
            self.version,
            verdict.outcome,
            verdict.location,
        )
        return recorded

    async def hand_over(self, actor_id: str, node_id: str) -> int:
        """Wake the actor on ``node_id`` (an alarm found it due here, but its run belongs
        to that node's version). Returns when the alarm is worth a look again (epoch ms):
        in a second, not at the scheduler's next pass, whether that node took it or
        could not be reached."""
        node = await self._member.find_peer(node_id)
        if node is not None:
            try:
                await self._placement.peers.perform(node, actor_id, STATUS, None)
            except Exception as exc:
                _log.info("handing actor %s to node %s failed: %s", actor_id, node_id, exc)
        return self._runtime.clock.now_ms() + _HANDED_OVER_RETRY_MS

    async def move_away(self, instance: ActorInstance) -> None:
        """A held run's version has a live node again: put its actor to sleep here and
        wake it there (the wake hands it over). Requests already inside it finish first
        (bounded); one that found it just before it stops and had not entered yet gets
        ``actor.aborted``, as with any sleep."""
        activity = instance.activity
        deadline = asyncio.get_running_loop().time() + _MOVE_GRACE
        while activity.working and asyncio.get_running_loop().time() < deadline:
            await activity.wait_idle(deadline)
        await self._runtime.sleep_actor(instance.actor_id)
        await self._runtime.wake_for_alarm(instance.actor_id)

    def watch(self, runtime: ActorRuntime) -> None:
        """Start (once) the loop that moves held runs to a node of their version."""
        if self._watching is None or self._watching.done():
            self._watching = runtime.spawn(self._watch(runtime), name="version placement")

    async def _watch(self, runtime: ActorRuntime) -> None:
        interval = self._member.config.heartbeat_ms / 1000
        while True:
            await asyncio.sleep(interval)
            held = [i for i in runtime.live_instances() if i.waiting_for_version is not None]
            if not held and not any(a.waiting_for for a in self._admissions.values()):
                return  # nothing held, nor about to be (an actor still starting)
            for instance in held:
                version = instance.waiting_for_version
                if version is not None and self._member.node_running(version, instance.actor_id):
                    await self.move_away(instance)


def _recorded_version(history: dict[str, bytes]) -> str | None:
    """The code version a live run recorded, or ``None`` (no run, or one that ended)."""
    encoded = history.get(META_LOCATION)
    if encoded is None:
        return None
    meta = decode_value(encoded)
    if not isinstance(meta, dict) or meta.get("status") not in _LIVE:
        return None
    version = meta.get("codeVersion")
    return version if isinstance(version, str) else None
