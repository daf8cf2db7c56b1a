"""``python -m ezpz_tui`` is ``ezpz-tui``."""

import sys

from ezpz_tui.cli import main

sys.exit(main())
