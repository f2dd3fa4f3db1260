"""The kernel every part of a live actor builds on: the actor's core (:mod:`.core`: its
identity, status, alarms and the pieces below, shared by all its parts), the clock
(:mod:`.clock`), tasks with an owner (:mod:`.tasks`), what keeps an actor awake
(:mod:`.activity`) and the commit pipeline (:mod:`.commits`). It imports no other room
of the runtime."""
