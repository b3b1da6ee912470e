"""``timelypy.execute``: run a dataflow-building function on one or more workers."""

from __future__ import annotations

from typing import Any, Callable, List, Optional

from .worker import Worker, tuned_gc

__all__ = ["execute", "BACKENDS"]

BACKENDS = ("inline", "processes", "ray")


def execute(build: Callable[[Worker], Any], workers: int = 1, backend: str = "inline",
            timeout: Optional[float] = None, **options: Any) -> List[Any]:
    """Run ``build(worker)`` on every worker and return the list of their results.

    After ``build`` returns, the worker's inputs are closed and it steps until every dataflow
    completes (as timely does when the closure exits).

    ``backend``: ``"inline"`` (workers in this process; the default), ``"processes"`` (one OS
    process per worker) or ``"ray"`` (one Ray actor per worker).
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    with tuned_gc():
        return _execute(build, workers, backend, timeout, **options)


def _execute(build: Callable[[Worker], Any], workers: int, backend: str,
             timeout: Optional[float], **options: Any) -> List[Any]:
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS}")
    if backend == "inline":
        if workers == 1:
            worker = Worker(0, 1)
            result = build(worker)
            worker.close_inputs()
            worker.step_until_done(timeout=timeout)
            return [result]
        from .inline import run_inline

        return run_inline(build, workers, timeout=timeout)
    if backend == "processes":
        from .processes import run_processes

        return run_processes(build, workers, timeout=timeout, **options)
    from .ray_backend import run_ray

    return run_ray(build, workers, timeout=timeout, **options)
