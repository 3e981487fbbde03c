"""Fixtures the security tests share."""

from tests.sandboxes import project  # noqa: F401  (a workspace with .git and .tether)
