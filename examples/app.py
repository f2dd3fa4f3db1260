"""All of the seed's examples in one registry: ``perdure serve examples.app:registry``."""

from __future__ import annotations

from examples.cron import cron_actor
from examples.progress import progress_actor
from examples.setup_teardown import setup_run_teardown_actor
from perdure import setup

registry = setup(
    use={
        "progressActor": progress_actor,
        "setupRunTeardownActor": setup_run_teardown_actor,
        "cronActor": cron_actor,
    }
)
