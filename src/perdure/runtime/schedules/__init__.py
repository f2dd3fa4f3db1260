"""Schedules and cron: the manager that fires them (:mod:`.manager`), the API actor code
calls (:mod:`.api`), what a fire and a job look like (:mod:`.info`) and the arithmetic
of intervals and cron expressions (:mod:`.cadence`)."""
