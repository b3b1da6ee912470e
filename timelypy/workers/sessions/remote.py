"""The session client for workers elsewhere: commands over authenticated connections, bounded.

A :class:`RemoteClient` runs the backend's job in a daemon thread (every worker runs the command
loop of :func:`~.serving.serve`), waits until every worker connected back to its
:class:`~.rendezvous.DriverListener` and reported its handles, then sends commands and collects
the replies, every wait bounded. A command that fails on a worker (``FAILED``) raises
:class:`~timelypy.errors.SessionCommandError` and the session goes on; a worker that fails, dies
or hangs (the backend's supervisor sees it, with heartbeats) makes :attr:`RemoteClient.failure`,
which every later request raises. :meth:`RemoteClient.close` and :meth:`RemoteClient.abort`
honour their bounds: on a backend that takes a ``cancel`` event, what does not stop in time is
killed. A client still open when the interpreter exits is aborted then.
"""

from __future__ import annotations

import atexit
import logging
import secrets
import threading
import time as _time
import weakref
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_for_connections
from multiprocessing.reduction import ForkingPickler
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ...communication import wire
from ...errors import (
    SessionCommandError,
    SessionInputError,
    StallError,
    TimelyError,
    WaitTimeoutError,
    WorkerDiedError,
    WorkerError,
)
from ..launch.backends import Backend
from ..worker import Build
from . import rendezvous
from .commands import CLOSE, ERROR, FAILED, HELLO, WAIT, Command
from .handles import Dataflow
from .serving import error_parts, serve

__all__ = ["RemoteClient", "Request", "STOP_WAIT"]

log = logging.getLogger(__name__)

Request = Sequence[Tuple[int, Command]]
"""``[(worker index, command), ...]``: commands to several workers, answered together."""

STOP_WAIT = 5.0
"""Seconds to wait (at most) for a cancelled job to kill its workers and end."""

_POLL = 0.1
_LIVE: "weakref.WeakSet[RemoteClient]" = weakref.WeakSet()
_registered = False


def _ready(conns: List[Connection]) -> List[Connection]:
    """The connections of ``conns`` with something to read, after at most :data:`_POLL` s."""
    return [c for c in wait_for_connections(conns, _POLL) if isinstance(c, Connection)]


def _abort_live_clients() -> None:
    """At interpreter exit: stop the workers of every session that was not closed."""
    for client in list(_LIVE):
        log.warning(
            "a driver session with %d workers was not closed; stopping its workers", client.workers
        )
        client.abort()


def _register_exit_hook() -> None:
    global _registered
    if not _registered:
        atexit.register(_abort_live_clients)
        _registered = True


class RemoteClient:
    """Workers elsewhere, each connected back to this client (see the module docstring)."""

    def __init__(
        self,
        backend: Backend,
        dataflow: Dataflow,
        workers: int,
        timeout: float,
        options: Dict[str, Any],
    ) -> None:
        self.workers = workers
        self.failure: Optional[BaseException] = None
        """The failure of a worker or of the job; every later request raises it."""
        self.cancel = threading.Event()
        host = options.pop("driver_host", "127.0.0.1")
        if backend.cancellable:
            options["cancel"] = self.cancel
        secret = secrets.token_bytes(32)
        self._conns: List[Optional[Connection]] = [None] * workers
        self._hellos: List[Optional[Dict[str, Any]]] = [None] * workers
        self._job_error: List[BaseException] = []
        self._lock = threading.Lock()
        self._next_id = 0
        self._stopped = False
        self._listener = rendezvous.DriverListener(host, secret, workers, self._connected)
        build = serve(self._listener.address, secret, dataflow, connect_timeout=timeout)
        self._job = threading.Thread(
            target=self._run_job,
            args=(backend, build, options),
            name="timelypy-session-job",
            daemon=True,
        )
        _register_exit_hook()
        _LIVE.add(self)
        self._job.start()
        try:
            self._await_hellos(timeout)
        except BaseException:
            self.abort()
            raise
        self._listener.close()

    # -- start-up -------------------------------------------------------------------------
    def _run_job(self, backend: Backend, build: Build, options: Dict[str, Any]) -> None:
        try:
            backend.run(build, self.workers, **options)
        except BaseException as exc:  # noqa: BLE001 - reported to the driver
            self._job_error.append(exc)

    def _connected(self, index: int, conn: Connection) -> bool:
        with self._lock:
            if self._conns[index] is not None or self._stopped:
                return False
            self._conns[index] = conn
            return True

    def _await_hellos(self, timeout: float) -> None:
        """Wait until every worker connected and reported its handles (or the job failed)."""
        deadline = _time.monotonic() + timeout
        while any(h is None for h in self._hellos):
            if self._job_error:
                raise self._job_error[0]
            if _time.monotonic() > deadline:
                done = sum(h is not None for h in self._hellos)
                raise WaitTimeoutError(
                    f"session: only {done} of {self.workers} workers connected within {timeout} "
                    f"s ({self._listener.refused} stray connections refused)"
                )
            with self._lock:
                waiting: List[Connection] = [
                    c for c, h in zip(self._conns, self._hellos) if c is not None and h is None
                ]
            if not waiting:
                _time.sleep(0.02)
                continue
            for conn in _ready(waiting):
                i = self._conns.index(conn)
                try:
                    kind, index, _, value = conn.recv()
                except (OSError, EOFError) as exc:
                    raise self._lost(i, exc) from exc
                if kind == ERROR:
                    raise WorkerError(
                        f"worker {index} failed building the dataflow:\n{value}",
                        worker=index,
                        traceback_text=value,
                    )
                if kind != HELLO:  # pragma: no cover - protocol bug
                    raise TimelyError(f"session: worker {index} greeted with {kind!r}")
                self._hellos[i] = value

    @property
    def handles(self) -> Dict[str, Any]:
        """The handle report of worker 0 (every worker builds the same dataflow)."""
        hello = self._hellos[0]
        assert hello is not None  # every worker said hello before the client is handed out
        return hello["handles"]

    def _conn(self, i: int) -> Connection:
        conn = self._conns[i]
        if conn is None:  # pragma: no cover - every worker connected before any command
            raise TimelyError(f"session: worker {i} is not connected")
        return conn

    @property
    def pids(self) -> List[int]:
        """The process id of every worker, in index order."""
        return [h["pid"] for h in self._hellos]  # type: ignore[index]

    # -- commands -------------------------------------------------------------------------
    def unsendable(self, values: Sequence[Any]) -> Optional[str]:
        """Why ``values`` cannot travel to a worker and between workers (None: they can)."""
        if wire.plainly_sendable(list(values)):
            return None
        try:
            ForkingPickler.dumps(list(values))
            wire.encode(list(values))
        except RecursionError:
            return "it is nested too deeply to be sent to a worker"
        except Exception as exc:  # noqa: BLE001 - whatever pickling raises
            return f"it cannot be sent to a worker ({type(exc).__name__}: {exc})"
        return None

    def request(self, commands: Request, timeout: float) -> List[Any]:
        """Send every command (all of them, or none if one cannot be pickled), then collect
        the replies (FIFO per worker)."""
        if self.failure is not None:
            raise self.failure
        pending: Dict[int, int] = {}  # command id -> position in ``commands``
        payloads = []
        for position, (i, command) in enumerate(commands):
            self._next_id += 1
            pending[self._next_id] = position
            try:
                payloads.append((i, ForkingPickler.dumps((self._next_id, command))))
            except Exception as exc:
                raise SessionInputError(
                    f"session: the {command[0]!r} command for worker {i} cannot be sent "
                    f"({type(exc).__name__}: {exc})",
                    worker=i,
                ) from exc
        for i, payload in payloads:
            try:
                self._conn(i).send_bytes(payload)
            except (OSError, EOFError) as exc:
                raise self._fail(self._lost(i, exc)) from exc
        what = ", ".join(sorted({repr(command[0]) for _, command in commands}))
        return self._collect(commands, pending, timeout, what)

    def _collect(
        self, commands: Request, pending: Dict[int, int], timeout: float, what: str
    ) -> List[Any]:
        results: List[Any] = [None] * len(commands)
        failed: Optional[Tuple[int, str, str]] = None
        deadline = _time.monotonic() + timeout
        while pending:
            waiting = {commands[p][0] for p in pending.values()}
            for conn in _ready([self._conn(i) for i in waiting]):
                i = self._conns.index(conn)
                try:
                    kind, index, reply_id, value = conn.recv()
                except (OSError, EOFError) as exc:
                    raise self._fail(self._lost(i, exc)) from exc
                if kind == ERROR:
                    raise self._fail(self._root_cause(index, value, what))
                if reply_id not in pending:  # a late reply to an earlier, timed-out command
                    continue
                position = pending.pop(reply_id)
                if kind == FAILED:
                    failed = failed or (index, value, commands[position][1][0])
                else:
                    results[position] = value
            if pending and self._job_error:
                raise self._fail(self._job_error[0])
            if pending and _time.monotonic() > deadline:
                raise WaitTimeoutError(
                    f"session: {what} not answered by workers {sorted(waiting)} within {timeout} s"
                )
        if failed is not None:
            index, text, kind = failed
            last = text.strip().splitlines()[-1] if text.strip() else "?"
            if kind == WAIT and last.startswith(f"{StallError.__module__}.StallError: "):
                raise StallError(last.split(": ", 1)[1])  # the wait can never finish
            raise SessionCommandError(
                f"session: {kind!r} failed on worker {index}: {last} (the "
                f"worker serves on)\n{text}",
                worker=index,
                traceback_text=text,
            )
        return results

    def _root_cause(self, index: int, value: Any, what: str) -> BaseException:
        """The error to raise for worker ``index``'s ``ERROR`` reply: the job's own failure if
        it reports one within :data:`STOP_WAIT` seconds (its supervisor prefers a worker's own
        error or death to a peer's word that it died, as for ``execute``), else a
        :class:`WorkerDiedError` naming the dead peer the reply names, else the reply as a
        :class:`WorkerError` of worker ``index``."""
        text, peer = error_parts(value)
        self._job.join(STOP_WAIT)
        if self._job_error:
            return self._job_error[0]
        last = text.strip().splitlines()[-1] if text.strip() else "?"
        if peer is not None:
            return WorkerDiedError(
                f"session: worker {peer} died (reported by worker {index} during {what}: {last})",
                worker=peer,
                traceback_text=text,
            )
        return WorkerError(
            f"worker {index} failed during {what}:\n{text}", worker=index, traceback_text=text
        )

    def _lost(self, i: int, exc: BaseException) -> BaseException:
        """The error for a lost connection to worker ``i``: the job's own failure if it
        reports one within a few seconds, else a :class:`WorkerDiedError`."""
        self._job.join(STOP_WAIT)
        if self._job_error:
            return self._job_error[0]
        return WorkerDiedError(f"session: lost the connection to worker {i} ({exc})", worker=i)

    def _fail(self, exc: BaseException) -> BaseException:
        if self.failure is None:
            self.failure = exc
        return exc

    # -- the end --------------------------------------------------------------------------
    def close(self, timeout: float) -> None:
        """Send ``CLOSE`` to every worker and wait until the job ended, all within about
        ``timeout`` seconds; what has not stopped by then is killed (then raises
        :class:`WaitTimeoutError`). A failure already raised is not raised again."""
        deadline = _time.monotonic() + timeout
        problem: Optional[BaseException] = None
        known_failure = self.failure is not None
        if not known_failure:
            try:
                self.request(
                    [(i, (CLOSE,)) for i in range(self.workers)],
                    max(timeout - min(1.0, timeout / 4), 0.05),
                )
            except TimelyError as exc:
                problem = exc
        self._job.join(max(deadline - _time.monotonic(), 0.0))
        if self._job.is_alive() and problem is None:
            problem = WaitTimeoutError(
                f"session: the workers did not stop within {timeout} s "
                f"after close; they were stopped"
            )
        self.abort()
        if problem is None and self._job_error and not known_failure:
            problem = self._job_error[0]
        if problem is not None and not known_failure:
            raise problem

    def abort(self) -> None:
        """Stop at once: cancel the job (its workers are killed) and drop every connection.
        Waits at most :data:`STOP_WAIT` seconds for the job to end. Idempotent."""
        with self._lock:
            first = not self._stopped
            self._stopped = True
        self.cancel.set()
        self._listener.close()
        if first:
            for conn in self._conns:
                if conn is not None:
                    try:
                        conn.close()
                    except Exception:  # noqa: BLE001
                        pass
        if self._job.is_alive() and self._job is not threading.current_thread():
            self._job.join(STOP_WAIT)
            if self._job.is_alive():
                log.warning(
                    "session: the backend's job did not end within %s s after abort", STOP_WAIT
                )
        _LIVE.discard(self)
