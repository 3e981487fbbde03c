"""A pytest plugin for suites that test tether agents: every test runs under
`tether.testing.no_real_models`, unless marked `@pytest.mark.real_models`.

    # conftest.py
    pytest_plugins = ["tether.pytest_plugin"]
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tether.testing import no_real_models

__all__ = ["pytest_configure"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "real_models: let this test call real model providers (tether)"
    )


@pytest.fixture(autouse=True)
def _tether_no_real_models(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("real_models") is not None:
        yield
        return
    with no_real_models():
        yield
