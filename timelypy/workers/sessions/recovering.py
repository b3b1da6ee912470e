"""The worker's side of a session's checkpoints and restore: the recovery commands.

:class:`RecoveryCommands` is the part of :class:`~.service.HandleService` that serves
``CLOSED_AT``, ``CHECKPOINT``, ``FINGERPRINT``, ``RESTORE``, ``MARK_RESTORED`` and ``RESTORED``
(see :mod:`.service`). Everything runs in the worker's process, between two steps: a worker
writes its part of a checkpoint and reads a restored one from the store itself.
"""

from __future__ import annotations

from typing import Any, Dict, List

from ...recovery.session import (
    Checkpoints,
    restore_worker_from,
    worker_closed_at,
    worker_fingerprint,
    write_worker_part,
)
from ..worker import Worker
from .handles import Changes, find_handle

__all__ = ["RecoveryCommands"]


class RecoveryCommands:
    """The recovery commands of a worker's session service."""

    worker: Worker
    handles: Dict[str, Any]
    _read: Dict[str, int]
    _restored: Dict[str, List[Any]]

    def closed_at(self, time: Any) -> bool:
        """No operator of this worker can still receive or hold work before ``time``."""
        return worker_closed_at(self.worker, time)

    def checkpoint(self, checkpoints: Checkpoints, checkpoint_id: str, time: Any) -> Any:
        """Write this worker's part of checkpoint ``checkpoint_id`` at the closed ``time``."""
        return write_worker_part(self.worker, checkpoints, checkpoint_id, time)

    def fingerprint(self) -> Dict[str, str]:
        """The program's shape on this worker."""
        return worker_fingerprint(self.worker)

    def restore(self, checkpoints: Checkpoints, manifest: Any) -> Any:
        """Restore this worker from the checkpoint ``manifest`` of ``checkpoints``; the reply
        is None, or the :class:`~timelypy.errors.CheckpointError` of a file that cannot be
        read (nothing restored: the driver may try an older checkpoint)."""
        return restore_worker_from(self.worker, checkpoints, manifest)

    def mark_restored(self) -> None:
        """Keep what every capture holds now (the restored state) apart: ``CHANGES`` returns
        only what comes after it, ``RESTORED`` returns it."""
        for name, handle in self.handles.items():
            if isinstance(handle, Changes):
                self._restored[name], self._read[name] = handle.changes_from(0)

    def restored(self, name: str) -> List[Any]:
        """What the capture ``name`` held when the session was restored (empty otherwise)."""
        find_handle(self.handles, name, Changes)
        return list(self._restored.get(name, []))
