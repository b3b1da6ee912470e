"""The inline backend: workers in this process, stepped in a fixed round-robin order.

One worker runs in the calling thread. With several, each worker runs the user's ``build`` in
its own thread, but only one thread runs at a time: a
worker passes the turn to the next one at the end of every ``step()``. The interleaving, and so
every output, is deterministic. Messages move between workers by reference (no serialisation).

A driver session steps inline workers itself (:func:`local_workers`): no threads, no turns.
"""

from __future__ import annotations

import threading
import time as _time
from typing import Any, Callable, List, Optional, Tuple

from ...communication.inline import Aborted, InlineFabric
from ...errors import WaitTimeoutError, WorkerError, describe_exception, format_exception_safely
from ..worker import Worker, run_worker

__all__ = ["run_inline", "run_inline_backend", "local_workers"]


def run_inline_backend(
    build: Callable[[Worker], Any], workers: int, timeout: Optional[float] = None, **options: Any
) -> List[Any]:
    """The inline backend's run: one worker in this thread, several with :func:`run_inline`.

    The inline backend has no options (``heartbeat_timeout`` is accepted and ignored: inline
    workers are threads of the caller).
    """
    options.pop("heartbeat_timeout", None)
    if options:
        raise TypeError(f"the inline backend takes no options, got {sorted(options)}")
    if workers == 1:
        return [run_worker(Worker(0, 1), build, timeout=timeout)]
    return run_inline(build, workers, timeout=timeout)


def local_workers(workers: int) -> List[Worker]:
    """``workers`` workers of one process for a driver that steps them itself, round-robin
    (their fabric passes no turns)."""
    if workers == 1:
        return [Worker(0, 1)]
    fabric = InlineFabric(workers, baton=False)
    return [Worker(i, workers, fabric.endpoint(i)) for i in range(workers)]


def run_inline(
    build: Callable[[Worker], Any], peers: int, timeout: Optional[float] = None
) -> List[Any]:
    """Run ``build`` on ``peers`` inline workers; return their results in index order.

    The first worker error is re-raised as :class:`~timelypy.errors.WorkerError` naming the
    worker, with the original exception as its cause and its traceback in the message.
    """
    fabric = InlineFabric(peers)
    results: List[Any] = [None] * peers
    errors: List[Optional[Tuple[BaseException, str]]] = [None] * peers

    def body(i: int) -> None:
        try:
            fabric.wait_turn(i)
            results[i] = run_worker(Worker(i, peers, fabric.endpoint(i)), build)
        except Aborted:
            pass
        except BaseException as exc:  # noqa: BLE001 - reported to the caller
            errors[i] = (exc, format_exception_safely(exc))
            fabric.abort()
        finally:
            fabric.retire(i)

    threads = [
        threading.Thread(target=body, args=(i,), name=f"timelypy-worker-{i}", daemon=True)
        for i in range(peers)
    ]
    for t in threads:
        t.start()
    deadline = None if timeout is None else _time.monotonic() + timeout
    for t in threads:
        remaining = None if deadline is None else max(0.0, deadline - _time.monotonic())
        t.join(remaining)
        if t.is_alive():
            fabric.abort()
            for u in threads:
                u.join(5.0)
            raise WaitTimeoutError(
                f"inline run with {peers} workers did not finish within {timeout} s"
            )
    for i, err in enumerate(errors):
        if err is not None:
            exc, tb = err
            raise WorkerError(
                f"worker {i} failed: {type(exc).__name__}: {describe_exception(exc)}\n{tb}",
                worker=i,
                traceback_text=tb,
            ) from exc
    return results
