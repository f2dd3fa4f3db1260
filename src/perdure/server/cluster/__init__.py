"""Between the nodes of a cluster: forwarding operations (:mod:`.peers`,
:mod:`.peer_http`), WebSockets piped to the owner (:mod:`.pipe`) and raw requests relayed
to it (:mod:`.raw_relay`)."""
