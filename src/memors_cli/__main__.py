"""``python -m memors_cli``: the same as ``memors-mcp``."""

import sys

from .main import main

sys.exit(main())
