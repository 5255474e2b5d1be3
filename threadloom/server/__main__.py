"""``python -m threadloom.server``: the same as ``threadloom serve``."""

import sys

from threadloom.server.serve import main

sys.exit(main())
