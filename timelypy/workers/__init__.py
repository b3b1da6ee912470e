"""The launch layer: the worker, execute with a backend registry, the supervisor and sessions.

The runtime sits at the top: :mod:`.worker` (builds dataflows, steps them, talks to its peers),
:mod:`.collector` (Python's garbage collector while workers step) and :mod:`.display` (the
progress line of long waits, the worker's and the session's). Two wings sit beside it:

- :mod:`.launch`: starting and supervising workers (``execute``, the backend registry, the
  inline, processes and Ray backends, the supervisor, how functions travel to workers);
- :mod:`.sessions`: the driver's session to running workers (``open_session``, the handle
  protocols, the worker-side command loop, the clients that reach workers in this process or
  elsewhere).
"""

from ..errors import StallError
from ..hashing import stable_hash
from .launch.backends import (
    Backend,
    backend_names,
    get_backend,
    register_backend,
    unregister_backend,
)
from .launch.execute import execute
from .sessions.session import DataflowSession, open_session
from .worker import Worker

__all__ = [
    "execute",
    "open_session",
    "DataflowSession",
    "stable_hash",
    "StallError",
    "Worker",
    "Backend",
    "register_backend",
    "unregister_backend",
    "get_backend",
    "backend_names",
]
