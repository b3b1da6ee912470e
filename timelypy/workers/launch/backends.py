"""The backend registry: the named ways to run workers, shared by ``execute`` and ``open_session``.

A backend is a :class:`Backend`: a name, a ``run(build, workers, timeout=None, **options)``
returning every worker's result in index order, and - for a backend whose workers live in the
caller's process - ``local_workers(n)``, which a driver session steps itself. The built-in
``processes`` and ``ray`` backends also take ``heartbeat_timeout`` (seconds a worker may stay
silent before it is declared hung; default 30, ``None`` disables the check) and a ``cancel``
event (:attr:`Backend.cancellable`); ``inline`` accepts and ignores ``heartbeat_timeout`` (its
workers are the caller's threads). A backend without
``local_workers`` runs its workers elsewhere; a session then runs a command loop on every worker
through ``run`` and the workers connect back to the driver.

Adding a backend is one module plus one registration::

    register_backend(Backend("threads", lazy_run("mypackage.threads", "run_threads")))

The built-in backends are ``inline``, ``processes`` and ``ray``; the modules of the last two
(and Ray itself) are imported only when they are first used.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Protocol, Tuple

from ..worker import Build
from . import inline

__all__ = [
    "Backend",
    "RunFunction",
    "register_backend",
    "unregister_backend",
    "get_backend",
    "backend_names",
    "lazy_run",
]


class RunFunction(Protocol):
    """``run(build, workers, timeout=None, **options) -> [result of worker 0, 1, ...]``."""

    def __call__(
        self,
        build: Build,
        workers: int,
        timeout: Optional[float] = None,
        **options: Any,
    ) -> List[Any]: ...


@dataclass(frozen=True)
class Backend:
    """A named way to run workers (see the module docstring)."""

    name: str
    """The name ``execute(..., backend=name)`` and ``open_session(..., backend=name)`` take."""
    run: RunFunction
    """Runs ``build`` on ``workers`` workers; returns their results in index order."""
    local_workers: Optional[Callable[[int], List[Any]]] = None
    """``local_workers(n)``: ``n`` workers in this process that a driver session steps itself
    (None: the workers run elsewhere and a session's workers connect back to the driver)."""
    description: str = ""
    """One line for listings and error messages."""
    cancellable: bool = False
    """``run`` takes a ``cancel`` option (a :class:`threading.Event`): once it is set, the job
    stops within a second or so, killing its workers (a session's ``close`` and ``abort`` use
    it to honour their bounds)."""

    @property
    def in_process(self) -> bool:
        """A driver session steps this backend's workers in its own process."""
        return self.local_workers is not None


_REGISTRY: Dict[str, Backend] = {}


def register_backend(backend: Backend, *, replace: bool = False) -> Backend:
    """Make ``backend`` available under ``backend.name``; returns it.

    Raises :class:`ValueError` if the name is taken (unless ``replace``) or empty.
    """
    if not isinstance(backend, Backend):
        raise TypeError(f"register_backend expects a Backend, got {type(backend).__name__}")
    if not backend.name:
        raise ValueError("a backend needs a non-empty name")
    if backend.name in _REGISTRY and not replace:
        raise ValueError(
            f"a backend named {backend.name!r} is already registered "
            f"(pass replace=True to replace it)"
        )
    _REGISTRY[backend.name] = backend
    return backend


def unregister_backend(name: str) -> None:
    """Remove the backend registered as ``name`` (a no-op if there is none)."""
    _REGISTRY.pop(name, None)


def backend_names() -> Tuple[str, ...]:
    """The names of the registered backends, in registration order."""
    return tuple(_REGISTRY)


def get_backend(name: str) -> Backend:
    """The backend registered as ``name``; :class:`ValueError` listing the registered ones."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown backend {name!r}; registered backends: {', '.join(backend_names())}"
        ) from None


def lazy_run(module: str, function: str) -> RunFunction:
    """A run function that imports ``module`` (and calls its ``function``) only when called."""

    def run(
        build: Build, workers: int, timeout: Optional[float] = None, **options: Any
    ) -> List[Any]:
        target = getattr(importlib.import_module(module), function)
        return target(build, workers, timeout=timeout, **options)

    run.__name__ = run.__qualname__ = f"lazy_{function}"
    run.__doc__ = f"Imports {module} when first called and runs its {function}."
    return run


register_backend(
    Backend(
        "inline",
        inline.run_inline_backend,
        local_workers=inline.local_workers,
        description="workers in this process, taking turns deterministically",
    )
)
register_backend(
    Backend(
        "processes",
        lazy_run("timelypy.workers.launch.processes", "run_processes"),
        description="one local OS process per worker, joined by an authenticated TCP mesh",
        cancellable=True,
    )
)
register_backend(
    Backend(
        "ray",
        lazy_run("timelypy.workers.launch.ray_actors", "run_ray"),
        description="one Ray actor per worker, joined by an authenticated TCP mesh",
        cancellable=True,
    )
)
