"""Test helpers shared across test areas (importable as `support` because tests/ is on
sys.path: pytest inserts the rootdir of tests/conftest.py)."""
