"""Workers, the fabric between them, and the backends that run them."""

from .execute import execute
from .hashing import stable_hash
from .worker import StallError, Worker

__all__ = ["execute", "stable_hash", "StallError", "Worker"]
