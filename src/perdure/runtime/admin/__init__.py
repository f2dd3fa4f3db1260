"""What the admin API reads: the inspector's views (:mod:`.inspector`) and its live feed
(:mod:`.feed`), over the part of the runtime they see (:mod:`.view`). Repairs of a live
actor are operations like any other: :mod:`perdure.runtime.actor.maintenance`."""
