"""An actor's durable queues: sending, receiving and waiting (:mod:`.actor_queue`), and
the leases of completable messages with their retries and dead letters (:mod:`.leases`)."""
