"""The processes backend: one OS process per worker, talking over authenticated loopback TCP.

The user's ``build`` travels to every process with cloudpickle; data and progress batches move
as length-prefixed msgpack frames (see :mod:`.wire` and :mod:`.mesh`); the launcher
(:mod:`.launcher`) starts, watches and stops the processes.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional

from .execute import run_worker
from .worker import Worker

__all__ = ["MeshFabric", "run_processes"]


class MeshFabric:
    """Adapts a :class:`~timelypy.workers.mesh.SocketMesh` to the worker's fabric interface."""

    __slots__ = ("mesh", "index", "peers", "send", "broadcast", "recv_nowait", "wait")

    def __init__(self, mesh: Any):
        self.mesh = mesh
        self.index = mesh.index
        self.peers = mesh.peers
        self.send = mesh.send
        self.broadcast = mesh.broadcast
        self.recv_nowait = mesh.recv_nowait
        self.wait = mesh.wait

    def flush(self) -> None:
        """Frames are written as they are sent; nothing is buffered."""


def run_processes(build: Callable[[Worker], Any], workers: int, timeout: Optional[float] = None,
                  **options: Any) -> List[Any]:
    """Run ``build`` on ``workers`` worker processes; return their results in index order.

    ``options`` go to :func:`~timelypy.workers.launcher.run_in_processes` (``start_method``,
    ``connect_timeout``, ``startup_timeout``, ``grace``).
    """
    from .launcher import run_in_processes

    def worker_main(index: int, peers: int, mesh: Any) -> Any:
        worker = Worker(index, peers, MeshFabric(mesh))
        return run_worker(worker, build, timeout=timeout)

    return run_in_processes(worker_main, workers, timeout=timeout, **options)
