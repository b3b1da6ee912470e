"""Driver sessions: a long-lived dataflow on any backend, driven from the caller's process.

``open_session(dataflow, workers=N, backend=...)`` builds ``dataflow(scope)`` on every worker and
keeps it running. ``dataflow`` returns a dict naming its handles: inputs (differential input
sessions or timely input handles), probes, captures and arrangements (the kinds of
:mod:`.handles`). From the driver (a script, a notebook, a Ray job):

>>> def dataflow(scope):
...     edges_in, edges = scope.new_collection()
...     degrees = edges.map(lambda e: e[0]).count()
...     return {"edges": edges_in, "degrees": degrees.capture(), "probe": degrees.probe(),
...             "by_node": degrees.arrange_by_key()}
>>> with open_session(dataflow) as s:
...     s.insert("edges", (1, 2)); s.insert("edges", (1, 3))
...     s.advance_to(1)
...     s.wait("probe")
...     s.lookup("by_node", 1)
{2: 1}

Updates are routed to a worker by the hash of the record (downstream operators exchange by key
anyway); ``advance_to`` and ``wait`` go to every worker. The session reaches its workers through
a client: an :class:`InProcessClient` when the backend's workers live in this process (the
driver steps them itself, as on ``inline``), a :class:`RemoteClient` otherwise (each worker runs
the command loop of :mod:`.service` and connects back to the driver over an authenticated
``multiprocessing.connection`` with a per-session key, as on ``processes`` and ``ray``).
"""

from __future__ import annotations

import secrets
import threading
import time as _time
from multiprocessing.connection import Connection, Listener, wait as wait_for_connections
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple

from ..errors import TimelyError, WaitTimeoutError, WorkerDiedError, WorkerError
from ..hashing import stable_hash
from ..order import less_equal
from .backends import Backend, get_backend
from .service import (ADVANCE, CHANGES, CLOSE, ERROR, FLUSH, FRONTIER, HELLO, LOOKUP, UPDATE,
                      WAIT, Command, HandleService, serve)
from .worker import Worker

__all__ = ["open_session", "DataflowSession", "WorkerClient", "InProcessClient", "RemoteClient"]

Request = Sequence[Tuple[int, Command]]
"""``[(worker index, command), ...]``: commands to several workers, answered together."""


class WorkerClient(Protocol):
    """How a session reaches its workers."""

    def request(self, commands: Request, timeout: float) -> List[Any]:
        """Run every ``(worker, command)``; their results in the same order."""

    def close(self, timeout: float) -> None:
        """Close the inputs, let the dataflows complete and stop the workers."""

    def abort(self) -> None:
        """Stop at once (after an error in the driver)."""


# ----------------------------------------------------------------------------- in process
class InProcessClient:
    """Workers in the driver's process: commands are method calls, waiting is stepping."""

    def __init__(self, workers: List[Worker], dataflow: Callable[[Any], Dict[str, Any]]) -> None:
        self._workers = workers
        self._services = [HandleService(w, dataflow) for w in workers]

    def request(self, commands: Request, timeout: float) -> List[Any]:
        """Run the commands one after the other; a ``WAIT`` steps every worker."""
        deadline = _time.monotonic() + timeout
        return [self._run(i, command, deadline, timeout) for i, command in commands]

    def _run(self, i: int, command: Command, deadline: float, timeout: float) -> Any:
        if command[0] != WAIT:
            return self._services[i].handle(command)
        _, probe, t = command
        service = self._services[i]
        self._step_until(lambda: service.probe_passed(probe, t), deadline,
                         f"probe {probe!r} did not pass {t!r} within {timeout} s")
        return None

    def _step_until(self, condition: Callable[[], bool], deadline: float, what: str) -> None:
        """Step every worker, round-robin, until ``condition()``; ``what`` says what timed out."""
        steps = 0
        while not condition():
            for w in self._workers:
                w.step()
            steps += 1
            if (steps & 15) == 0 and _time.monotonic() > deadline:
                raise WaitTimeoutError(f"session: {what}")

    def close(self, timeout: float) -> None:
        """Close every input and step until every dataflow completed."""
        for w in self._workers:
            w.close_inputs()
        self._step_until(lambda: not any(w.has_dataflows() for w in self._workers),
                         _time.monotonic() + timeout,
                         f"the dataflow did not complete within {timeout} s after close")

    def abort(self) -> None:
        """Nothing runs on its own: dropping the workers stops them."""


# ----------------------------------------------------------------------------- remote
class RemoteClient:
    """Workers elsewhere: the backend runs :func:`~.service.serve` on each, and each worker
    connects back to this client's listener (authenticated with a per-session key)."""

    def __init__(self, backend: Backend, dataflow: Callable[[Any], Dict[str, Any]],
                 workers: int, timeout: float, options: Dict[str, Any]) -> None:
        self.workers = workers
        host = options.pop("driver_host", "127.0.0.1")
        authkey = secrets.token_bytes(32)
        self._listener = Listener((host, 0), authkey=authkey)
        self._conns: List[Optional[Connection]] = [None] * workers
        self._job_error: List[BaseException] = []
        self._next_id = 0
        self._job = threading.Thread(
            target=self._run_job, args=(backend, serve(self._listener.address, authkey, dataflow),
                                        options),
            name="timelypy-session-job", daemon=True)
        self._job.start()
        self._accept_workers(timeout)

    def _run_job(self, backend: Backend, build: Callable[[Worker], Any],
                 options: Dict[str, Any]) -> None:
        try:
            backend.run(build, self.workers, **options)
        except BaseException as exc:  # noqa: BLE001 - reported to the driver
            self._job_error.append(exc)

    def _accept_workers(self, timeout: float) -> None:
        """Wait until every worker connected and said hello (or the job failed)."""
        accepted = [0]

        def accept() -> None:
            for _ in range(self.workers):
                try:
                    conn = self._listener.accept()
                except Exception:  # noqa: BLE001 - a failed handshake: keep listening
                    continue
                kind, index, _, text = conn.recv()
                if kind == ERROR:
                    self._job_error.append(WorkerError(
                        f"worker {index} failed building the dataflow:\n{text}", worker=index,
                        traceback_text=text))
                    return
                if kind != HELLO:  # pragma: no cover - protocol bug
                    self._job_error.append(TimelyError(f"session: worker {index} greeted "
                                                       f"with {kind!r}"))
                    return
                self._conns[index] = conn
                accepted[0] += 1

        acceptor = threading.Thread(target=accept, name="timelypy-session-accept", daemon=True)
        acceptor.start()
        deadline = _time.monotonic() + timeout
        while acceptor.is_alive() and _time.monotonic() < deadline and not self._job_error:
            acceptor.join(0.1)
        if self._job_error or accepted[0] < self.workers:
            self.abort()
            if self._job_error:
                raise self._job_error[0]
            raise WaitTimeoutError(f"session: only {accepted[0]} of {self.workers} workers "
                                   f"connected within {timeout} s")

    def request(self, commands: Request, timeout: float) -> List[Any]:
        """Send every command, then collect the replies (FIFO per worker)."""
        pending: Dict[int, int] = {}  # command id -> position in ``commands``
        for position, (i, command) in enumerate(commands):
            self._next_id += 1
            pending[self._next_id] = position
            self._send(i, (self._next_id, command))
        what = sorted({command[0] for _, command in commands})
        return self._collect(commands, pending, timeout, ", ".join(map(repr, what)))

    def _send(self, i: int, message: Any) -> None:
        try:
            self._conns[i].send(message)  # type: ignore[union-attr]
        except (OSError, EOFError) as exc:
            raise self._failure(i, exc) from exc

    def _failure(self, i: int, exc: BaseException) -> BaseException:
        self._job.join(5.0)
        if self._job_error:
            return self._job_error[0]
        return WorkerDiedError(f"session: lost the connection to worker {i} ({exc})", worker=i)

    def _collect(self, commands: Request, pending: Dict[int, int], timeout: float,
                 what: str) -> List[Any]:
        results: List[Any] = [None] * len(commands)
        deadline = _time.monotonic() + timeout
        while pending:
            waiting = {commands[p][0] for p in pending.values()}
            for conn in wait_for_connections([self._conns[i] for i in waiting], 0.1):
                i = self._conns.index(conn)
                try:
                    kind, index, reply_id, value = conn.recv()
                except (OSError, EOFError) as exc:
                    raise self._failure(i, exc) from exc
                if kind == ERROR:
                    raise WorkerError(f"worker {index} failed during {what}:\n{value}",
                                      worker=index, traceback_text=value)
                if reply_id in pending:  # else a late reply to an earlier, timed-out command
                    results[pending.pop(reply_id)] = value
            if pending and _time.monotonic() > deadline:
                raise WaitTimeoutError(f"session: {what} not answered by workers "
                                       f"{sorted(waiting)} within {timeout} s")
            if pending and self._job_error:
                raise self._job_error[0]
        return results

    def close(self, timeout: float) -> None:
        """Send ``CLOSE`` to every worker and wait for the backend's job to end."""
        try:
            self.request([(i, (CLOSE,)) for i in range(self.workers)], timeout)
        finally:
            self._job.join(timeout)
            self._listener.close()
        if self._job_error:
            raise self._job_error[0]

    def abort(self) -> None:
        """Drop every connection: each worker takes that as ``CLOSE``."""
        for conn in self._conns:
            if conn is not None:
                try:
                    conn.close()
                except Exception:  # noqa: BLE001
                    pass
        try:
            self._listener.close()
        except Exception:  # noqa: BLE001
            pass


# ----------------------------------------------------------------------------- the session
class DataflowSession:
    """A running dataflow, driven from the caller's process. See :func:`open_session`."""

    def __init__(self, dataflow: Callable[[Any], Dict[str, Any]], workers: int, backend: str,
                 timeout: float, options: Dict[str, Any]) -> None:
        self.workers = workers
        self.backend = backend
        self.timeout = timeout
        self._buffers: Dict[str, List[Tuple[Any, Any, int]]] = {}
        self._time: Any = 0
        self._closed = False
        runner = get_backend(backend)
        self._client: WorkerClient
        if runner.local_workers is not None:
            options = {k: v for k, v in options.items() if k != "driver_host"}  # no connections
            if options:
                raise TypeError(f"the {backend} backend's sessions take no options, got "
                                f"{sorted(options)}")
            self._client = InProcessClient(runner.local_workers(workers), dataflow)
        else:
            self._client = RemoteClient(runner, dataflow, workers, timeout, dict(options))

    def _call(self, targets: Sequence[int], command: Command,
              timeout: Optional[float] = None) -> List[Any]:
        if self._closed:
            raise TimelyError("session is closed")
        return self._client.request([(i, command) for i in targets], timeout or self.timeout)

    def _owner(self, data: Any) -> int:
        return stable_hash(data) % self.workers if self.workers > 1 else 0

    @property
    def _everyone(self) -> List[int]:
        return list(range(self.workers))

    # -- public API -------------------------------------------------------------------
    @property
    def time(self) -> Any:
        """The time the inputs were last advanced to."""
        return self._time

    def update(self, input: str, data: Any, diff: int = 1, time: Any = None) -> None:
        """Change ``data`` by ``diff`` in the named input, at ``time`` (default: now)."""
        t = self._time if time is None else time
        if time is not None and not less_equal(self._time, time):
            raise TimelyError(f"session: update time {time!r} is not at or after the session "
                              f"time {self._time!r}")
        self._buffers.setdefault(input, []).append((data, t, diff))

    def insert(self, input: str, data: Any) -> None:
        """Add one copy of ``data`` to the named input, now."""
        self.update(input, data, 1)

    def remove(self, input: str, data: Any) -> None:
        """Remove one copy of ``data`` from the named input, now."""
        self.update(input, data, -1)

    def update_at(self, input: str, data: Any, time: Any, diff: int) -> None:
        """Change ``data`` by ``diff`` at ``time`` (at or after the session time)."""
        self.update(input, data, diff, time)

    def flush(self) -> None:
        """Send buffered updates to the workers that own them, and flush every input."""
        if self._closed:
            raise TimelyError("session is closed")
        buffers, self._buffers = self._buffers, {}
        commands: List[Tuple[int, Command]] = []
        for name, updates in buffers.items():
            parts: List[List[Tuple[Any, Any, int]]] = [[] for _ in range(self.workers)]
            for u in updates:
                parts[self._owner(u[0])].append(u)
            commands += [(i, (UPDATE, name, part)) for i, part in enumerate(parts) if part]
        commands += [(i, (FLUSH,)) for i in self._everyone]
        self._client.request(commands, self.timeout)

    def advance_to(self, time: Any, input: Optional[str] = None) -> None:
        """Advance every input (or one) to ``time`` and flush."""
        if input is None:
            if not less_equal(self._time, time):
                raise TimelyError(f"session: cannot advance to {time!r}, before {self._time!r}")
            self._time = time
        self.flush()
        self._call(self._everyone, (ADVANCE, input, time))

    def wait(self, probe: str, time: Any = None, timeout: Optional[float] = None) -> None:
        """Step until the named probe has passed every time before ``time`` (default: the
        session time) on every worker; :class:`WaitTimeoutError` after ``timeout`` seconds."""
        t = self._time if time is None else time
        self._call(self._everyone, (WAIT, probe, t), timeout)

    def changes(self, capture: str) -> List[Any]:
        """The updates a captured collection produced since the last call (all workers)."""
        return [item for part in self._call(self._everyone, (CHANGES, capture)) for item in part]

    def lookup(self, arranged: str, key: Any) -> Dict[Any, int]:
        """The current values (with counts) of ``key`` in a named arrangement: asks the worker
        that owns the key."""
        return self._call([self._owner(key)], (LOOKUP, arranged, key))[0]

    def frontier(self, probe: str) -> List[Any]:
        """The named probe's frontier on worker 0."""
        return self._call([0], (FRONTIER, probe))[0]

    def close(self, timeout: Optional[float] = None) -> None:
        """Close the inputs, let the dataflow complete and stop the workers. Idempotent."""
        if self._closed:
            return
        self.flush()
        try:
            self._client.close(timeout or self.timeout)
        finally:
            self._closed = True

    def abort(self) -> None:
        """Stop the workers at once, without completing the dataflow. Idempotent."""
        if not self._closed:
            self._closed = True
            self._client.abort()

    def __enter__(self) -> "DataflowSession":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        if exc_type is None:
            self.close()
        else:
            self.abort()
        return False


def open_session(dataflow: Callable[[Any], Dict[str, Any]], workers: int = 1,
                 backend: str = "inline", timeout: float = 60.0, **options: Any) -> DataflowSession:
    """Build ``dataflow`` on ``workers`` workers of ``backend`` and return a driver session.

    ``dataflow(scope)`` must return a dict naming its handles. ``timeout`` bounds every wait
    (start-up, commands, ``wait``, ``close``). Backend ``options`` are passed to the backend's
    ``run`` (e.g. ``address`` for Ray); ``driver_host`` sets the address remote workers connect
    back to (the default 127.0.0.1 suits one machine). An unknown backend name raises
    :class:`ValueError` listing the registered ones.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    get_backend(backend)  # fail early and clearly on an unknown name
    return DataflowSession(dataflow, workers, backend, timeout, dict(options))
