"""Shared pytest setup: the ``ray`` marker and ONE local Ray per test session."""

from __future__ import annotations

import os

import pytest

# Read when Ray starts: no usage-stats prompt or upload, no token auth on the throwaway cluster.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")


def pytest_configure(config):
    config.addinivalue_line("markers", "ray: tests that need a local Ray cluster")


@pytest.fixture(scope="session")
def ray_session():
    """A local Ray (4 CPUs, no dashboard, worker output not forwarded) for the whole session.

    Started on first use (3-7 s), shut down at the end of the session. Skips if Ray is missing.
    """
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]'")
    started = False
    if not ray.is_initialized():
        ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
        started = True
    yield ray
    if started:
        ray.shutdown()
