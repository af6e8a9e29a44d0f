"""A pytest plugin that runs the collected tests in reverse order (what a run computes first must not matter)."""
from __future__ import annotations

import pytest


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.reverse()
