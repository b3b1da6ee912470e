"""Shared pytest setup: the ``ray`` marker and ONE local Ray per test session, token-authenticated.

The Ray the tests start is theirs alone: a new local cluster (``address="local"``: never the
user's running Ray, whatever ``RAY_ADDRESS`` says) on loopback only, with Ray's token
authentication on, a token generated for this run (``RAY_AUTH_TOKEN``, set only while that Ray
runs: no token file is written, ``~/.ray`` is not touched) and a temp dir of its own
(``_temp_dir``). At the end it is
shut down with ``ray.shutdown()``, and any of its processes still alive are stopped by pid -
found by the temp dir on their command lines - so no other Ray on the machine is affected. The
helpers for that (temp dirs, tokens, processes by directory) are ``support.ray_cluster``.
"""

from __future__ import annotations

import os
import secrets
import shutil
from typing import Any, Dict, Iterator, Optional

import pytest
from support.ray_cluster import RAY_AUTH_VARIABLES, new_ray_base_dir, stop_processes_under

# Ray's single-machine mode: every Ray the tests start takes 127.0.0.1 as its node address, so
# its GCS, raylets, workers and agents listen on loopback only (by default Ray uses the address
# of the machine's outgoing interface and its GCS and raylet listen on all interfaces). Read when
# ``ray`` is first imported, hence here; a value set by the caller is kept.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


def pytest_configure(config):
    config.addinivalue_line("markers", "ray: tests that need a local Ray cluster")


class _Environment:
    """Sets environment variables and puts the previous values back."""

    def __init__(self, values: Dict[str, Optional[str]]) -> None:
        self.saved = {name: os.environ.get(name) for name in values}
        for name, value in values.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def restore(self) -> None:
        for name, value in self.saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _forget_cached_ray_token() -> None:
    """Make Ray read its token from the environment again (it caches the first one it finds)."""
    try:
        from ray._raylet import AuthenticationTokenLoader

        AuthenticationTokenLoader.instance().reset_cache()
    except Exception:  # pragma: no cover - another Ray version
        pass


@pytest.fixture(scope="session")
def ray_test_token() -> str:
    """The Ray token of this test run (256 random bits, never written to a file)."""
    return secrets.token_hex(32)


@pytest.fixture(scope="session")
def ray_session(ray_test_token: str) -> Iterator[Any]:
    """A local Ray (4 CPUs, no dashboard, worker output not forwarded) for the whole session.

    Token authentication on, with this run's token; its own temp dir. Started on first use
    (3-7 s), shut down at the end of the session. A Ray this process was already connected to
    is used as is and left running. Skips if Ray is missing.
    """
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]'")
    if ray.is_initialized():
        yield ray
        return
    base = new_ray_base_dir()
    # RAY_AUTH_MODE stays unset: a new local cluster then gets Ray's default, token mode (Ray
    # sets the variable itself and refreshes its configuration); the token is this run's.
    env = _Environment(
        {
            **{name: None for name in RAY_AUTH_VARIABLES},
            "RAY_AUTH_TOKEN": ray_test_token,
            "RAY_USAGE_STATS_ENABLED": "0",
        }
    )
    _forget_cached_ray_token()
    try:
        ray.init(
            address="local",
            num_cpus=4,
            include_dashboard=False,
            log_to_driver=False,
            _temp_dir=os.path.join(base, "ray"),
        )
        yield ray
    finally:
        try:
            if ray.is_initialized():
                ray.shutdown()
            stop_processes_under(base)
        finally:
            env.restore()
            _forget_cached_ray_token()
            shutil.rmtree(base, ignore_errors=True)
