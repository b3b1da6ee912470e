"""What the parts of a driver session share: its state and its call to the workers.

:class:`~.session.DataflowSession` is put together from parts, each a class of its own module:
its inputs (:mod:`.inputs`: updates, flushes, advances), its reads and waits (:mod:`.reads`) and
its checkpoints (:mod:`.durable`). :class:`SessionCore` declares what they use of the session;
the session defines it.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Set

from .batch import Batch
from .client import WorkerClient
from .commands import Command
from .durable import Durability
from .handles import HandleDirectory

__all__ = ["SessionCore"]


class SessionCore:
    """The state and the calls the parts of :class:`~.session.DataflowSession` share."""

    workers: int
    timeout: float
    progress: Optional[bool]
    _sent: int
    _sent_before_wait: int
    _time: Any
    _batch: Batch
    _client: WorkerClient
    _handles: HandleDirectory
    _input_times: Dict[str, Any]
    _fresh_buffered: Set[str]
    _fresh_sent: Set[str]
    _broken: Optional[BaseException]
    _durable: Durability

    def _check_usable(self) -> None:  # pragma: no cover - the session's
        raise NotImplementedError

    def _call(
        self, targets: Sequence[int], command: Command, timeout: Optional[float] = None
    ) -> List[Any]:  # pragma: no cover - the session's
        raise NotImplementedError

    @property
    def _everyone(self) -> List[int]:  # pragma: no cover - the session's
        raise NotImplementedError

    def _checkpoint_if_due(self, time: Any) -> None:  # pragma: no cover - the checkpoints'
        # (CheckpointingSession's comes first in DataflowSession's bases, so this stub only
        # types the inputs' call)
        raise NotImplementedError
