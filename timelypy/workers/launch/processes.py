"""The processes backend: one OS process per worker, talking over authenticated loopback TCP.

The user's ``build`` travels to every process with cloudpickle; data and progress batches move
as length-prefixed msgpack frames (see :mod:`timelypy.communication.wire` and
:mod:`timelypy.communication.mesh`); the launcher (:mod:`.launcher`) starts, watches and stops
the processes, with the supervision shared with the Ray backend (:mod:`.supervise`).
"""

from __future__ import annotations

from typing import Any, List, Optional

from ..worker import Build
from .supervise import BuildOnMesh

__all__ = ["run_processes"]


def run_processes(
    build: Build, workers: int, timeout: Optional[float] = None, **options: Any
) -> List[Any]:
    """Run ``build`` on ``workers`` worker processes; return their results in index order.

    ``options`` go to :func:`~timelypy.workers.launch.launcher.run_in_processes` (``start_method``,
    ``connect_timeout``, ``mesh_window``, ``mesh_send_timeout``, ``startup_timeout``, ``grace``,
    ``heartbeat_timeout`` - default 30 s,
    ``None`` disables it - and ``cancel``).
    """
    from .launcher import run_in_processes

    return run_in_processes(BuildOnMesh(build, timeout), workers, timeout=timeout, **options)
