"""The real-server tests run only when asked for: ``pytest -m real_server``."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip ``real_server`` tests unless the marker expression selects them."""
    if "real_server" in (config.getoption("-m") or "") and "not real_server" not in (
        config.getoption("-m") or ""
    ):
        return
    skip = pytest.mark.skip(reason="opt-in: run with pytest -m real_server")
    for item in items:
        if "real_server" in item.keywords:
            item.add_marker(skip)
