"""``python -m app.cli``."""

import sys

try:
    from app.cli.commands import main

    status = main()
except KeyboardInterrupt:  # Ctrl-C while the command's modules load: the same line as after
    print("error: interrupted", file=sys.stderr)
    status = 130  # the shell's status for SIGINT, as app.cli.commands.INTERRUPTED
sys.exit(status)
