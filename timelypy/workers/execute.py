"""``timelypy.execute``: run a dataflow-building function on the workers of a registered backend."""

from __future__ import annotations

from typing import Any, Callable, List, Optional

from .backends import get_backend
from .defaults import resolve_run
from .worker import Worker, tuned_gc

__all__ = ["execute"]


def execute(build: Callable[[Worker], Any], workers: Optional[int] = None,
            backend: Optional[str] = None,
            timeout: Optional[float] = None, **options: Any) -> List[Any]:
    """Run ``build(worker)`` on every worker and return the list of their results.

    After ``build`` returns, the worker's inputs are closed and it steps until every dataflow
    completes (as timely does when the closure exits).

    ``backend`` names a registered backend (:mod:`timelypy.workers.backends`): ``"inline"``
    (workers in this process; the default), ``"processes"`` (one OS process per worker),
    ``"ray"`` (one Ray actor per worker), or one added with ``register_backend``. ``options``
    go to the backend; an unknown backend name raises :class:`ValueError` listing the others.
    ``workers`` and ``backend`` left unset come from the environment (``TIMELYPY_WORKERS``,
    ``TIMELYPY_BACKEND``; see :mod:`timelypy.workers.defaults`), else 1 and ``"inline"``.
    """
    workers, backend, options = resolve_run(workers, backend, options)
    runner = get_backend(backend)
    with tuned_gc():
        return runner.run(build, workers, timeout=timeout, **options)
