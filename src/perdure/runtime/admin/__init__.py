"""What the admin API reads and repairs: the inspector's views (:mod:`.inspector`), its
live feed (:mod:`.feed`) and repairs of a live actor's workflow and schedules
(:mod:`.repair`)."""
