"""Driver-side sessions: a long-lived dataflow on any backend, driven from the caller's process.

``open_session(dataflow, workers=N, backend=...)`` builds ``dataflow(scope)`` on every worker and
keeps it running. ``dataflow`` returns a dict naming its handles: input sessions (or timely input
handles), probes, captures and arrangements. From the driver (a script, a notebook, a Ray job):

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
anyway); ``advance_to`` and ``wait`` go to every worker. On ``inline`` the driver steps the
workers itself; on ``processes`` and ``ray`` each worker runs a service loop and talks to the
driver over an authenticated connection (``multiprocessing.connection`` with a per-session key).
"""

from __future__ import annotations

import secrets
import threading
import time as _time
import traceback
from multiprocessing.connection import Client, Listener
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..errors import TimelyError, WaitTimeoutError, WorkerDiedError, WorkerError
from ..hashing import stable_hash
from .worker import Worker

__all__ = ["open_session", "DataflowSession"]


# ----------------------------------------------------------------------------- worker side
class _Service:
    """Executes driver commands against one worker's named handles."""

    def __init__(self, worker: Worker, dataflow: Callable[[Any], Dict[str, Any]]):
        self.worker = worker
        handles = worker.dataflow(dataflow)
        if not isinstance(handles, dict):
            raise TimelyError("open_session: the dataflow function must return a dict of named "
                              "handles (inputs, probes, captures, arrangements)")
        self.handles = handles
        self._read: Dict[str, int] = {}

    def _get(self, name: str, kinds: Tuple[str, ...]) -> Any:
        try:
            h = self.handles[name]
        except KeyError:
            raise TimelyError(f"session: no handle named {name!r}; the dataflow returned "
                              f"{sorted(self.handles)}") from None
        if type(h).__name__ not in kinds:
            raise TimelyError(f"session: handle {name!r} is a {type(h).__name__}, expected one "
                              f"of {', '.join(kinds)}")
        return h

    def inputs(self) -> List[Any]:
        return [h for h in self.handles.values()
                if type(h).__name__ in ("InputSession", "InputHandle")]

    def handle(self, cmd: Tuple) -> Any:
        kind = cmd[0]
        if kind == "update":
            _, name, updates = cmd
            h = self._get(name, ("InputSession", "InputHandle"))
            if type(h).__name__ == "InputSession":
                for data, t, diff in updates:
                    h.update_at(data, t, diff)
            else:
                for data, t, _ in updates:
                    h.send(data, t)
            return None
        if kind == "advance":
            _, name, t = cmd
            targets = self.inputs() if name is None else [
                self._get(name, ("InputSession", "InputHandle"))]
            for h in targets:
                if not h.closed:
                    h.advance_to(t)
                    h.flush()
            return None
        if kind == "flush":
            for h in self.inputs():
                if not h.closed:
                    h.flush()
            return None
        if kind == "changes":
            _, name = cmd
            cap = self._get(name, ("CapturedCollection", "Captured"))
            messages = cap.captured.messages if hasattr(cap, "captured") else cap.messages
            start = self._read.get(name, 0)
            self._read[name] = len(messages)
            if hasattr(cap, "captured"):
                return [u for _, data in messages[start:] for u in data]
            return [(t, r) for t, data in messages[start:] for r in data]
        if kind == "lookup":
            _, name, key = cmd
            arr = self._get(name, ("Arranged",))
            acc: Dict[Any, int] = {}
            for v, _t, r in arr.spine.get(key):
                acc[v] = acc.get(v, 0) + r
            return {v: r for v, r in acc.items() if r}
        if kind == "frontier":
            _, name = cmd
            return self._get(name, ("ProbeHandle",)).frontier
        raise TimelyError(f"session: unknown command {kind!r}")

    def probe_passed(self, name: str, t: Any) -> bool:
        probe = self._get(name, ("ProbeHandle",))
        return not probe.less_than(t)


def _serve(address: Tuple[str, int], authkey: bytes, dataflow: Callable) -> Callable[[Worker], Any]:
    """The ``build`` each remote worker runs: a command loop until the driver says close."""

    def build(worker: Worker) -> Any:
        conn = Client(address, authkey=authkey)
        try:
            service = _Service(worker, dataflow)
        except BaseException:
            conn.send(("error", worker.index, None, traceback.format_exc()))
            raise
        conn.send(("hello", worker.index, None, None))

        def read_commands() -> None:
            # Commands enter the worker's own inbox, which also wakes a worker idling in
            # fabric.wait(): a command is picked up at once, not after an idle timeout.
            while True:
                try:
                    item = conn.recv()
                except (EOFError, OSError):
                    item = (None, ("close",))
                worker.fabric.send(worker.index, ("c", item))
                if item[1][0] == "close":
                    return

        threading.Thread(target=read_commands, name="timelypy-session-commands",
                         daemon=True).start()
        waiting: Optional[Tuple[int, str, Any]] = None
        while True:
            while worker.control:
                msg_id, cmd = worker.control.pop(0)
                if cmd[0] == "close":
                    service.worker.close_inputs()
                    if msg_id is not None:
                        conn.send(("ok", worker.index, msg_id, None))
                    return None
                try:
                    if cmd[0] == "wait":
                        waiting = (msg_id, cmd[1], cmd[2])
                    else:
                        conn.send(("ok", worker.index, msg_id, service.handle(cmd)))
                except Exception:
                    conn.send(("error", worker.index, msg_id, traceback.format_exc()))
            if waiting is not None:
                msg_id, probe, t = waiting
                if service.probe_passed(probe, t):
                    conn.send(("ok", worker.index, msg_id, None))
                    waiting = None
                    continue
            try:
                worker.step()
            except Exception:
                conn.send(("error", worker.index, waiting[0] if waiting else None,
                           traceback.format_exc()))
                raise

    return build


# ----------------------------------------------------------------------------- driver side
class DataflowSession:
    """A running dataflow, driven from the caller's process. See :func:`open_session`."""

    def __init__(self, dataflow: Callable, workers: int, backend: str, timeout: float,
                 options: Dict[str, Any]):
        self.workers = workers
        self.backend = backend
        self.timeout = timeout
        self._buffers: Dict[str, List[Tuple[Any, Any, int]]] = {}
        self._time: Any = 0
        self._closed = False
        self._next_id = 0
        if backend == "inline":
            self._start_inline(dataflow)
        else:
            self._start_remote(dataflow, options)

    # -- start-up ---------------------------------------------------------------------
    def _start_inline(self, dataflow: Callable) -> None:
        from ..communication.inline import InlineFabric

        self._remote = False
        if self.workers == 1:
            self._workers = [Worker(0, 1)]
        else:
            # No turn-passing: the driver steps the workers itself, round-robin.
            fabric = InlineFabric(self.workers, baton=False)
            endpoints = [fabric.endpoint(i) for i in range(self.workers)]
            self._workers = [Worker(i, self.workers, endpoints[i]) for i in range(self.workers)]
        self._services = [_Service(w, dataflow) for w in self._workers]

    def _start_remote(self, dataflow: Callable, options: Dict[str, Any]) -> None:
        from .execute import execute

        self._remote = True
        host = options.pop("driver_host", "127.0.0.1")
        authkey = secrets.token_bytes(32)
        self._listener = Listener((host, 0), authkey=authkey)
        address = self._listener.address
        build = _serve(address, authkey, dataflow)
        self._job_error: List[BaseException] = []

        def run() -> None:
            try:
                execute(build, workers=self.workers, backend=self.backend, **options)
            except BaseException as exc:  # noqa: BLE001 - reported to the driver
                self._job_error.append(exc)

        self._job = threading.Thread(target=run, name="timelypy-session-job", daemon=True)
        self._job.start()
        self._conns: List[Any] = [None] * self.workers
        accepted = [0]

        def accept() -> None:
            for _ in range(self.workers):
                try:
                    conn = self._listener.accept()
                except Exception:  # noqa: BLE001 - a failed handshake: keep listening
                    continue
                kind, index, _, text = conn.recv()
                if kind == "error":
                    self._job_error.append(WorkerError(f"worker {index} failed building the "
                                                       f"dataflow:\n{text}", worker=index,
                                                       traceback_text=text))
                    return
                self._conns[index] = conn
                accepted[0] += 1

        acceptor = threading.Thread(target=accept, daemon=True)
        acceptor.start()
        deadline = _time.monotonic() + self.timeout
        while acceptor.is_alive() and _time.monotonic() < deadline:
            acceptor.join(0.1)
            if self._job_error:
                break
        if self._job_error or accepted[0] < self.workers:
            self._abort()
            if self._job_error:
                raise self._job_error[0]
            raise WaitTimeoutError(f"session: only {accepted[0]} of {self.workers} workers "
                                   f"connected within {self.timeout} s")

    # -- commands ---------------------------------------------------------------------
    def _call(self, targets: List[int], cmd: Tuple, timeout: Optional[float] = None) -> List[Any]:
        if self._closed:
            raise TimelyError("session is closed")
        if not self._remote:
            return [self._services[i].handle(cmd) for i in targets]
        self._next_id += 1
        msg_id = self._next_id
        for i in targets:
            self._send(i, (msg_id, cmd))
        return self._collect(targets, msg_id, timeout or self.timeout, cmd[0])

    def _send(self, i: int, message: Any) -> None:
        try:
            self._conns[i].send(message)
        except (OSError, EOFError) as exc:
            raise self._failure(i, exc) from exc

    def _failure(self, i: int, exc: BaseException) -> BaseException:
        self._job.join(5.0)
        if self._job_error:
            return self._job_error[0]
        return WorkerDiedError(f"session: lost the connection to worker {i} ({exc})", worker=i)

    def _collect(self, targets: List[int], msg_id: int, timeout: float, what: str) -> List[Any]:
        results: Dict[int, Any] = {}
        deadline = _time.monotonic() + timeout
        pending = set(targets)
        while pending:
            for i in list(pending):
                conn = self._conns[i]
                try:
                    ready = conn.poll(0.01)
                except (OSError, EOFError) as exc:
                    raise self._failure(i, exc) from exc
                if not ready:
                    continue
                try:
                    kind, index, reply_id, value = conn.recv()
                except (OSError, EOFError) as exc:
                    raise self._failure(i, exc) from exc
                if kind == "error":
                    raise WorkerError(f"worker {index} failed during {what!r}:\n{value}",
                                      worker=index, traceback_text=value)
                if reply_id != msg_id:
                    continue  # a late reply to an earlier, timed-out command
                results[i] = value
                pending.discard(i)
            if pending and _time.monotonic() > deadline:
                raise WaitTimeoutError(f"session: {what!r} not answered by workers "
                                       f"{sorted(pending)} within {timeout} s")
            if pending and self._job_error:
                raise self._job_error[0]
        return [results[i] for i in targets]

    # -- public API -------------------------------------------------------------------
    @property
    def time(self) -> Any:
        """The time the inputs were last advanced to."""
        return self._time

    def update(self, input: str, data: Any, diff: int = 1, time: Any = None) -> None:
        """Change ``data`` by ``diff`` in the named input, at ``time`` (default: now)."""
        t = self._time if time is None else time
        self._buffers.setdefault(input, []).append((data, t, diff))

    def insert(self, input: str, data: Any) -> None:
        self.update(input, data, 1)

    def remove(self, input: str, data: Any) -> None:
        self.update(input, data, -1)

    def update_at(self, input: str, data: Any, time: Any, diff: int) -> None:
        if time < self._time:
            raise TimelyError(f"session: update_at time {time!r} is before the session time "
                              f"{self._time!r}")
        self.update(input, data, diff, time)

    def flush(self) -> None:
        """Send buffered updates to their workers."""
        buffers, self._buffers = self._buffers, {}
        for name, updates in buffers.items():
            parts: List[List[Any]] = [[] for _ in range(self.workers)]
            for u in updates:
                parts[stable_hash(u[0]) % self.workers if self.workers > 1 else 0].append(u)
            for i, part in enumerate(parts):
                if part:
                    self._call([i], ("update", name, part))
        self._call(list(range(self.workers)), ("flush",))

    def advance_to(self, time: Any, input: Optional[str] = None) -> None:
        """Advance every input (or one) to ``time`` and flush."""
        if input is None:
            if time < self._time:
                raise TimelyError(f"session: cannot advance to {time!r}, before {self._time!r}")
            self._time = time
        self.flush()
        self._call(list(range(self.workers)), ("advance", input, time))

    def wait(self, probe: str, time: Any = None, timeout: Optional[float] = None) -> None:
        """Step until the named probe has passed every time before ``time`` (default: the
        session time) on every worker; :class:`WaitTimeoutError` after ``timeout`` seconds."""
        t = self._time if time is None else time
        timeout = self.timeout if timeout is None else timeout
        if not self._remote:
            deadline = _time.monotonic() + timeout
            steps = 0
            while not all(s.probe_passed(probe, t) for s in self._services):
                for w in self._workers:
                    w.step()
                steps += 1
                if (steps & 15) == 0 and _time.monotonic() > deadline:
                    raise WaitTimeoutError(f"session: probe {probe!r} did not pass {t!r} within "
                                           f"{timeout} s")
            return
        self._call(list(range(self.workers)), ("wait", probe, t), timeout)

    def changes(self, capture: str) -> List[Any]:
        """The updates a captured collection produced since the last call (all workers)."""
        out: List[Any] = []
        for part in self._call(list(range(self.workers)), ("changes", capture)):
            out.extend(part)
        return out

    def lookup(self, arranged: str, key: Any) -> Dict[Any, int]:
        """The current values (with counts) of ``key`` in a named arrangement (seed 003's
        interactive queries): asks the worker that owns the key."""
        owner = stable_hash(key) % self.workers if self.workers > 1 else 0
        return self._call([owner], ("lookup", arranged, key))[0]

    def frontier(self, probe: str) -> List[Any]:
        """The named probe's frontier on worker 0."""
        return self._call([0], ("frontier", probe))[0]

    def close(self, timeout: Optional[float] = None) -> None:
        """Close the inputs, let the dataflow complete and stop the workers. Idempotent."""
        if self._closed:
            return
        self.flush()
        if not self._remote:
            for w in self._workers:
                w.close_inputs()
            deadline = _time.monotonic() + (timeout or self.timeout)
            while any(w.has_dataflows() for w in self._workers):
                for w in self._workers:
                    w.step()
                if _time.monotonic() > deadline:
                    raise WaitTimeoutError("session: dataflow did not complete after close")
            self._closed = True
            return
        try:
            self._call(list(range(self.workers)), ("close",), timeout)
        finally:
            self._closed = True
            self._job.join(timeout or self.timeout)
            self._listener.close()
        if self._job_error:
            raise self._job_error[0]

    def _abort(self) -> None:
        self._closed = True
        try:
            self._listener.close()
        except Exception:  # noqa: BLE001
            pass

    def __enter__(self) -> "DataflowSession":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            self.close()
        else:
            self._abort_quietly()
        return False

    def _abort_quietly(self) -> None:
        if self._remote and not self._closed:
            for c in self._conns:
                try:
                    c.close()
                except Exception:  # noqa: BLE001
                    pass
        self._abort()


def open_session(dataflow: Callable[[Any], Dict[str, Any]], workers: int = 1,
                 backend: str = "inline", timeout: float = 60.0, **options: Any) -> DataflowSession:
    """Build ``dataflow`` on ``workers`` workers of ``backend`` and return a driver session.

    ``dataflow(scope)`` must return a dict naming its handles. ``timeout`` bounds every wait
    (start-up, commands, ``wait``, ``close``). Backend ``options`` are passed to ``execute``
    (e.g. ``address`` for Ray); ``driver_host`` sets the address workers connect back to (the
    default 127.0.0.1 suits one machine).
    """
    if backend not in ("inline", "processes", "ray"):
        raise ValueError(f"unknown backend {backend!r}")
    return DataflowSession(dataflow, workers, backend, timeout, dict(options))
