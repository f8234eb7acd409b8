"""``python -m app.cli``."""

import sys

from app.cli.commands import main

sys.exit(main())
