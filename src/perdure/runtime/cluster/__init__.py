"""A node of a cluster: membership, leases and the port to its peers (:mod:`.member`),
and placement: served here, taken here or forwarded (:mod:`.placement`)."""
