"""The in-process client (``runtime.client()``, ``c.client()``): handles
(:mod:`.client`), connections (:mod:`.connection`) and ``handle.events()``
(:mod:`.events`), all through the dispatch seam."""
