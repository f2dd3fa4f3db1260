"""The kernel every part of a live actor builds on: the clock (:mod:`.clock`), tasks
with an owner (:mod:`.tasks`), what keeps an actor awake (:mod:`.activity`) and the
commit pipeline (:mod:`.commits`). It imports no other room of the runtime."""
