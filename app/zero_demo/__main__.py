"""``python -m app.zero_demo``: see ``cli``."""

if __name__ == "__main__":  # spawned ranks import this module again: they must not run it
    from .cli import main

    raise SystemExit(main())
