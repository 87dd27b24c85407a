"""``python -m triton_backend_runtime``: the command line lives in :mod:`.cli.main`."""

import sys

from .cli.main import main

sys.exit(main())
