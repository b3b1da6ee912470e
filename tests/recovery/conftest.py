"""Recovery tests: the engine's snapshot and the store, or stand-ins where a branch lacks them."""

from __future__ import annotations

import importlib.util
from typing import Any, Dict

import pytest

REAL = all(
    importlib.util.find_spec(f"timelypy.recovery.{m}") is not None for m in ("snapshot", "store")
)


@pytest.fixture
def recovery(monkeypatch) -> Dict[str, Any]:
    """The options a processes session needs here: none with the real modules; with the
    stand-ins (installed in this process), workers forked from it so that they have them too."""
    if REAL:
        return {}
    from . import standins

    standins.install(monkeypatch)
    return {"start_method": "fork"}
