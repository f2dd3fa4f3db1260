"""``python -m perdure``: the same as the ``perdure`` command."""

import sys

from perdure.cli.app import main

sys.exit(main())
