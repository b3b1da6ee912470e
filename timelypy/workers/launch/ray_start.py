"""Starting and stopping the Ray that timelypy uses when the caller has not connected one.

:func:`ensure_ray` connects the process to Ray as the ``ray`` backend does (the connected Ray;
else ``address`` or ``RAY_ADDRESS``; else a new local Ray); :func:`shutdown` ends a Ray that it
started. Both are also exported by :mod:`timelypy.workers.launch.ray_actors`.

A local Ray started here

* survives the thread that started it: Ray forks a local cluster's ``gcs_server`` and
  ``raylet`` with ``PR_SET_PDEATHSIG``, which Linux fires when the *thread* that forked them
  ends, and a session's job thread ends with the session. ``ray.init`` therefore runs in the
  main thread, or else in a daemon thread of this module that lives as long as the process;
* ends with the process however it ends: beside it runs a watchdog
  (:mod:`timelypy.workers.launch.ray_watchdog`) that stops the processes Ray leaves behind (the
  raylet's agents and workers get no death signal and outlived a ``SIGKILL``-ed driver by more
  than a minute);
* stops in under a second with :func:`shutdown`, which an exit hook also runs (before Ray's
  own, which pauses half a second and waits a second for the autoscaler monitor).
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import subprocess
import sys
import threading
from typing import Any, Callable, Dict, Optional, Tuple

from ...errors import WaitTimeoutError

__all__ = ["ensure_ray", "generation", "import_ray", "shutdown"]

log = logging.getLogger(__name__)

generation = 0
"""Counts the Rays this process connected to through :func:`ensure_ray` (an actor class made
for one Ray must be made again for the next)."""

_started_here = False  # ensure_ray called ray.init (and shutdown may call ray.shutdown)
_started_by = 0  # the pid of the process that did (a forked child must not stop its Ray)


def import_ray() -> Any:
    """The ``ray`` module, or :class:`ImportError` saying how to install it."""
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the 'ray' backend needs Ray: pip install 'timelypy[ray]' (ray[default]==2.60.0)"
        ) from exc
    return ray


def ensure_ray(address: Optional[str] = None, **init_kwargs: Any) -> Any:
    """Connect this process to Ray as timelypy's Ray backend does; return the ``ray`` module.

    * Already connected (``ray.is_initialized()``): that Ray, as it is (``init_kwargs`` are
      then ignored).
    * ``address`` (``"auto"``, ``"host:port"``, ``"ray://..."``) or ``RAY_ADDRESS``: connect.
    * Neither: start a new local Ray (``address="local"``: never a stray cluster of this
      machine) listening on loopback only (unless ``_node_ip_address`` is given), no
      dashboard, worker output not forwarded, Ray's defaults otherwise (token
      authentication); ``init_kwargs`` go to ``ray.init``.

    A local Ray started here serves every later call of the process, survives the thread that
    called this (``ray.init`` runs in the main thread or in a thread that lives as long as the
    process), is watched by a process that ends all of its processes when this process ends
    however it ends (Linux), and is stopped by :func:`shutdown` in under a second or at exit.
    """
    global _started_here, _started_by, generation
    ray = import_ray()
    with _init_lock:
        if ray.is_initialized():
            return ray
        kwargs: Dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        kwargs.update(init_kwargs)
        local = address is None and not os.environ.get("RAY_ADDRESS")
        if local:
            # No cluster named: start a local Ray (never silently attach to a stray one). Its
            # security is Ray's default (token authentication); nothing here switches it off.
            address = "local"
        generation += 1  # an actor class belongs to the Ray it was defined for
        _stop_watchdog()  # of a Ray started here before and shut down by the caller
        before = _local_node(ray)
        if local:
            _in_owner_thread(lambda: _init_on_loopback(ray, kwargs))
        else:
            _in_owner_thread(lambda: ray.init(address=address, **kwargs))
        _started_here = True
        _started_by = os.getpid()
        node = _local_node(ray)
        if local and node is not None and node is not before:
            _start_watchdog(node.get_session_dir_path())
            _register_exit_hook()
        return ray


def _init_on_loopback(ray: Any, kwargs: Dict[str, Any]) -> Any:
    """``ray.init`` of a new local Ray whose processes listen on 127.0.0.1 only.

    Ray 2.60 takes the address of the machine's outgoing interface as a new node's address (its
    GCS, raylet, agents and workers then listen on every interface) unless it runs in its
    single-machine mode, which ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` selects when ``ray`` is
    first imported; ``ray.init`` has no parameter for it (``_node_ip_address="127.0.0.1"`` is
    turned back into the outgoing address). Rather than set a variable for the whole process,
    the constant Ray read from it is switched for the duration of this call. An explicit
    ``_node_ip_address`` is left to Ray.
    """
    constants = getattr(getattr(ray, "_private", None), "ray_constants", None)
    if (
        "_node_ip_address" in kwargs
        or constants is None
        or not getattr(constants, "ENABLE_RAY_CLUSTER", False)
    ):
        return ray.init(address="local", **kwargs)
    constants.ENABLE_RAY_CLUSTER = False
    try:
        return ray.init(address="local", **kwargs)
    finally:
        constants.ENABLE_RAY_CLUSTER = True


def _local_node(ray: Any) -> Any:
    """The Ray node object of this process (set when ``ray.init`` started a local Ray)."""
    return getattr(getattr(getattr(ray, "_private", None), "worker", None), "_global_node", None)


_exit_hook_registered = False


def _register_exit_hook() -> None:
    global _exit_hook_registered
    if not _exit_hook_registered:
        atexit.register(_shutdown_at_exit)
        _exit_hook_registered = True


# Ray starts a local cluster's gcs_server and raylet with PR_SET_PDEATHSIG, which Linux fires
# when the *thread* that forked them ends - not the process. A session calls ``run_ray`` from a
# job thread that ends with the session, so ray.init runs in a thread that lives as long as the
# process (or in the main thread, which does too).
_init_lock = threading.RLock()
_owner: Optional["_OwnerThread"] = None
_RAY_INIT_TIMEOUT = 600.0
"""Seconds a caller waits (at most) for ``ray.init`` in the owner thread to return."""


class _OwnerThread(threading.Thread):
    """A daemon thread that runs the calls given to it (``ray.init``) and never ends, so that
    the processes it forks keep their parent thread for as long as the process lives."""

    def __init__(self) -> None:
        super().__init__(name="timelypy-ray-owner", daemon=True)
        self.calls: "queue.Queue[Tuple[Callable[[], Any], queue.Queue]]" = queue.Queue()

    def run(self) -> None:
        while True:
            call, answer = self.calls.get()
            try:
                answer.put((True, call()))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                answer.put((False, exc))


def _in_owner_thread(call: Callable[[], Any]) -> Any:
    """``call()`` in the main thread if this is it, else in the process's Ray owner thread."""
    global _owner
    if threading.current_thread() is threading.main_thread():
        return call()
    if _owner is None or not _owner.is_alive():
        _owner = _OwnerThread()
        _owner.start()
    answer: "queue.Queue[Tuple[bool, Any]]" = queue.Queue()
    _owner.calls.put((call, answer))
    try:  # ray.init bounds its own waits (GCS, raylet start-up); this one only follows it
        ok, value = answer.get(timeout=_RAY_INIT_TIMEOUT)
    except queue.Empty:
        raise WaitTimeoutError(
            f"ray.init did not return within {_RAY_INIT_TIMEOUT} s (in the thread {_owner.name!r})"
        ) from None
    if not ok:
        raise value
    return value


_watchdog: Optional[subprocess.Popen] = None

_WATCHDOG_STOP = 8.0
"""Seconds :func:`shutdown` waits (at most) for the watchdog to stop what Ray left running."""


def _start_watchdog(session_dir: str) -> None:
    """Start the process that ends this local Ray's processes when this process ends (Linux).

    Ray kills its daemons with the driver, but not the raylet's children (the dashboard and
    runtime-env agents outlived a ``SIGKILL``-ed driver by more than a minute): see
    :mod:`timelypy.workers.launch.ray_watchdog`.
    """
    global _watchdog
    if not sys.platform.startswith("linux"):
        return
    from . import ray_watchdog

    log_path = os.path.join(session_dir, "logs", "timelypy_watchdog.err")
    try:
        with open(log_path, "ab") as err:  # the child keeps its own copy of the descriptor
            _watchdog = subprocess.Popen(
                [
                    sys.executable,
                    "-I",
                    os.path.abspath(ray_watchdog.__file__),
                    str(os.getpid()),
                    session_dir,
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
                close_fds=True,
            )
    except OSError as exc:  # no usable sys.executable (an embedded interpreter), ...
        log.warning(
            "could not start the watchdog of the local Ray (%s): if this process is "
            "killed, Ray's agents may outlive it",
            exc,
        )


def _stop_watchdog() -> None:
    """Ask the watchdog to stop what is left of the Ray it watches, and wait (bounded)."""
    global _watchdog
    watchdog, _watchdog = _watchdog, None
    if watchdog is None:
        return
    try:
        assert watchdog.stdin is not None
        watchdog.stdin.write(b"stop\n")
        watchdog.stdin.close()
    except OSError:  # it is gone already
        pass
    try:
        watchdog.wait(timeout=_WATCHDOG_STOP)
    except subprocess.TimeoutExpired:
        log.warning(
            "the Ray watchdog (pid %d) did not finish within %s s; killing it",
            watchdog.pid,
            _WATCHDOG_STOP,
        )
        watchdog.kill()
        watchdog.wait(timeout=_WATCHDOG_STOP)


def shutdown() -> None:
    """Shut down (or disconnect from) the Ray that :func:`ensure_ray` started or connected (the
    ``ray`` backend calls it); a no-op otherwise.

    A Ray the caller initialized is left alone. A local Ray started here is stopped with its
    processes, the raylet's agents and workers included, before this returns (under a second
    here). The next :func:`ensure_ray` starts or connects a new one.
    """
    global _started_here, _watchdog, generation
    with _init_lock:
        if not _started_here:
            return
        _started_here = False
        generation += 1
        if os.getpid() != _started_by:  # a forked child: the Ray and the watchdog are its parent's
            _watchdog = None
            return
        ray = import_ray()
        try:
            if ray.is_initialized():
                _stop_monitor(ray)
                ray.shutdown()
        finally:
            _stop_watchdog()


def _stop_monitor(ray: Any) -> None:
    """Kill the autoscaler monitor of the local Ray this module started, before ``ray.shutdown``.

    ``ray.shutdown`` stops its processes one after the other, each with ``SIGTERM`` and a
    second's grace; the monitor used the whole second every time here (it sleeps between
    rounds), and a ``SIGTERM`` while the GCS is up makes it report "The autoscaler failed" to
    the driver. A local, fixed-size cluster's monitor keeps nothing worth a graceful stop.
    """
    node = _local_node(ray)
    if node is None:
        return
    for info in node.all_processes.get("monitor", ()):
        proc = info.process
        if proc.poll() is None:
            try:
                proc.kill()
                proc.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):  # gone, or Ray's own stop follows
                pass


def _shutdown_at_exit() -> None:
    """Run before Ray's own exit hook (registered later, so called earlier): the same stop as
    :func:`shutdown`, without Ray's half-second pause for log lines this Ray does not forward."""
    try:
        shutdown()
    except Exception:  # Ray's own hook still runs after this one
        log.warning("stopping the local Ray at exit failed", exc_info=True)
