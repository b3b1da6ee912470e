"""``timelypy.execute``: run a dataflow-building function on the workers of a registered backend."""

from __future__ import annotations

import logging
import time as _time
from typing import Any, Callable, List, Optional, Tuple

from ...stats import Statistics, StatsSink, export_ray_metrics, in_ray_actor
from ..collector import paused_collector
from ..worker import Worker
from .backends import get_backend
from .defaults import resolve_run

__all__ = ["execute", "CollectStatistics"]

log = logging.getLogger(__name__)


def execute(
    build: Callable[[Worker], Any],
    workers: Optional[int] = None,
    backend: Optional[str] = None,
    timeout: Optional[float] = None,
    statistics: Optional[Statistics] = None,
    **options: Any,
) -> List[Any]:
    """Run ``build(worker)`` on every worker and return the list of their results.

    After ``build`` returns, the worker's inputs are closed and it steps until every dataflow
    completes (as timely does when the closure exits).

    ``backend`` names a registered backend (:mod:`timelypy.workers.launch.backends`): ``"inline"``
    (workers in this process; the default), ``"processes"`` (one OS process per worker),
    ``"ray"`` (one Ray actor per worker), or one added with ``register_backend``. ``options``
    go to the backend; an unknown backend name raises :class:`ValueError` listing the others.
    ``workers`` and ``backend`` left unset come from the environment (``TIMELYPY_WORKERS``,
    ``TIMELYPY_BACKEND``; see :mod:`timelypy.workers.launch.defaults`), else 1 and ``"inline"``.

    ``statistics``: a :class:`~timelypy.stats.Statistics` to fill with every worker's
    per-operator statistics once the run completed (see ``docs/debugging.md``); on Ray they are
    also exported as Ray metrics. The return value is the same with or without it.

    >>> import timelypy as tp
    >>> from timelypy.stats import Statistics
    >>> stats = Statistics()
    >>> tp.execute(lambda worker: worker.index, workers=2, statistics=stats)
    [0, 1]
    """
    workers, backend, options = resolve_run(workers, backend, options)
    runner = get_backend(backend)
    if statistics is not None:
        build = CollectStatistics(build, timeout)
    log.debug("execute: %d worker(s) on %s", workers, backend)
    started = _time.monotonic()
    with paused_collector():
        results = runner.run(build, workers, timeout=timeout, **options)
    log.debug(
        "execute: %d worker(s) on %s done in %.3f s", workers, backend, _time.monotonic() - started
    )
    if statistics is not None:
        for _, snapshot in results:
            statistics.add(snapshot)
        results = [result for result, _ in results]
    return results


class CollectStatistics:
    """A ``build`` wrapper that collects the worker's statistics: registers a
    :class:`~timelypy.stats.StatsSink`, runs ``build``, completes the dataflows and returns
    ``(result, snapshot)`` (exporting the snapshot as Ray metrics inside a Ray actor)."""

    def __init__(self, build: Callable[[Worker], Any], timeout: Optional[float] = None) -> None:
        self.build = build
        self.timeout = timeout

    def __call__(self, worker: Worker) -> Tuple[Any, Any]:
        sink = StatsSink(worker.index)
        worker.instruments.add(sink)
        try:
            result = self.build(worker)
            worker.close_inputs()
            worker.step_until_done(timeout=self.timeout)
        finally:
            worker.instruments.remove(sink)
        snapshot = sink.snapshot()
        if in_ray_actor():
            try:
                export_ray_metrics(snapshot)
            except Exception as exc:  # noqa: BLE001 - metrics are a convenience
                log.warning("worker %d: could not export Ray metrics: %s", worker.index, exc)
        return result, snapshot
