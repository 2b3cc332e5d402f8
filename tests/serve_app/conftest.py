"""The public app against a real redis-server, with in-test model backends: the shared fixtures of
tests/support/app_fixtures.py."""

from support.app_fixtures import api, backends, key  # noqa: F401  (pytest finds fixtures by name)
