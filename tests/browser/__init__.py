"""Browser tests (a package, so its conftest and modules do not clash with tests/conftest.py)."""
