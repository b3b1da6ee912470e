"""How a driver session reaches its workers: the client protocol and the choice of client.

A session talks to its workers only through a :class:`WorkerClient`. :func:`connect` picks one
from the backend: an :class:`~.inprocess.InProcessClient` when the backend's workers live in
this process (the driver steps them itself, as on ``inline``), a :class:`~.remote.RemoteClient`
otherwise (the workers run the command loop of :mod:`.serving` and connect back to the driver).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Protocol, Sequence

from ...stats import StatsSink
from ..launch.backends import get_backend
from .handles import Dataflow
from .inprocess import InProcessClient
from .remote import RemoteClient, Request

if TYPE_CHECKING:
    from ...dataflow.scope import Scope

__all__ = ["WorkerClient", "WithStatistics", "connect", "abandoned", "Dataflow"]

log = logging.getLogger(__name__)


class WorkerClient(Protocol):
    """How a session reaches its workers."""

    failure: Optional[BaseException]
    """Set once a worker failed: the session cannot go on."""

    @property
    def handles(self) -> Dict[str, Any]:
        """The workers' report of their handles (:func:`~.handles.describe_handles`)."""

    @property
    def pids(self) -> List[int]:
        """The process id of every worker."""

    def unsendable(self, values: Sequence[Any]) -> Optional[str]:
        """Why ``values`` cannot reach the workers (None: they can)."""

    def request(self, commands: Request, timeout: float) -> List[Any]:
        """Run every ``(worker, command)``; their results in the same order."""

    def close(self, timeout: float) -> None:
        """Close the inputs, let the dataflows complete and stop the workers."""

    def abort(self) -> None:
        """Stop at once (after an error in the driver)."""


class WithStatistics:
    """A session's dataflow function that first registers a
    :class:`~timelypy.stats.StatsSink` on its worker (``open_session(..., statistics=True)``)."""

    def __init__(self, dataflow: Dataflow) -> None:
        self.dataflow = dataflow

    def __call__(self, scope: Scope) -> Dict[str, Any]:
        worker = scope.worker
        if not any(isinstance(s, StatsSink) for s in worker.instruments.sinks):
            worker.instruments.add(StatsSink(worker.index))
        return self.dataflow(scope)


def abandoned(client: WorkerClient) -> None:
    """A session was garbage-collected or the interpreter exits with it open: stop it."""
    if isinstance(client, RemoteClient):
        log.warning("a driver session was not closed; stopping its %d workers", client.workers)
        client.abort()


def connect(
    backend: str, dataflow: Dataflow, workers: int, timeout: float, options: Dict[str, Any]
) -> WorkerClient:
    """Start ``workers`` workers of ``backend`` running ``dataflow`` and return the client that
    reaches them (``timeout`` bounds the start-up; ``options`` go to the backend)."""
    runner = get_backend(backend)
    if runner.local_workers is not None:
        # No connections, and the workers are this process's: no heartbeats either.
        options = {
            k: v for k, v in options.items() if k not in ("driver_host", "heartbeat_timeout")
        }
        if options:
            raise TypeError(
                f"the {backend} backend's sessions take no options, got {sorted(options)}"
            )
        return InProcessClient(runner.local_workers(workers), dataflow)
    return RemoteClient(runner, dataflow, workers, timeout, dict(options))
