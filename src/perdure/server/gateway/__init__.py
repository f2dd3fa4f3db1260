"""The client surface: the gateway's HTTP routes (:mod:`.routes`) and the actor they
address (:mod:`.target`), WebSocket connections (:mod:`.websocket`, :mod:`.outbox`),
resumable event streams and Server-Sent Events (:mod:`.event_stream`, :mod:`.sse`), raw
handlers (:mod:`.raw_handlers`), what a request tells the actor (:mod:`.request_info`)
and the management API the official client resolves actors with (:mod:`.management`)."""
