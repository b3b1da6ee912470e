"""Run defaults: how many workers and which backend when a program does not say.

Timely's ``execute_from_args`` lets the command line choose the workers of a program written
once; here the same choice travels in the environment, so ``timelypy run prog.py --workers 2
--backend processes`` (or ``TIMELYPY_WORKERS=2 TIMELYPY_BACKEND=processes python prog.py``)
runs a program whose ``execute`` / ``open_session`` calls leave ``workers`` and ``backend``
unset. An explicit argument always wins over the environment.

================================  =====================================================
``TIMELYPY_WORKERS``              number of workers (default 1)
``TIMELYPY_BACKEND``              backend name: inline, processes, ray, ... (default inline)
``TIMELYPY_RAY_ADDRESS``          ``address`` option for the ray backend (default: none)
================================  =====================================================
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Tuple

__all__ = [
    "WORKERS_ENV",
    "BACKEND_ENV",
    "RAY_ADDRESS_ENV",
    "ENGINE_SETTINGS",
    "apply_engine_settings",
    "engine_settings",
    "resolve_run",
]

WORKERS_ENV = "TIMELYPY_WORKERS"
BACKEND_ENV = "TIMELYPY_BACKEND"
RAY_ADDRESS_ENV = "TIMELYPY_RAY_ADDRESS"

ENGINE_SETTINGS = ("TIMELYPY_COLUMNS", "TIMELYPY_GC", "TIMELYPY_WIRE_COLUMNS")
"""The environment variables a worker reads while it runs (the column path, the collector
policy): the launchers hand the driver's values to every worker process and actor, whose own
environment was fixed when its server or node started."""


def engine_settings() -> Dict[str, Optional[str]]:
    """The driver's :data:`ENGINE_SETTINGS` (None: unset), to hand to a worker."""
    return {name: os.environ.get(name) for name in ENGINE_SETTINGS}


def apply_engine_settings(settings: Dict[str, Optional[str]]) -> None:
    """In a worker: take the driver's :data:`ENGINE_SETTINGS` (unset where it had none)."""
    for name, value in settings.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def resolve_run(
    workers: Optional[int], backend: Optional[str], options: Dict[str, Any]
) -> Tuple[int, str, Dict[str, Any]]:
    """The ``(workers, backend, options)`` to run with: arguments first, then the environment.

    Raises :class:`ValueError` naming the variable when the environment holds a bad value.
    """
    if workers is None:
        raw = os.environ.get(WORKERS_ENV, "1")
        try:
            workers = int(raw)
        except ValueError:
            raise ValueError(f"{WORKERS_ENV} must be an integer, got {raw!r}") from None
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if backend is None:
        backend = os.environ.get(BACKEND_ENV) or "inline"
    address = os.environ.get(RAY_ADDRESS_ENV)
    if backend == "ray" and address and "address" not in options:
        options = dict(options, address=address)
    return workers, backend, options
