"""The one way into an actor: the dispatch (:mod:`.dispatcher`), the refs it hands out
(:mod:`.refs`), where a cluster serves an actor (:mod:`.placement`), and what it needs of
the runtime behind it (:mod:`.port`)."""
