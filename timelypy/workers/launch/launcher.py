"""The process launcher: one function on ``peers`` local OS processes joined by a socket mesh.

:func:`run_in_processes` is the process launcher of the ``processes`` backend::

    def worker_main(index, peers, mesh):
        mesh.broadcast(("hello from", index))
        ...
        return something_picklable

    results = run_in_processes(worker_main, 3, timeout=60)   # [result of 0, of 1, of 2]

What it guarantees:

* Each worker runs in a fresh process (``forkserver`` on Linux by default, else ``spawn``).
  ``worker_main`` travels with cloudpickle, so closures and lambdas work; the return value comes
  back with cloudpickle too.
* All connections are authenticated with a random per-job secret (see
  :mod:`timelypy.communication.mesh`).
* If a worker raises, :class:`~timelypy.errors.WorkerError` names it and carries its traceback.
  If a worker process dies without a result (killed, crashed, ``os._exit``),
  :class:`~timelypy.errors.WorkerDiedError` names it within a fraction of a second. Either way the
  other workers are terminated (their meshes also report the dead peer). The worker body and the
  choice of the failure to raise are shared with the Ray backend (:mod:`.supervise`).
* Liveness: each worker process sends a heartbeat on its pipe to the launcher (a daemon thread,
  every ``heartbeat_timeout / 5`` s, at most 1 s); a worker silent for ``heartbeat_timeout``
  seconds (stopped, frozen, blocked outside Python) is killed and reported as
  :class:`~timelypy.errors.WorkerHungError`, even when the job has no ``timeout``.
* No worker process outlives the call: every path out of it (result, error, timeout, ``cancel``,
  ``KeyboardInterrupt``) terminates and then kills what is left, and each worker exits by itself
  if the launching process vanishes. A job still running when the interpreter exits (in a
  daemon thread) has its workers killed at exit, so it never keeps the interpreter alive.

Why ``forkserver``: ``fork`` copies the parent as it is - its threads' locks (Ray, gRPC, logging
handlers, pytest's timeout thread), open sockets and the pipes of the other workers - which is
neither safe nor orphan-proof. ``spawn`` is clean but pays the interpreter start and every import
for each worker. ``forkserver`` forks each worker from a clean server process that has imported
this module once, so a worker starts in a few milliseconds after the first job and inherits
nothing from the launching process. As with ``spawn``, the launching script needs the usual
``if __name__ == "__main__":`` guard.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import multiprocessing
import multiprocessing.connection
import os
import secrets
import signal
import sys
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import cloudpickle

from ...communication.credit import DEFAULT_WINDOW
from ...communication.mesh import Address, MeshSettings, SocketMesh
from ...errors import WaitTimeoutError
from .defaults import apply_engine_settings, engine_settings
from .supervise import (
    HEARTBEAT_TIMEOUT,
    Supervisor,
    WorkerMain,
    error_outcome,
    heartbeat_interval,
    pickle_for_workers,
    run_worker_main,
)

__all__ = ["run_in_processes", "default_start_method", "WorkerMain"]

log = logging.getLogger(__name__)

_EXIT_PARENT_GONE = 70

_ADDRESS = "address"
"""Tag of a worker's first message to the launcher: ``(_ADDRESS, (host, port))``."""
_ADDRESSES = "addresses"
"""Tag of the launcher's answer: ``(_ADDRESSES, [address of every worker])``."""
_HEARTBEAT = "heartbeat"
"""Tag of a worker's periodic sign of life: ``(_HEARTBEAT, None)``."""

_CANCEL_GRACE = 0.5
"""Seconds a cancelled job's workers get after SIGTERM before SIGKILL."""

_LIVE_JOBS: Dict[int, List[Any]] = {}
"""The worker processes of every job still running, by ``id`` of the list (for the exit hook)."""
_exit_hook_registered = False


def default_start_method() -> str:
    """``"forkserver"`` where the platform has it (Linux, macOS), else ``"spawn"``."""
    methods = multiprocessing.get_all_start_methods()
    return "forkserver" if "forkserver" in methods else "spawn"


def _context(start_method: Optional[str]) -> multiprocessing.context.BaseContext:
    method = start_method or default_start_method()
    if method not in ("forkserver", "spawn", "fork"):
        raise ValueError(f"unknown start method {method!r}: use 'forkserver', 'spawn' or 'fork'")
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":
        # Import the worker side once, in the server; takes effect when the server starts.
        ctx.set_forkserver_preload([__name__])
    return ctx


# ------------------------------------------------------------------------------------------
# the worker process


def _watch_parent(conn: multiprocessing.connection.Connection) -> None:
    """Exit this worker process as soon as the launcher's end of the pipe closes."""
    try:
        while True:
            conn.recv_bytes()
    except (EOFError, OSError):
        pass
    os._exit(_EXIT_PARENT_GONE)


def _sender(conn: multiprocessing.connection.Connection) -> Callable[[Any], None]:
    """A function sending messages to the launcher, safe to call from several threads."""
    lock = threading.Lock()

    def send(message: Any) -> None:
        data = cloudpickle.dumps(message)
        with lock:
            try:
                conn.send_bytes(data)
            except OSError:
                pass  # the launcher is gone; the watchdog ends this process

    return send


def _heartbeat(send: Callable[[Any], None], interval: float) -> None:
    """Tell the launcher every ``interval`` seconds that this process is alive."""
    while True:
        time.sleep(interval)
        send((_HEARTBEAT, None))


def _join_launcher(
    index: int,
    conn: multiprocessing.connection.Connection,
    send: Callable[[Any], None],
    secret: bytes,
    startup_timeout: float,
) -> Tuple[Any, List[Address]]:
    """Listen, tell the launcher where, and receive every worker's address."""
    listener, address = SocketMesh.listen(secret)
    send((_ADDRESS, address))
    if not conn.poll(startup_timeout):
        listener.close()
        raise WaitTimeoutError(
            f"worker {index}: no peer addresses from the launcher within {startup_timeout} s"
        )
    tag, addresses = conn.recv()
    if tag != _ADDRESSES:  # pragma: no cover - protocol bug
        raise RuntimeError(f"worker {index}: unexpected launcher message {tag!r}")
    return listener, addresses


def _child_main(
    index: int,
    peers: int,
    conn: multiprocessing.connection.Connection,
    payload: bytes,
    secret: bytes,
    sys_path: List[str],
    settings: MeshSettings,
    startup_timeout: float,
    heartbeat: Optional[float] = None,
    environment: Optional[Dict[str, Optional[str]]] = None,
) -> None:
    """Entry point of one worker process (runs in the child)."""
    apply_engine_settings(environment or {})
    # Ctrl-C goes to the whole process group; the launcher decides how its workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.path[:] = sys_path  # so that functions pickled by reference import as in the parent
    report = _sender(conn)
    if heartbeat is not None:
        threading.Thread(
            target=_heartbeat, args=(report, heartbeat), name="timelypy-heartbeat", daemon=True
        ).start()
    try:
        listener, addresses = _join_launcher(index, conn, report, secret, startup_timeout)
    except BaseException as exc:  # noqa: BLE001 - reported to the launcher
        report(error_outcome(index, exc))
        sys.exit(1)
    threading.Thread(
        target=_watch_parent, args=(conn,), name="timelypy-watch-parent", daemon=True
    ).start()
    if not run_worker_main(index, peers, listener, addresses, secret, settings, payload, report):
        sys.exit(1)


# ------------------------------------------------------------------------------------------
# the launching process


def _describe_exit(process: multiprocessing.process.BaseProcess) -> str:
    code = process.exitcode
    if code is None:
        return "is still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"
    return f"exited with code {code}"


class _Processes:
    """The launcher's view of the worker processes: their pipes, addresses and exits."""

    def __init__(
        self,
        processes: List[Any],
        conns: List[Any],
        heartbeat_timeout: Optional[float] = None,
        cancel: Optional[threading.Event] = None,
    ) -> None:
        self.processes = processes
        self.conns = conns
        n = len(processes)
        self.supervisor = Supervisor(n, self.describe, heartbeat_timeout, cancel)
        self.addresses: List[Optional[Address]] = [None] * n
        self.open = set(range(n))  # pipes still readable
        self.running = set(range(n))  # processes not yet seen to exit

    def describe(self, i: int) -> str:
        """Worker ``i`` with its pid, for messages."""
        return f"worker {i} (pid {self.processes[i].pid})"

    def _handle(self, i: int, message: Any) -> None:
        self.supervisor.heard(i)
        if message[0] == _HEARTBEAT:
            return
        if message[0] == _ADDRESS:
            self.addresses[i] = message[1]
        else:
            self.supervisor.take(i, message)

    def _drain(self, i: int) -> None:
        conn = self.conns[i]
        try:
            while i in self.open and conn.poll():
                self._handle(i, cloudpickle.loads(conn.recv_bytes()))
        except (EOFError, OSError):
            self.open.discard(i)

    def pump(self, timeout: float) -> None:
        """Wait up to ``timeout`` for any message or exit, then take in everything available."""
        waitables: List[Any] = [self.conns[i] for i in self.open]
        waitables += [self.processes[i].sentinel for i in self.running]
        if waitables:
            multiprocessing.connection.wait(waitables, max(timeout, 0.0))
        for i in sorted(self.open):
            self._drain(i)
        for i in sorted(self.running):
            process = self.processes[i]
            if process.exitcode is not None or not process.is_alive():
                self._drain(i)  # a final message written just before exiting
                self.running.discard(i)
                self.supervisor.died(
                    i,
                    f"worker {i} (pid {process.pid}) "
                    f"{_describe_exit(process)} before returning a result",
                )
        for i, silence in self.supervisor.silent():
            if i in self.running:
                self.processes[i].kill()  # a stopped process ignores SIGTERM
            self.supervisor.died(i, self.supervisor.hung_message(i, silence), hung=True)

    def missing_addresses(self) -> List[int]:
        """The workers that have not reported their listening address yet."""
        return [i for i, a in enumerate(self.addresses) if a is None]

    def send_addresses(self) -> None:
        """Hand every worker the addresses of all of them (the mesh then forms)."""
        for conn in self.conns:
            try:
                conn.send((_ADDRESSES, list(self.addresses)))
            except OSError:
                pass  # that worker died; the next pump notices


def _kill_leftovers() -> None:
    """At interpreter exit: kill the workers of every job still running (a job in a daemon
    thread, a session that was not closed)."""
    for processes in list(_LIVE_JOBS.values()):
        for p in list(processes):
            try:
                if p.pid is not None and p.is_alive():
                    log.warning("killing worker process %s (pid %d) at exit", p.name, p.pid)
                    p.kill()
                    p.join(1.0)
            except ValueError:  # closed by its own job meanwhile
                pass


def _track(processes: List[Any]) -> int:
    """Remember a job's processes until it ends (see :func:`_kill_leftovers`)."""
    global _exit_hook_registered
    if not _exit_hook_registered:
        # Registered after multiprocessing's own exit hook, so it runs first: multiprocessing
        # would otherwise join the (non-daemonic) workers at exit, forever.
        atexit.register(_kill_leftovers)
        _exit_hook_registered = True
    _LIVE_JOBS[id(processes)] = processes
    return id(processes)


def _stop(processes: Sequence[Any], conns: Sequence[Any], grace: float, clean: bool) -> None:
    """Make sure no worker process survives: wait (if ``clean``), terminate, then kill."""
    started = [p for p in processes if p.pid is not None]
    deadline = time.monotonic() + grace
    if clean:
        for p in started:
            p.join(max(deadline - time.monotonic(), 0.0))
    for p in started:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + grace
    for p in started:
        p.join(max(deadline - time.monotonic(), 0.0))
    for p in started:
        if p.is_alive():
            log.warning("worker process %s (pid %d) ignored SIGTERM; killing it", p.name, p.pid)
            p.kill()
            p.join(5.0)
    for c in conns:
        c.close()
    for p in started:
        if not p.is_alive():
            try:
                p.close()
            except ValueError:  # pragma: no cover - closed already (the exit hook raced us)
                pass
        else:  # pragma: no cover - SIGKILL not delivered within 5 s
            log.error("worker process %s (pid %d) could not be stopped", p.name, p.pid)


@contextlib.contextmanager
def _main_without_missing_file() -> Iterator[None]:
    """Hide ``__main__.__file__`` while starting a process when it names no file (a program
    read from standard input): multiprocessing would try to re-run it in the child and fail.
    The build function travels by value (cloudpickle), so the child does not need it."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or path is None or os.path.exists(path):
        yield
        return
    del main.__file__
    try:
        yield
    finally:
        main.__file__ = path


def _start(
    ctx: Any,
    peers: int,
    payload: bytes,
    secret: bytes,
    settings: MeshSettings,
    startup_timeout: float,
    heartbeat: Optional[float],
    processes: List[Any],
    conns: List[Any],
) -> None:
    """Start the worker processes, appending each (and its pipe) as soon as it exists."""
    for i in range(peers):
        parent_end, child_end = ctx.Pipe(duplex=True)
        conns.append(parent_end)
        process = ctx.Process(
            target=_child_main,
            args=(
                i,
                peers,
                child_end,
                payload,
                secret,
                list(sys.path),
                settings,
                startup_timeout,
                heartbeat,
                engine_settings(),
            ),
            name=f"timelypy-worker-{i}",
        )
        processes.append(process)
        with _main_without_missing_file():
            process.start()
        child_end.close()


def _gather_addresses(job: _Processes, deadline: float, limit: float) -> None:
    """Wait until every worker reported its listening address; hand all of them to everyone."""
    job.supervisor.wait(
        job.pump,
        lambda: not job.missing_addresses(),
        deadline,
        lambda: f"workers {job.missing_addresses()} did not start within {limit} s",
    )
    job.send_addresses()


def _gather_outcomes(job: _Processes, deadline: Optional[float], timeout: Optional[float]) -> None:
    """Wait until every worker returned, raised or died (raising failures as they appear)."""
    supervisor = job.supervisor
    supervisor.wait(
        job.pump,
        supervisor.all_answered,
        deadline,
        lambda: f"workers {supervisor.unanswered()} did not finish within {timeout} s",
    )


def run_in_processes(
    worker_main: WorkerMain,
    peers: int,
    *,
    timeout: Optional[float] = None,
    start_method: Optional[str] = None,
    connect_timeout: float = 30.0,
    mesh_window: int = DEFAULT_WINDOW,
    mesh_send_timeout: float = 120.0,
    startup_timeout: float = 60.0,
    grace: float = 2.0,
    heartbeat_timeout: Optional[float] = HEARTBEAT_TIMEOUT,
    cancel: Optional[threading.Event] = None,
) -> List[Any]:
    """Run ``worker_main(index, peers, mesh)`` in ``peers`` processes; return the results.

    Parameters:
        worker_main: the function every worker runs (cloudpickled; closures work).
        peers: the number of worker processes.
        timeout: seconds for the whole job (``None``: no limit on the job itself; every internal
            wait is still bounded).
        start_method: ``"forkserver"`` (default where available), ``"spawn"`` or ``"fork"``.
        connect_timeout: seconds for the workers' mesh to form.
        mesh_window: flow-control bytes in flight per link before a sender waits for the
            receiving worker to consume (default 8 MiB; 0: off).
        mesh_send_timeout: seconds one send may wait for a receiver that does not consume.
        startup_timeout: seconds for all worker processes to start and report their address.
        grace: seconds a worker gets to exit before it is terminated, then killed.
        heartbeat_timeout: seconds a running worker may send no heartbeat before it is killed
            as hung (:class:`~timelypy.errors.WorkerHungError`); ``None``: no check.
        cancel: an event; once set, the job stops within about a second: its workers are
            terminated, then killed, and :class:`~timelypy.errors.WaitTimeoutError` is raised.

    Returns the results in index order. Raises :class:`~timelypy.errors.WorkerError` for the first
    worker that raised (message names it and includes its traceback),
    :class:`~timelypy.errors.WorkerDiedError` for a worker process that died without a result,
    and :class:`~timelypy.errors.WaitTimeoutError` when ``timeout`` or ``startup_timeout`` runs
    out. All worker processes are gone when this returns or raises.
    """
    if peers < 1:
        raise ValueError(f"peers must be at least 1, got {peers}")
    payload = pickle_for_workers(worker_main, "worker_main", "the worker processes")
    secret = secrets.token_bytes(32)
    ctx = _context(start_method)
    start = time.monotonic()
    deadline = None if timeout is None else start + timeout
    startup_deadline = (
        start + startup_timeout if deadline is None else min(start + startup_timeout, deadline)
    )
    heartbeat = heartbeat_interval(heartbeat_timeout)
    processes: List[Any] = []
    conns: List[Any] = []
    clean = False
    tracked = _track(processes)
    try:
        settings = MeshSettings(connect_timeout, mesh_window, mesh_send_timeout)
        log.info(
            "processes: starting %d worker process(es) (%s)",
            peers,
            start_method or default_start_method(),
        )
        _start(ctx, peers, payload, secret, settings, startup_timeout, heartbeat, processes, conns)
        job = _Processes(processes, conns, heartbeat_timeout, cancel)
        _gather_addresses(job, startup_deadline, min(startup_timeout, timeout or startup_timeout))
        _gather_outcomes(job, deadline, timeout)
        results = job.supervisor.results_in_order("launcher")
        clean = True
        return results
    finally:
        cancelled = cancel is not None and cancel.is_set()
        _stop(processes, conns, _CANCEL_GRACE if cancelled else grace, clean)
        _LIVE_JOBS.pop(tracked, None)
        log.debug(
            "processes: %d worker process(es) stopped after %.3f s%s",
            peers,
            time.monotonic() - start,
            "" if clean else " (the job failed or was cancelled)",
        )
