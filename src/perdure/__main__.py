"""``python -m perdure``: the same as the ``perdure`` command."""

import sys

from perdure.cli import main

sys.exit(main())
