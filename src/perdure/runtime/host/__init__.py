"""The runtime that hosts actors: :class:`ActorRuntime` (:mod:`.actor_runtime`), the one way
into an actor (:mod:`.dispatch`), the alarms that wake hibernated actors
(:mod:`.alarms`) and readiness (:mod:`.readiness`)."""
