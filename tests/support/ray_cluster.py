"""Helpers for the tests that start Ray clusters: temp dirs, tokens, process checks by directory.

Used by ``tests/conftest.py`` (the session's Ray), the Ray tests and ``scripts/test.sh`` (which
stops what an interrupted run left behind). Nothing here imports Ray at module level.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List

RAY_TEST_DIR_ENV = "TIMELYPY_RAY_TEST_DIR"
"""A directory for the Ray temp dirs of this run (``scripts/test.sh`` sets it); else a new one."""

RAY_AUTH_VARIABLES = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
"""The environment variables that choose Ray's authentication mode and token."""


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
