"""The edge every request crosses first: who may use the client surface
(:mod:`.client_access`) and the admin surface (:mod:`.admin_access`), CORS (:mod:`.cors`),
the door that checks both (:mod:`.door`), request limits (:mod:`.http_limits`) and time
limits (:mod:`.slow_clients`), the listening socket (:mod:`.listening`), draining
(:mod:`.draining`), small ASGI helpers (:mod:`.asgi`) and errors on the wire
(:mod:`.wire_errors`)."""
