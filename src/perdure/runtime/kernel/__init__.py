"""The kernel every part of a live actor builds on: the actor's core (:mod:`.core`: its
identity, status, alarms and the pieces below, shared by all its parts), the clock
(:mod:`.clock`), tasks with an owner (:mod:`.tasks`), what keeps an actor awake
(:mod:`.activity`), the commit pipeline (:mod:`.commits`) and idempotency keys
(:mod:`.idempotency`, with the index of an actor's keys in :mod:`.key_index`). It
imports no other room of the runtime."""
