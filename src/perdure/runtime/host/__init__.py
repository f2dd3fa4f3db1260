"""The runtime that hosts actors: :class:`ActorRuntime` (:mod:`.actor_runtime`), which
wakes, holds and stops live instances and builds every other room on itself, the alarms
that wake hibernated actors (:mod:`.alarms`) and readiness (:mod:`.readiness`)."""
