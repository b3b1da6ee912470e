"""Shared pytest setup: the ``ray`` marker and ONE local Ray per test session, token-authenticated.

The Ray the tests start is theirs alone: a new local cluster (``address="local"``: never the
user's running Ray, whatever ``RAY_ADDRESS`` says) on loopback only, with Ray's token
authentication on, a token generated for this run (``RAY_AUTH_TOKEN``, set only while that Ray
runs: no token file is written, ``~/.ray`` is not touched) and a temp dir of its own
(``_temp_dir``). At the end it is
shut down with ``ray.shutdown()``, and any of its processes still alive are stopped by pid -
found by the temp dir on their command lines - so no other Ray on the machine is affected.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, Iterator, List, Optional

import pytest

# Ray's single-machine mode: every Ray the tests start takes 127.0.0.1 as its node address, so
# its GCS, raylets, workers and agents listen on loopback only (by default Ray uses the address
# of the machine's outgoing interface and its GCS and raylet listen on all interfaces). Read when
# ``ray`` is first imported, hence here; a value set by the caller is kept.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

RAY_TEST_DIR_ENV = "TIMELYPY_RAY_TEST_DIR"
"""A directory for the Ray temp dirs of this run (``scripts/test.sh`` sets it); else a new one."""

RAY_AUTH_VARIABLES = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
"""The environment variables that choose Ray's authentication mode and token."""


def pytest_configure(config):
    config.addinivalue_line("markers", "ray: tests that need a local Ray cluster")


def new_ray_base_dir() -> str:
    """A fresh, short directory for Ray's files (Ray's socket paths must stay under ~100 bytes)."""
    parent = os.environ.get(RAY_TEST_DIR_ENV) or ("/tmp" if os.path.isdir("/tmp") else None)
    return tempfile.mkdtemp(prefix="tpy-", dir=parent)


def ray_token_environment(token: str) -> Dict[str, str]:
    """The variables that make a Ray started in a new process use token authentication with
    ``token`` (and only it)."""
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token, "RAY_USAGE_STATS_ENABLED": "0"}


def processes_under(directory: str) -> List[Any]:
    """Live processes whose command line names ``directory``, and their descendants (psutil).

    Ray's daemons (gcs_server, raylet, agents) carry their session dir on the command line;
    worker processes rename themselves (``ray::...``) but are the raylet's children.
    """
    import psutil

    found = {}
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if directory in " ".join(proc.info["cmdline"] or ()):
                found[proc.pid] = proc
                for child in proc.children(recursive=True):
                    found[child.pid] = child
        except psutil.Error:
            continue
    found.pop(os.getpid(), None)
    return list(found.values())


LOOPBACK_ADDRESSES = ("127.0.0.1", "::1", "::ffff:127.0.0.1")


def non_loopback_listeners(processes: List[Any]) -> Dict[str, List[str]]:
    """``{address: [process names]}`` for the TCP listeners of ``processes`` that are not on a
    loopback address (empty when everything listens on loopback only)."""
    import psutil

    found: Dict[str, List[str]] = {}
    for proc in processes:
        try:
            for conn in proc.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN and conn.laddr.ip not in LOOPBACK_ADDRESSES:
                    found.setdefault(conn.laddr.ip, []).append(proc.name())
        except psutil.Error:
            continue
    return found


def stop_processes_under(directory: str, grace: float = 10.0) -> List[int]:
    """Wait up to ``grace`` s for the processes of :func:`processes_under` to exit, then
    terminate and (after 5 s more) kill the rest, by pid. Returns the pids that had to be
    signalled."""
    import psutil

    deadline = time.monotonic() + grace
    left = processes_under(directory)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = [p for p in left if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    for proc in left:
        try:
            proc.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(left, timeout=5)
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=5)
    return [p.pid for p in left]


_GCS_PROBE = """
import sys
from ray._raylet import GcsClient
try:
    GcsClient(address=sys.argv[1]).internal_kv_keys(b"", namespace=None, timeout=10)
    print("ACCEPTED")
except Exception as exc:
    print("REFUSED", type(exc).__name__, (str(exc).splitlines() or [""])[0][:300])
"""


def probe_ray_gcs(address: str, auth: Dict[str, str], timeout: float = 60.0) -> str:
    """Ask the GCS at ``address`` for its key list from a fresh process with only ``auth``.

    The process gets none of this process's Ray authentication variables and an empty home
    (so no ``~/.ray/auth_token`` to fall back on); ``auth`` adds some back. Returns
    ``"ACCEPTED"`` or ``"REFUSED <exception type> <first line of its message>"``.
    """
    env = {
        k: v for k, v in os.environ.items() if k not in RAY_AUTH_VARIABLES and k != "RAY_ADDRESS"
    }
    with tempfile.TemporaryDirectory(prefix="tpyhome-") as home:
        env["HOME"] = home
        env.update(auth)
        done = subprocess.run(
            [sys.executable, "-c", _GCS_PROBE, address],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    lines = done.stdout.strip().splitlines()
    if not lines:
        return f"NO ANSWER (exit {done.returncode}): {done.stderr[-500:]}"
    return lines[-1]


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
