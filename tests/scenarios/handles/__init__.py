"""One handle-API suite against every client: network (a real server) and in process."""
