"""``python -m agilerl.cli`` runs the ``agilerl`` command."""

import sys

from agilerl.cli.main import main

sys.exit(main())
