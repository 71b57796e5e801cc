"""``python -m agilerl`` runs the ``agilerl`` command (as the console script does)."""

import sys

from agilerl.cli.main import main

sys.exit(main())
