"""Run one function on ``peers`` local OS processes connected by a :class:`SocketMesh`.

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
* All connections are authenticated with a random per-job secret (see :mod:`.mesh`).
* If a worker raises, :class:`~timelypy.errors.WorkerError` names it and carries its traceback.
  If a worker process dies without a result (killed, crashed, ``os._exit``),
  :class:`~timelypy.errors.WorkerDiedError` names it within a fraction of a second. Either way the
  other workers are terminated (their meshes also report the dead peer).
* No worker process outlives the call: every path out of it (result, error, timeout,
  ``KeyboardInterrupt``) terminates and then kills what is left, and each worker exits by itself
  if the launching process vanishes.

Why ``forkserver``: ``fork`` copies the parent as it is - its threads' locks (Ray, gRPC, logging
handlers, pytest's timeout thread), open sockets and the pipes of the other workers - which is
neither safe nor orphan-proof. ``spawn`` is clean but pays the interpreter start and every import
for each worker. ``forkserver`` forks each worker from a clean server process that has imported
this module once, so a worker starts in a few milliseconds after the first job and inherits
nothing from the launching process. As with ``spawn``, the launching script needs the usual
``if __name__ == "__main__":`` guard.
"""

from __future__ import annotations

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
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import cloudpickle

from timelypy.errors import (WaitTimeoutError, WorkerDiedError, WorkerError, describe_exception,
                             format_exception_safely)
from timelypy.communication.mesh import SocketMesh

__all__ = ["run_in_processes", "default_start_method", "WorkerMain"]

log = logging.getLogger("timelypy.workers")

WorkerMain = Callable[[int, int, SocketMesh], Any]
"""``worker_main(index, peers, mesh) -> result``."""

_SECONDARY_GRACE = 1.0
"""Seconds to wait for the root cause once a worker reports that a *peer* died."""

_EXIT_PARENT_GONE = 70


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


def _error_report(index: int, exc: BaseException) -> Dict[str, Any]:
    died_peer = None
    if isinstance(exc, WorkerDiedError) and exc.worker is not None and exc.worker != index:
        died_peer = exc.worker
    return {
        "type": type(exc).__qualname__,
        "message": describe_exception(exc),
        "traceback": format_exception_safely(exc),
        "died_peer": died_peer,
    }


def _child_main(
    index: int,
    peers: int,
    conn: multiprocessing.connection.Connection,
    payload: bytes,
    secret: bytes,
    sys_path: List[str],
    connect_timeout: float,
    startup_timeout: float,
) -> None:
    """Entry point of one worker process (runs in the child)."""
    # Ctrl-C goes to the whole process group; the launcher decides how its workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.path[:] = sys_path  # so that functions pickled by reference import as in the parent
    mesh: Optional[SocketMesh] = None
    try:
        listener, address = SocketMesh.listen(secret)
        conn.send(("address", address))
        if not conn.poll(startup_timeout):
            raise WaitTimeoutError(
                f"worker {index}: no peer addresses from the launcher within {startup_timeout} s"
            )
        tag, addresses = conn.recv()
        if tag != "addresses":  # pragma: no cover - protocol bug
            raise RuntimeError(f"worker {index}: unexpected launcher message {tag!r}")
        threading.Thread(target=_watch_parent, args=(conn,), name="timelypy-watch-parent",
                         daemon=True).start()
        worker_main = cloudpickle.loads(payload)
        mesh = SocketMesh(index, peers, listener, addresses, secret, connect_timeout)
        result = worker_main(index, peers, mesh)
        data = cloudpickle.dumps(result)
    except BaseException as exc:  # noqa: BLE001 - everything is reported to the launcher
        report = _error_report(index, exc)
        try:
            conn.send(("error", report))
        except OSError:
            pass
        if mesh is not None:
            # After the report: peers then see this worker die, and their own (secondary) errors
            # reach the launcher after this root cause.
            mesh.abort()
        sys.exit(1)
    try:
        conn.send_bytes(cloudpickle.dumps(("ok", data)))
    except OSError:
        pass  # the launcher is gone; the watchdog ends this process
    mesh.close()


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


class _Job:
    """The launcher's view of the worker processes: messages received, exits observed."""

    def __init__(self, processes: List[Any], conns: List[Any]) -> None:
        self.processes = processes
        self.conns = conns
        n = len(processes)
        self.addresses: List[Optional[Tuple[str, int]]] = [None] * n
        self.results: Dict[int, bytes] = {}
        self.errors: List[Tuple[int, Dict[str, Any]]] = []  # in arrival order
        self.deaths: List[int] = []  # in observation order
        self.secondary_since: Optional[float] = None
        self.open = set(range(n))  # pipes still readable
        self.running = set(range(n))  # processes not yet seen to exit

    def _handle(self, i: int, message: Any) -> None:
        tag = message[0]
        if tag == "address":
            self.addresses[i] = message[1]
        elif tag == "ok":
            self.results[i] = message[1]
        elif tag == "error":
            report = message[1]
            self.errors.append((i, report))
            if report["died_peer"] is not None and self.secondary_since is None:
                self.secondary_since = time.monotonic()
        else:  # pragma: no cover - protocol bug
            raise RuntimeError(f"unexpected message {tag!r} from worker {i}")

    def _drain(self, i: int) -> None:
        conn = self.conns[i]
        try:
            while i in self.open and conn.poll():
                raw = conn.recv_bytes()
                self._handle(i, cloudpickle.loads(raw))
        except (EOFError, OSError):
            self.open.discard(i)

    def pump(self, timeout: float) -> None:
        """Wait up to ``timeout`` for any message or exit, then take in everything available."""
        waitables: List[Any] = []
        for i in self.open:
            waitables.append(self.conns[i])
        for i in self.running:
            waitables.append(self.processes[i].sentinel)
        if waitables:
            multiprocessing.connection.wait(waitables, max(timeout, 0.0))
        for i in sorted(self.open):
            self._drain(i)
        for i in sorted(self.running):
            process = self.processes[i]
            if process.exitcode is not None or not process.is_alive():
                self._drain(i)  # a final message written just before exiting
                self.running.discard(i)
                if i not in self.results and not any(j == i for j, _ in self.errors):
                    self.deaths.append(i)

    def finished(self, i: int) -> bool:
        return i in self.results

    def check_failures(self) -> None:
        """Raise the error of the first failing worker, preferring root causes."""
        for i, report in self.errors:
            if report["died_peer"] is None:
                raise _worker_error(i, report)
        if self.deaths:
            i = self.deaths[0]
            process = self.processes[i]
            raise WorkerDiedError(
                f"worker {i} (pid {process.pid}) {_describe_exit(process)} before returning "
                f"a result",
                worker=i,
            )
        if self.errors and self.secondary_since is not None:
            if time.monotonic() - self.secondary_since >= _SECONDARY_GRACE:
                reporter, report = self.errors[0]
                dead = report["died_peer"]
                raise WorkerDiedError(
                    f"worker {dead} died (reported by worker {reporter}: {report['message']})",
                    worker=dead,
                    traceback_text=report["traceback"],
                )


def _worker_error(i: int, report: Dict[str, Any]) -> WorkerError:
    tb = report["traceback"]
    return WorkerError(
        f"worker {i} failed: {report['type']}: {report['message']}\n"
        f"--- traceback in worker {i} ---\n{tb.rstrip()}",
        worker=i,
        traceback_text=tb,
    )


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
            p.close()
        else:  # pragma: no cover - SIGKILL not delivered within 5 s
            log.error("worker process %s (pid %d) could not be stopped", p.name, p.pid)


@contextlib.contextmanager
def _main_without_missing_file():
    """Hide ``__main__.__file__`` while starting a process when it names no file (a program
    read from standard input): multiprocessing would try to re-run it in the child and fail.
    The build function travels by value (cloudpickle), so the child does not need it."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if path is None or os.path.exists(path):
        yield
        return
    del main.__file__
    try:
        yield
    finally:
        main.__file__ = path


def unpickle_results(payloads: Dict[int, bytes], workers: int, where: str) -> List[Any]:
    """The workers' cloudpickled results in index order; a WorkerError names a worker whose
    result cannot be unpickled here."""
    results = []
    for i in range(workers):
        try:
            results.append(cloudpickle.loads(payloads[i]))
        except Exception as exc:
            raise WorkerError(
                f"the result of worker {i} could not be unpickled in the {where}: "
                f"{type(exc).__name__}: {exc}",
                worker=i,
            ) from exc
    return results


def run_in_processes(
    worker_main: WorkerMain,
    peers: int,
    *,
    timeout: Optional[float] = None,
    start_method: Optional[str] = None,
    connect_timeout: float = 30.0,
    startup_timeout: float = 60.0,
    grace: float = 2.0,
) -> List[Any]:
    """Run ``worker_main(index, peers, mesh)`` in ``peers`` processes; return the results.

    Parameters:
        worker_main: the function every worker runs (cloudpickled; closures work).
        peers: the number of worker processes.
        timeout: seconds for the whole job (``None``: no limit on the job itself; every internal
            wait is still bounded).
        start_method: ``"forkserver"`` (default where available), ``"spawn"`` or ``"fork"``.
        connect_timeout: seconds for the workers' mesh to form.
        startup_timeout: seconds for all worker processes to start and report their address.
        grace: seconds a worker gets to exit before it is terminated, then killed.

    Returns the results in index order. Raises :class:`~timelypy.errors.WorkerError` for the first
    worker that raised (message names it and includes its traceback),
    :class:`~timelypy.errors.WorkerDiedError` for a worker process that died without a result,
    and :class:`~timelypy.errors.WaitTimeoutError` when ``timeout`` or ``startup_timeout`` runs
    out. All worker processes are gone when this returns or raises.
    """
    if peers < 1:
        raise ValueError(f"peers must be at least 1, got {peers}")
    try:
        payload = cloudpickle.dumps(worker_main)
    except Exception as exc:
        if hasattr(exc, "add_note"):  # Python >= 3.11
            exc.add_note("timelypy: worker_main must be picklable with cloudpickle to reach the "
                         "worker processes")
        raise
    secret = secrets.token_bytes(32)
    ctx = _context(start_method)
    start = time.monotonic()
    deadline = None if timeout is None else start + timeout
    processes: List[Any] = []
    conns: List[Any] = []
    clean = False
    try:
        for i in range(peers):
            parent_end, child_end = ctx.Pipe(duplex=True)
            conns.append(parent_end)
            process = ctx.Process(
                target=_child_main,
                args=(i, peers, child_end, payload, secret, list(sys.path), connect_timeout,
                      startup_timeout),
                name=f"timelypy-worker-{i}",
            )
            processes.append(process)
            with _main_without_missing_file():
                process.start()
            child_end.close()
        job = _Job(processes, conns)

        # Phase 1: every worker reports its listening address.
        startup_deadline = start + startup_timeout
        if deadline is not None:
            startup_deadline = min(startup_deadline, deadline)
        while any(a is None for a in job.addresses):
            job.check_failures()
            remaining = startup_deadline - time.monotonic()
            if remaining <= 0:
                missing = [i for i, a in enumerate(job.addresses) if a is None]
                raise WaitTimeoutError(
                    f"workers {missing} did not start within "
                    f"{min(startup_timeout, timeout or startup_timeout)} s"
                )
            job.pump(min(remaining, 0.5))
        for conn in conns:
            try:
                conn.send(("addresses", list(job.addresses)))
            except OSError:
                pass  # that worker died; the next pump notices

        # Phase 2: results.
        while len(job.results) < peers:
            job.check_failures()
            wait = 0.5
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    missing = [i for i in range(peers) if i not in job.results]
                    raise WaitTimeoutError(
                        f"workers {missing} did not finish within {timeout} s"
                    )
                wait = min(wait, remaining)
            if job.secondary_since is not None:
                wait = min(wait, 0.1)
            job.pump(wait)
        results = unpickle_results(job.results, peers, "launcher")
        clean = True
        return results
    finally:
        _stop(processes, conns, grace, clean)
