"""The launch layer: the worker, execute with a backend registry, the supervisor and sessions."""

from ..errors import StallError
from ..hashing import stable_hash
from .backends import Backend, backend_names, get_backend, register_backend, unregister_backend
from .execute import execute
from .session import DataflowSession, open_session
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
