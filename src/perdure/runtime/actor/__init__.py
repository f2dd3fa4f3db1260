"""One live actor: the instance that composes every part (:mod:`.instance`) and what it
needs of the runtime hosting it (:mod:`.hosting`), the contexts user code sees
(:mod:`.contexts`), hooks (:mod:`.hooks`), connections (:mod:`.connections`), the
operations a request asks of it (:mod:`.operations`), an operator's repairs
(:mod:`.maintenance`), raw handlers (:mod:`.raw_handlers`), how it stops
(:mod:`.stopping`) and the workflow port implemented for the actor (:mod:`.workflow_host`)."""
