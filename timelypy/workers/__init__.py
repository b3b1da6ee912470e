"""Workers, the fabric between them, and the backends that run them."""

from .execute import execute
from .session import DataflowSession, open_session
from ..errors import StallError
from ..hashing import stable_hash
from .worker import Worker

__all__ = ["execute", "open_session", "DataflowSession", "stable_hash", "StallError", "Worker"]
