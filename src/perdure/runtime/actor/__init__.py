"""One live actor: the instance that composes every feature (:mod:`.instance`), the
contexts user code sees (:mod:`.contexts`), hooks (:mod:`.hooks`), connections
(:mod:`.connections`), raw handlers (:mod:`.raw_handlers`) and the workflow port
implemented for the actor (:mod:`.workflow_host`)."""
