"""The supervision shared by the backends that run workers elsewhere (processes, Ray actors).

Two halves, written once for both backends:

* **worker side** - :func:`run_worker_main` forms the worker's :class:`SocketMesh`, runs the job's
  :data:`WorkerMain` and reports exactly one outcome: ``(OK, cloudpickled result)`` or
  ``(ERROR, ErrorReport)``. On an error the report goes out *before* the mesh is aborted, so the
  root cause reaches the driver before the peers' reactions ("worker j died").
  :class:`BuildOnMesh` is the :data:`WorkerMain` of a dataflow ``build``.
* **driver side** - a :class:`Supervisor` collects the outcomes and deaths the backend observes,
  decides which failure to raise (a worker's own error, then a death the backend saw, then - after
  :data:`SECONDARY_GRACE` - a peer's report that a worker died), and runs the bounded wait loop.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

import cloudpickle

from ...communication.mesh import Address, MeshFabric, MeshSettings, SocketMesh
from ...errors import (
    WaitTimeoutError,
    WorkerDiedError,
    WorkerError,
    WorkerHungError,
    describe_exception,
    format_exception_safely,
)
from .shipping import dumps as ship_dumps

if TYPE_CHECKING:
    from ..worker import Build

__all__ = [
    "WorkerMain",
    "BuildOnMesh",
    "ErrorReport",
    "Outcome",
    "OK",
    "ERROR",
    "SECONDARY_GRACE",
    "POLL",
    "HEARTBEAT_TIMEOUT",
    "heartbeat_interval",
    "pickle_for_workers",
    "run_worker_main",
    "Supervisor",
    "unpickle_results",
]

log = logging.getLogger(__name__)

WorkerMain = Callable[[int, int, SocketMesh], Any]
"""``worker_main(index, peers, mesh) -> result``: what every worker of a job runs."""

OK = "ok"
"""Outcome tag of a worker that returned: ``(OK, cloudpickled result)``."""
ERROR = "error"
"""Outcome tag of a worker that raised: ``(ERROR, ErrorReport)``."""

Outcome = Tuple[str, Any]
"""What a worker reports when it is done: ``(OK, bytes)`` or ``(ERROR, ErrorReport)``."""

SECONDARY_GRACE = 1.0
"""Seconds to wait for the root cause once a worker reports that a *peer* died."""

POLL = 0.5
"""Longest single wait of a driver loop: every wait is bounded."""

_SECONDARY_POLL = 0.1
"""Wait of a driver loop while it is within the grace period of a secondary report."""

HEARTBEAT_TIMEOUT = 30.0
"""Default seconds a running worker may stay silent before it is declared hung."""


def heartbeat_interval(heartbeat_timeout: Optional[float]) -> Optional[float]:
    """How often a worker says it is alive, for a given ``heartbeat_timeout`` (None: never)."""
    if heartbeat_timeout is None:
        return None
    if heartbeat_timeout <= 0:
        raise ValueError(f"heartbeat_timeout must be positive (or None), got {heartbeat_timeout}")
    return min(1.0, max(0.02, heartbeat_timeout / 5))


# ------------------------------------------------------------------------------------------
# the worker side


@dataclass(frozen=True)
class ErrorReport:
    """A worker's exception, as text that survives any pickling."""

    type: str
    """The exception's class name."""
    message: str
    """``str(exc)`` (or a placeholder if that raises)."""
    traceback: str
    """The formatted traceback."""
    died_peer: Optional[int] = None
    """Set when the error only says that *another* worker died (a secondary report)."""

    @classmethod
    def of(cls, index: int, exc: BaseException) -> "ErrorReport":
        """The report of worker ``index`` that raised ``exc``."""
        died_peer = None
        if isinstance(exc, WorkerDiedError) and exc.worker is not None and exc.worker != index:
            died_peer = exc.worker
        return cls(
            type(exc).__qualname__, describe_exception(exc), format_exception_safely(exc), died_peer
        )


@dataclass(frozen=True)
class BuildOnMesh:
    """The :data:`WorkerMain` that runs a dataflow ``build`` on a worker over the mesh."""

    build: Build
    timeout: Optional[float] = None

    def __call__(self, index: int, peers: int, mesh: SocketMesh) -> Any:
        from ..worker import Worker, run_worker

        return run_worker(Worker(index, peers, MeshFabric(mesh)), self.build, timeout=self.timeout)


def pickle_for_workers(obj: Any, what: str, where: str) -> bytes:
    """``cloudpickle.dumps(obj)`` keeping the file names of functions pickled by value
    (:func:`~timelypy.workers.launch.shipping.dumps`); a failure gets a note saying ``what`` must
    reach ``where``."""
    try:
        return ship_dumps(obj)
    except Exception as exc:
        exc.add_note(f"timelypy: {what} must be picklable with cloudpickle to reach {where}")
        raise


def error_outcome(index: int, exc: BaseException) -> Outcome:
    """The outcome of worker ``index`` that raised ``exc``."""
    return (ERROR, ErrorReport.of(index, exc))


def run_worker_main(
    index: int,
    peers: int,
    listener: Any,
    addresses: Sequence[Address],
    secret: bytes,
    settings: MeshSettings,
    payload: bytes,
    report: Callable[[Outcome], None],
) -> bool:
    """Form the mesh, run the cloudpickled :data:`WorkerMain` ``payload``, ``report`` its outcome.

    Returns whether the worker succeeded. On an error the report is made before the mesh is
    aborted: the peers then see this worker die, and their own (secondary) reports reach the
    driver after this root cause.
    """
    mesh: Optional[SocketMesh] = None
    try:
        worker_main = cloudpickle.loads(payload)
        mesh = SocketMesh(
            index,
            peers,
            listener,
            addresses,
            secret,
            settings.connect_timeout,
            window=settings.window,
            send_timeout=settings.send_timeout,
        )
        data = cloudpickle.dumps(worker_main(index, peers, mesh))
    except BaseException as exc:  # noqa: BLE001 - everything is reported to the driver
        report(error_outcome(index, exc))
        if mesh is not None:
            mesh.abort()
        else:
            listener.close()
        return False
    report((OK, data))
    mesh.close()
    return True


# ------------------------------------------------------------------------------------------
# the driver side


def worker_error(i: int, report: ErrorReport) -> WorkerError:
    """The :class:`WorkerError` raised for worker ``i``'s own error."""
    tb = report.traceback
    return WorkerError(
        f"worker {i} failed: {report.type}: {report.message}\n"
        f"--- traceback in worker {i} ---\n{tb.rstrip()}",
        worker=i,
        traceback_text=tb,
    )


def unpickle_results(payloads: Dict[int, bytes], workers: int, where: str) -> List[Any]:
    """The workers' cloudpickled results in index order; a WorkerError names a worker whose
    result cannot be unpickled in ``where`` (the launcher, the driver)."""
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


class Supervisor:
    """The driver's view of one job: outcomes and deaths, and the failure to raise.

    A backend feeds it with :meth:`take` (a worker's outcome), :meth:`died` (a death it
    observed itself: an exit code, Ray's word) and :meth:`heard` (any sign of life: with
    ``heartbeat_timeout``, :meth:`silent` lists the running workers not heard from for longer),
    and waits with :meth:`wait`, which stops with :class:`WaitTimeoutError` once ``cancel`` is
    set. ``describe(i)`` names worker ``i`` in messages (e.g. with its pid and node).
    """

    def __init__(
        self,
        workers: int,
        describe: Optional[Callable[[int], str]] = None,
        heartbeat_timeout: Optional[float] = None,
        cancel: Optional[threading.Event] = None,
    ) -> None:
        self.workers = workers
        self.describe: Callable[[int], str] = describe or (lambda i: f"worker {i}")
        self.heartbeat_timeout = heartbeat_timeout
        self.cancel = cancel
        self.results: Dict[int, bytes] = {}
        self.errors: List[Tuple[int, ErrorReport]] = []  # in arrival order
        # (index, message, detail, error class), in the order seen
        self.deaths: List[Tuple[int, str, str, type]] = []
        self.secondary_since: Optional[float] = None
        self.last_heard: Dict[int, float] = {}

    def take(self, i: int, outcome: Outcome) -> None:
        """Record worker ``i``'s outcome."""
        tag, body = outcome
        if tag == OK:
            self.results[i] = body
            return
        if tag != ERROR:  # pragma: no cover - protocol bug
            raise RuntimeError(f"unexpected outcome {tag!r} from worker {i}")
        self.errors.append((i, body))
        if body.died_peer is not None and self.secondary_since is None:
            self.secondary_since = time.monotonic()

    def died(self, i: int, message: str, detail: str = "", hung: bool = False) -> None:
        """Record that worker ``i`` died without an outcome (``message`` says how); ``hung``:
        it stopped answering and was killed (:class:`WorkerHungError`)."""
        if not self.answered(i):
            self.deaths.append((i, message, detail, WorkerHungError if hung else WorkerDiedError))
            log.info("%s", message)

    def heard(self, i: int) -> None:
        """Worker ``i`` showed a sign of life just now."""
        self.last_heard[i] = time.monotonic()

    def silent(self) -> List[Tuple[int, float]]:
        """``(worker, seconds silent)`` of every running worker heard from once but not within
        ``heartbeat_timeout`` (none without a ``heartbeat_timeout``)."""
        if self.heartbeat_timeout is None:
            return []
        now = time.monotonic()
        return [
            (i, now - t)
            for i, t in sorted(self.last_heard.items())
            if now - t > self.heartbeat_timeout and not self.answered(i)
        ]

    def hung_message(self, i: int, silence: float) -> str:
        """The message for worker ``i``, silent for ``silence`` seconds."""
        return (
            f"{self.describe(i)} is hung: no heartbeat for {silence:.1f} s "
            f"(heartbeat_timeout={self.heartbeat_timeout} s; stopped, frozen, or blocked "
            f"outside Python); it was killed"
        )

    def answered(self, i: int) -> bool:
        """Worker ``i`` returned, raised or died."""
        return (
            i in self.results
            or any(j == i for j, _ in self.errors)
            or any(d[0] == i for d in self.deaths)
        )

    def all_answered(self) -> bool:
        """Every worker returned, raised or died: nothing more will come."""
        return all(self.answered(i) for i in range(self.workers))

    def unanswered(self) -> List[int]:
        """The workers without an outcome yet, in index order."""
        return [i for i in range(self.workers) if not self.answered(i)]

    def check_failures(self, final: bool = False) -> None:
        """Raise for the first failing worker, preferring root causes to "my peer died".

        A secondary report is raised once it is :data:`SECONDARY_GRACE` old, or at once when
        ``final`` (nothing more will come).
        """
        for i, report in self.errors:
            if report.died_peer is None:
                raise worker_error(i, report)
        if self.deaths:
            i, message, detail, error = self.deaths[0]
            raise error(message, worker=i, traceback_text=detail)
        if self.errors and self.secondary_since is not None:
            if final or time.monotonic() - self.secondary_since >= SECONDARY_GRACE:
                reporter, report = self.errors[0]
                dead = report.died_peer
                assert dead is not None  # the loop above raised for every root cause
                raise WorkerDiedError(
                    f"{self.describe(dead)} died (reported by worker {reporter}: {report.message})",
                    worker=dead,
                    traceback_text=report.traceback,
                )

    def wait(
        self,
        pump: Callable[[float], None],
        done: Callable[[], bool],
        deadline: Optional[float],
        timed_out: Callable[[], str],
    ) -> None:
        """Call ``pump(seconds)`` (take in what arrives, waiting at most that long) until
        ``done()``; raise failures as they appear and :class:`WaitTimeoutError` with the
        message ``timed_out()`` at ``deadline`` (``time.monotonic``; ``None``: no deadline)."""
        while not done():
            self.check_failures()
            if self.cancel is not None and self.cancel.is_set():
                raise WaitTimeoutError(
                    f"the job was cancelled by its driver; workers "
                    f"{self.unanswered()} were still running"
                )
            wait = POLL if self.cancel is None else _SECONDARY_POLL
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise WaitTimeoutError(timed_out())
                wait = min(wait, remaining)
            if self.secondary_since is not None:
                wait = min(wait, _SECONDARY_POLL)
            pump(wait)
        self.check_failures()

    def results_in_order(self, where: str) -> List[Any]:
        """Once every worker answered: raise the job's failure if any, else the results."""
        self.check_failures(final=True)
        return unpickle_results(self.results, self.workers, where)
