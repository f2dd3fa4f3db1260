"""A node of a cluster: membership, the leases it holds and the port to its peers
(:mod:`.member`). Where a request is served (here, taken here, or forwarded) is the
dispatch's business: :mod:`perdure.runtime.dispatch.placement`."""
